package server_test

import (
	"context"
	"fmt"
	"strconv"
	"testing"
	"time"

	"github.com/grapnel-io/grapnel/cluster/clustertest"
	"github.com/grapnel-io/grapnel/fsm"
	"github.com/grapnel-io/grapnel/rpc/ankbase"
	"github.com/grapnel-io/grapnel/rpc/client"
	"github.com/grapnel-io/grapnel/server/testcluster"
	"github.com/grapnel-io/grapnel/state"
)

func strp(s string) *string { return &s }

// addWorkload is an UpdateState that adds one workload.
func addWorkload(name string) *ankbase.Request {
	return &ankbase.Request{RequestContent: &ankbase.Request_UpdateStateRequest{UpdateStateRequest: &ankbase.UpdateStateRequest{
		NewState: &ankbase.CompleteState{DesiredState: &ankbase.State{ApiVersion: "v1", Workloads: &ankbase.WorkloadMap{
			Workloads: map[string]*ankbase.Workload{name: {
				Agent: strp("agent_A"), Runtime: strp("podman"), RuntimeConfig: strp("image: " + name),
			}},
		}}},
		UpdateMask: []string{"desiredState.workloads." + name},
	}}}
}

func dial(t *testing.T, addrs ...string) *client.Conn {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	c, err := client.Dial(ctx, client.Options{Addrs: addrs, Insecure: true, ResponseTimeout: 10 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return c
}

func hasWorkload(f *fsm.FSM, name string) bool {
	var ok bool
	f.Read(func(st *state.Store, _ uint64) { _, ok = st.Desired.Workloads[name] })
	return ok
}

func term(t *testing.T, c *testcluster.Cluster, id string) uint64 {
	v, err := strconv.ParseUint(c.Node(id).Stats()["term"], 10, 64)
	if err != nil {
		t.Fatal(err)
	}
	return v
}

// Losing the leader gives a new leader in a higher term, and every update
// the old one acknowledged is there.
func TestLeaderLossKeepsAcknowledgedUpdates(t *testing.T) {
	c := testcluster.New(t, 3, clustertest.InMemory())
	old := c.WaitServing(20 * time.Second)
	oldTerm := term(t, c, old)
	conn := dial(t, c.Addrs()...)
	var acked []string
	for i := range 20 {
		name := fmt.Sprintf("acked-%d", i)
		if _, err := conn.Request(context.Background(), addWorkload(name)); err != nil {
			t.Fatalf("update %d: %v", i, err)
		}
		acked = append(acked, name)
	}
	c.Stop(old)
	next := c.WaitServing(20*time.Second, old)
	if nt := term(t, c, next); nt <= oldTerm {
		t.Fatalf("new leader %s in term %d, old term %d", next, nt, oldTerm)
	}
	for _, name := range acked {
		if !hasWorkload(c.FSM(next), name) {
			t.Fatalf("acknowledged update %s lost after the failover", name)
		}
	}
	// The CLI finds the new leader through the survivors.
	conn2 := dial(t, c.Addrs()...)
	if _, err := conn2.Request(context.Background(), addWorkload("after")); err != nil {
		t.Fatalf("update after the failover: %v", err)
	}
}

// A leader cut off from the others cannot acknowledge anything; the
// majority elects a new leader that does, and after healing the old one
// holds the majority's state, not its own unacknowledged update.
func TestPartitionedLeaderCannotAcknowledge(t *testing.T) {
	c := testcluster.New(t, 3, clustertest.InMemory())
	old := c.WaitServing(20 * time.Second)
	toOld := dial(t, c.Addr(old))
	if _, err := toOld.Request(context.Background(), addWorkload("before")); err != nil {
		t.Fatal(err)
	}
	c.Isolate(old)
	ctx, cancel := context.WithTimeout(context.Background(), 15*time.Second)
	defer cancel()
	resp, err := toOld.Request(ctx, addWorkload("isolated"))
	if err == nil {
		t.Fatalf("the isolated leader acknowledged an update: %v", resp)
	}
	next := c.WaitServing(20*time.Second, old)
	var majority []string
	for _, id := range c.IDs() {
		if id != old {
			majority = append(majority, c.Addr(id))
		}
	}
	if _, err := dial(t, majority...).Request(context.Background(), addWorkload("majority")); err != nil {
		t.Fatalf("the majority (leader %s) did not take an update: %v", next, err)
	}
	c.Heal()
	c.WaitFor("the old leader to catch up", 20*time.Second, func() bool { return hasWorkload(c.FSM(old), "majority") })
	for _, id := range c.IDs() {
		if hasWorkload(c.FSM(id), "isolated") {
			t.Fatalf("%s holds the update the isolated leader never acknowledged", id)
		}
		if !hasWorkload(c.FSM(id), "before") {
			t.Fatalf("%s lost an acknowledged update", id)
		}
	}
}
