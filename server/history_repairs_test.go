package server

import (
	"testing"
	"time"

	"github.com/grapnel-io/grapnel/internal/testwait"
	"github.com/grapnel-io/grapnel/state"
)

// repairsOf lists the instances of the Repair transactions in ts's
// history.
func repairsOf(ts *testServer) []string {
	var out []string
	for _, tx := range txsOf(ts) {
		if tx.Kind == state.TxRepair {
			out = append(out, tx.Workloads[0].Instance)
		}
	}
	return out
}

// Requirement (issue 30, point 2, D3 and D9), as the seed check met it:
// an agent's drift repair that removes an unknown instance is a Repair in
// the history; and after the replica restarts (its stored states turn
// Pending(Initial) until the agent reports), the agent's report of the
// same lost instance is no second Repair.
func TestDriftRepairsRecordedOnceAcrossARestart(t *testing.T) {
	dir := t.TempDir()
	ts := startServerIn(t, dir, mustState(t, twoAgents))
	var inst state.InstanceName
	ts.store(func(s *state.Store) { inst = s.Rendered["wl_a"].Instance })
	rogue := state.NewInstanceName("rogue", "agent_A", "x")
	lost := state.ExecutionState{State: state.StateFailed, SubState: state.SubLost,
		AdditionalInfo: state.DriftPrefix + "removed behind the agent's back; repair: none (restartPolicy NEVER)"}
	removed := state.ExecutionState{State: state.StateRemoved, SubState: string(state.StateRemoved),
		AdditionalInfo: state.DriftPrefix + "unknown instance with the agent's labels (process rogue); repair: removed by resync"}

	a, _ := ts.hello("agent_A", 7, nil)
	a.report(1, state.WorkloadState{Instance: inst, State: state.RunningOk})
	a.report(2, state.WorkloadState{Instance: inst, State: lost}, state.WorkloadState{Instance: rogue, State: removed})
	testwait.For(t, 10*time.Second, func() bool { return len(repairsOf(ts)) == 2 }, "two repairs")
	if got := repairsOf(ts); got[0] != inst.String() || got[1] != rogue.String() {
		t.Fatalf("repairs %v", got)
	}
	a.close()
	ts.stop()

	ts2 := startServerIn(t, dir, nil)
	defer ts2.stop()
	testwait.For(t, 10*time.Second, func() bool { s, _ := ts2.stateOf(inst); return s == state.PendingInitial }, "the state unconfirmed after the restart")
	a2, _ := ts2.hello("agent_A", 7, nil)
	a2.report(3, state.WorkloadState{Instance: inst, State: lost})
	testwait.For(t, 10*time.Second, func() bool { s, _ := ts2.stateOf(inst); return s == lost }, "the agent's report after the restart")
	if got := repairsOf(ts2); len(got) != 2 {
		t.Fatalf("after the restart the repairs are %v, want the two from before", got)
	}
}
