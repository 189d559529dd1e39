package server_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/grapnel-io/grapnel/rpc"
	"github.com/grapnel-io/grapnel/rpc/ankbase"
	"github.com/grapnel-io/grapnel/server/testcluster"
	"github.com/grapnel-io/grapnel/state"
)

// A config nested 4,000 levels deep used to commit and then fail to
// decode on every replica, crash-looping the whole cluster on every
// restart. Now the leader refuses it: no replica's state changes, every
// replica keeps serving, and the whole cluster restarts.
func TestDeepConfigRefusedByTheCluster(t *testing.T) {
	c := testcluster.New(t, 3)
	c.WaitServing(20 * time.Second)
	if _, err := requestRetrying(t, c, addWorkload("before")); err != nil {
		t.Fatal(err)
	}
	before := c.WaitConverged()

	var deep any = "leaf"
	for range 3999 {
		deep = []any{deep}
	}
	cs, err := rpc.CompleteStateFromTree(state.Tree{"desiredState": map[string]any{"configs": map[string]any{"deep": deep}}})
	if err != nil {
		t.Fatal(err)
	}
	_, err = requestRetrying(t, c, &ankbase.Request{RequestContent: &ankbase.Request_UpdateStateRequest{
		UpdateStateRequest: &ankbase.UpdateStateRequest{NewState: cs, UpdateMask: []string{"desiredState.configs.deep"}}}})
	if err == nil || !strings.Contains(err.Error(), "max_config_depth") || !strings.Contains(err.Error(), "desiredState.configs.deep") {
		t.Fatalf("the deep config was not refused clearly: %v", err)
	}
	if _, err := requestRetrying(t, c, addWorkload("after")); err != nil {
		t.Fatalf("the cluster stopped serving: %v", err)
	}
	after := c.WaitConverged()
	if len(after) <= len(before) {
		t.Fatal("the update after the refusal is missing")
	}
	for _, id := range c.IDs() {
		if h := c.FSM(id).Halted(); h != nil {
			t.Fatalf("replica %s halted: %v", id, h)
		}
	}

	ids := c.IDs()
	for _, id := range ids {
		c.Stop(id)
	}
	c.RestartAll(ids...)
	c.WaitServing(30 * time.Second)
	if _, err := requestRetrying(t, c, addWorkload("restarted")); err != nil {
		t.Fatalf("the restarted cluster does not serve: %v", err)
	}
	c.WaitFor("every replica to hold the state from before the restart", 20*time.Second, func() bool {
		for _, id := range ids {
			if !hasWorkload(c.FSM(id), "after") || !hasWorkload(c.FSM(id), "restarted") {
				return false
			}
		}
		return true
	})
}

// requestRetrying sends a request through a fresh connection, again when
// leadership moved under it (the two cores are shared with the other
// tests, so an election may happen at any time); an answer, refusal
// included, ends it.
func requestRetrying(t *testing.T, c *testcluster.Cluster, req *ankbase.Request) (*ankbase.Response, error) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		resp, err := dial(t, c.Addrs()...).Request(ctx, req)
		cancel()
		// A lost connection (a replica starved of CPU for a second by the
		// other tests missed its Watch heartbeat) is retried as well.
		if err == nil {
			return resp, nil
		}
		moved := strings.Contains(err.Error(), "lead") || strings.Contains(err.Error(), "connection to the server lost")
		if !moved || time.Now().After(deadline) {
			return resp, err
		}
		c.WaitServing(20 * time.Second)
	}
}
