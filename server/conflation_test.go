package server

import (
	"fmt"
	"testing"
	"time"

	"github.com/grapnel-io/grapnel/fsm"
	"github.com/grapnel-io/grapnel/internal/clock"
	"github.com/grapnel-io/grapnel/internal/testwait"
	"github.com/grapnel-io/grapnel/rpc"
	"github.com/grapnel-io/grapnel/rpc/ankbase"
	"github.com/grapnel-io/grapnel/rpc/grpcapi"
	"github.com/grapnel-io/grapnel/state"
)

// holdFSM blocks the FSM's apply until the returned release is called, so
// that the first batch stays in flight while reports pile up.
func holdFSM(ts *testServer) (release func()) {
	held, done := make(chan struct{}), make(chan struct{})
	go ts.fsm.Read(func(*state.Store, uint64) {
		close(held)
		<-done
	})
	<-held
	return func() { close(done) }
}

// Reports that arrive while a batch is in flight are conflated: the
// newest state per instance wins and they go out as one entry; a report
// older than one already accepted from the agent is dropped. States are
// forwarded only once committed.
//
// swdd~server-stores-workload-state~1
// swdd~server-forwards-workload-state~1
func TestStateReportsConflatedAndBatched(t *testing.T) {
	ts := startServer(t, mustState(t, twoAgents))
	agent, _ := ts.hello("agent_A", 7, nil)
	cli := ts.cli()
	cli.get()
	count := countEntries(ts)
	x := state.NewInstanceName("wl_a", "agent_A", "image: a")
	y := state.NewInstanceName("other", "agent_A", "other")
	starting := state.ExecutionState{State: state.StatePending, SubState: state.SubStarting}
	failed := state.ExecutionState{State: state.StateFailed, SubState: state.SubExecFailed}

	release := holdFSM(ts)
	agent.report(1, state.WorkloadState{Instance: x, State: starting})
	for gen := uint64(2); gen <= 200; gen++ {
		s := starting
		if gen%2 == 0 {
			s = state.RunningOk
		}
		agent.report(gen, state.WorkloadState{Instance: x, State: s}, state.WorkloadState{Instance: y, State: starting})
	}
	agent.report(150, state.WorkloadState{Instance: x, State: failed}) // stale
	agent.sync("reports sent")
	release()

	testwait.For(t, 5e9, func() bool { return count(fsm.WorkloadReportsType) == 2 }, "the conflated batch")
	if s, _ := ts.stateOf(x); s != state.RunningOk {
		t.Fatalf("stored state of %v: %v, want the newest report's", x, s)
	}
	if s, _ := ts.stateOf(y); s != starting {
		t.Fatalf("stored state of %v: %v", y, s)
	}
	ts.store(func(s *state.Store) {
		if m := s.ReportMarks["agent_A"]; m != (state.ReportMark{Incarnation: 7, Generation: 200}) {
			t.Errorf("stored mark %v", m)
		}
	})
	// The CLI sees the first report, then the conflated one; never the
	// stale one.
	first := cli.expect("first batch", isStateOf(x)).GetUpdateWorkloadState()
	second := cli.expect("second batch", isStateOf(x)).GetUpdateWorkloadState()
	if st := stateIn(first, x); st != starting {
		t.Fatalf("first broadcast %v", st)
	}
	if st := stateIn(second, x); st != state.RunningOk || len(second.GetWorkloadStates()) != 2 {
		t.Fatalf("second broadcast %v", second)
	}
	cli.get() // ordered after both batches
	if _, ok := cli.tryExpect(0, isStateOf(x)); ok {
		t.Fatal("a third broadcast of the conflated instance")
	}
	if n := count(fsm.WorkloadReportsType); n != 2 {
		t.Fatalf("%d report entries for 201 reports", n)
	}
}

