package server_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/grapnel-io/grapnel/fsm"
	"github.com/grapnel-io/grapnel/rpc/ankbase"
	"github.com/grapnel-io/grapnel/server/testcluster"
	"github.com/grapnel-io/grapnel/state"
)

// refusalsOf counts the refusals a replica's history holds whose reason
// contains what.
func refusalsOf(f *fsm.FSM, what string) int {
	n := 0
	f.Read(func(st *state.Store, _ uint64) {
		if st.History == nil {
			return
		}
		for _, tx := range st.History.Txs {
			if tx.Kind == state.TxRejected && strings.Contains(tx.Reason, what) {
				n += max(1, int(tx.Count))
			}
		}
	})
	return n
}

// Requirement (issue 30, point 9): the history holds every refusal a
// client saw, across the loss of the leader: a refusal is answered only
// once an entry holds it, so killing the leader right after the answer
// loses nothing. (Before, the leader answered at once and kept the
// refusal in its memory for up to 10 s; the kill lost it.)
func TestRefusalAnsweredSurvivesLeaderKill(t *testing.T) {
	c := testcluster.New(t, 3)
	old := c.WaitServing(20 * time.Second)
	conn := dial(t, c.Addrs()...)
	bad := &ankbase.Request{RequestContent: &ankbase.Request_UpdateStateRequest{UpdateStateRequest: &ankbase.UpdateStateRequest{
		NewState:   &ankbase.CompleteState{DesiredState: &ankbase.State{ApiVersion: "v9-refused"}},
		UpdateMask: []string{"desiredState"},
	}}}
	if resp, err := conn.Request(context.Background(), bad); err == nil || !strings.Contains(err.Error(), "v9-refused") {
		t.Fatalf("the bad apiVersion was not refused: %v, %v", resp, err)
	}
	c.Stop(old)
	next := c.WaitServing(20*time.Second, old)
	// The new leader applies what the old one committed once it leads
	// (its Barrier); a refusal only the old leader knew never comes.
	c.WaitFor("the refusal in the new leader's history", 10*time.Second, func() bool {
		return refusalsOf(c.FSM(next), "v9-refused") == 1
	})
}
