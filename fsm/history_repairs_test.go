package fsm

import (
	"testing"

	"github.com/hashicorp/raft"

	"github.com/grapnel-io/grapnel/state"
)

// Requirement (issue 30, point 2, D3 and D9): every drift repair is
// recorded, once. The removal of an unknown instance with the agent's
// labels is a repair although the store never held the instance; a
// repair an agent reports again after the server set its state aside (a
// whole-cluster restart leaves Pending(Initial), an agent gone
// AgentDisconnected) is not recorded twice; a new repair of the same
// instance after it ran again is. Before the cluster version allows it
// the FSM records as the previous release does, so that replicas of both
// releases hold the same history.
func TestHistoryRecordsEveryRepairOnce(t *testing.T) {
	rogue := state.NewInstanceName("rogue", "agent_A", "x")
	rogueRemoved := state.ExecutionState{State: state.StateRemoved, SubState: string(state.StateRemoved),
		AdditionalInfo: state.DriftPrefix + "unknown instance with the agent's labels (process rogue); repair: removed by resync"}
	for _, tc := range []struct {
		version uint32
		want    []string // the instances of the repairs, in order
	}{
		{state.ClusterVersionRevocation, []string{inst.String(), rogue.String(), inst.String()}},
		{state.ClusterVersionBaseline, []string{inst.String(), inst.String(), inst.String(), inst.String()}},
	} {
		f := New()
		run := func(c Command) {
			t.Helper()
			buf, err := Encode(c)
			if err != nil {
				t.Fatal(err)
			}
			index++
			if err, ok := f.Apply(&raft.Log{Index: index, Type: raft.LogCommand, Data: buf}).(error); ok {
				t.Fatalf("apply %s: %v", c.Type(), err)
			}
		}
		report := func(inc, gen uint64, ms int64, states ...state.WorkloadState) {
			run(&WorkloadReportsRequest{History: at(ms), Reports: []AgentReport{{Agent: "agent_A",
				Mark: state.ReportMark{Incarnation: inc, Generation: gen}, States: states}}})
		}
		if tc.version > 0 {
			run(&SetClusterVersionRequest{Version: tc.version})
		}
		apply(t, f, webUpdate())
		run(&AgentConnectedRequest{Name: "agent_A"})
		report(1, 1, 1000, state.WorkloadState{Instance: inst, State: state.RunningOk})
		report(1, 2, 1100, state.WorkloadState{Instance: inst, State: lostByDrift})   // repaired
		report(1, 3, 1200, state.WorkloadState{Instance: rogue, State: rogueRemoved}) // an unknown one removed
		run(&WorkloadReportsRequest{History: &HistoryMeta{TimeMs: 1300, Decision: "elected without following a leader since start"},
			Reports: []AgentReport{{Agent: "agent_A", States: []state.WorkloadState{{Instance: inst, State: state.PendingInitial}}}}})
		report(1, 4, 1400, state.WorkloadState{Instance: inst, State: lostByDrift}) // reported again after the restart
		run(&AgentGoneRequest{Name: "agent_A", History: at(1500)})
		run(&AgentConnectedRequest{Name: "agent_A"})
		report(2, 1, 1600, state.WorkloadState{Instance: inst, State: lostByDrift}) // and after the agent's
		report(2, 2, 1700, state.WorkloadState{Instance: inst, State: state.RunningOk})
		report(2, 3, 1800, state.WorkloadState{Instance: inst, State: lostByDrift}) // a new repair

		var got []string
		for _, tx := range read(f).History.Txs {
			if tx.Kind == state.TxRepair {
				if len(tx.Workloads) != 1 || tx.Requester != "agent_A" || tx.TimeMs == 0 {
					t.Fatalf("cluster version %d: repair %+v", tc.version, *tx)
				}
				got = append(got, tx.Workloads[0].Instance)
			}
		}
		if len(got) != len(tc.want) {
			t.Fatalf("cluster version %d: repairs of %v, want %v\n%s", tc.version, got, tc.want, dump(read(f).History.Txs))
		}
		for i := range got {
			if got[i] != tc.want[i] {
				t.Fatalf("cluster version %d: repairs of %v, want %v", tc.version, got, tc.want)
			}
		}
	}
}