// The report marks are replicated: after a restart the new leader drops a
// report older than the stored mark, from the same incarnation.
func TestStaleReportDroppedByNewLeader(t *testing.T) {
	dir := t.TempDir()
	ts := startServerIn(t, dir, mustState(t, twoAgents))
	agent, _ := ts.hello("agent_A", 7, nil)
	x := state.NewInstanceName("wl_a", "agent_A", "image: a")
	agent.report(10, state.WorkloadState{Instance: x, State: state.RunningOk})
	testwait.For(t, 5e9, func() bool { s, _ := ts.stateOf(x); return s == state.RunningOk }, "report stored")
	ts.stop()

	// A fake clock that never moves keeps agent_A in its grace.
	// (The restart stands in for a failover: the stored states are trusted.)
	ts2 := startServerCfg(t, dir, nil, func(c *Config) {
		c.Clock, c.TrustStoredStatesAtStart = clock.NewFake(time.Unix(0, 0)), true
	})
	agent2, _ := ts2.hello("agent_A", 7, nil)
	failed := state.ExecutionState{State: state.StateFailed, SubState: state.SubExecFailed}
	agent2.report(9, state.WorkloadState{Instance: x, State: failed})
	agent2.sync("stale sent")
	cli := ts2.cli()
	cli.get() // answered after any batch proposed before it
	if s, _ := ts2.stateOf(x); s != state.RunningOk {
		t.Fatalf("a stale report overwrote the state: %v", s)
	}
	agent2.report(11, state.WorkloadState{Instance: x, State: failed})
	testwait.For(t, 5e9, func() bool { s, _ := ts2.stateOf(x); return s == failed }, "newer report stored")
	// A new incarnation starts its generations again.
	agent3, _ := ts2.hello("agent_A", 8, nil)
	agent3.report(1, state.WorkloadState{Instance: x, State: state.RunningOk})
	testwait.For(t, 5e9, func() bool { s, _ := ts2.stateOf(x); return s == state.RunningOk }, "new incarnation's report stored")
}

// Load reports never reach Raft: many of them from several agents leave
// the Raft index where it was, and the newest of each agent is served.
//
// swdd~server-receives-resource-availability~2
func TestLoadReportsCreateNoEntries(t *testing.T) {
	ts := startServer(t, nil)
	agents := make([]*testConn, 3)
	for i := range agents {
		agents[i] = ts.agent(fmt.Sprintf("agent_%d", i), nil)
	}
	cli := ts.cli()
	cli.get()
	applied := ts.fsm.AppliedIndex()
	for cpu := uint32(1); cpu <= 50; cpu++ {
		for i, c := range agents {
			c.send(&grpcapi.ToServer{ToServerEnum: &grpcapi.ToServer_AgentLoadStatus{AgentLoadStatus: &grpcapi.AgentLoadStatus{
				AgentName: fmt.Sprintf("agent_%d", i), CpuUsage: &ankbase.CpuUsage{CpuUsage: cpu}, FreeMemory: &ankbase.FreeMemory{FreeMemory: uint64(cpu)}}}})
		}
	}
	for _, c := range agents {
		c.sync("loads sent")
	}
	got := cli.get("agents").GetAgents().GetAgents()
	for i := range agents {
		if cpu := got[fmt.Sprintf("agent_%d", i)].GetStatus().GetCpuUsage().GetCpuUsage(); cpu != 50 {
			t.Fatalf("agent_%d shows cpu %d, want the newest report's 50", i, cpu)
		}
	}
	// Loads go to no entry at all (AgentLoadType is retired).
	if ts.fsm.AppliedIndex() != applied {
		t.Fatalf("load reports were committed: Raft index %d -> %d", applied, ts.fsm.AppliedIndex())
	}
}

func stateIn(u *grpcapi.UpdateWorkloadState, n state.InstanceName) state.ExecutionState {
	for _, ws := range u.GetWorkloadStates() {
		if rpc.InstanceNameFromProto(ws.GetInstanceName()) == n {
			s, _ := rpc.ExecutionStateFromProto(ws.GetExecutionState())
			return s
		}
	}
	return state.ExecutionState{}
}
