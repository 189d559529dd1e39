package server

import (
	"testing"
	"time"

	"github.com/grapnel-io/grapnel/internal/testwait"
	"github.com/grapnel-io/grapnel/state"
)

// After an agent restarts (a new incarnation, as after a power cycle), the
// states it reported in its previous life are not shown as current: they
// turn AgentDisconnected at its hello, as Ankaios shows an agent that has
// not reported, until the new incarnation reports. A reconnection of the
// same incarnation, and an Ankaios agent (no incarnation), keep them.
func TestRestartedAgentStatesAreNotShownAsCurrent(t *testing.T) {
	ts := startServer(t, mustState(t, twoAgents))
	var inst state.InstanceName
	ts.store(func(s *state.Store) { inst = s.Rendered["wl_a"].Instance })
	waitState := func(what string, want state.ExecutionState) {
		t.Helper()
		testwait.For(t, 10*time.Second, func() bool { s, _ := ts.stateOf(inst); return s == want }, "%s", what)
	}

	c1, _ := ts.hello("agent_A", 1, nil)
	c1.report(1, state.WorkloadState{Instance: inst, State: state.RunningOk})
	waitState("Running from incarnation 1", state.RunningOk)

	c1.close()
	c1b, _ := ts.hello("agent_A", 1, nil) // the same process reconnects
	c1b.sync("same-life")
	if s, _ := ts.stateOf(inst); s != state.RunningOk {
		t.Fatalf("a reconnection of the same incarnation changed the state to %v", s)
	}

	c1b.close()
	c2, _ := ts.hello("agent_A", 2, nil) // the agent restarted
	waitState("AgentDisconnected after a restart, before any report", state.AgentDisconnected)
	c2.report(1, state.WorkloadState{Instance: inst, State: state.SucceededOk})
	waitState("the new incarnation's report", state.SucceededOk)

	// The agent restarts with its counter lost and its clock behind: a
	// lower incarnation. Its reports still count, as the next life's.
	c2.close()
	c3, _ := ts.hello("agent_A", 1, nil)
	waitState("AgentDisconnected after a restart that went back, before any report", state.AgentDisconnected)
	c3.report(1, state.WorkloadState{Instance: inst, State: state.RunningOk})
	waitState("the report of a restart that went back", state.RunningOk)

	c3.close()
	c0, _ := ts.hello("agent_A", 0, nil) // an Ankaios agent sends no incarnation
	c0.sync("ankaios")
	if s, _ := ts.stateOf(inst); s != state.RunningOk {
		t.Fatalf("an agent without incarnation changed the state to %v", s)
	}
}

// A replica restarted on its own (here the only voter; in a cluster, all
// of them powered on together) never followed a leader since it started,
// so the states in its store date from before: a Grapnel agent's
// workloads show Pending(Initial) until the agent reports, and then what
// it reports. An Ankaios agent reports only changes, so its states stay.
func TestFreshLeaderDoesNotServeStatesFromBeforeItsStart(t *testing.T) {
	dir := t.TempDir()
	ts := startServerIn(t, dir, mustState(t, twoAgents))
	var instA, instB state.InstanceName
	ts.store(func(s *state.Store) { instA, instB = s.Rendered["wl_a"].Instance, s.Rendered["wl_b"].Instance })
	waitState := func(ts *testServer, inst state.InstanceName, what string, want state.ExecutionState) {
		t.Helper()
		testwait.For(t, 10*time.Second, func() bool { s, _ := ts.stateOf(inst); return s == want }, "%s", what)
	}
	a, _ := ts.hello("agent_A", 7, nil) // a Grapnel agent
	a.report(1, state.WorkloadState{Instance: instA, State: state.RunningOk})
	b, _ := ts.hello("agent_B", 0, nil) // an Ankaios agent
	b.report(0, state.WorkloadState{Instance: instB, State: state.RunningOk})
	waitState(ts, instA, "agent_A's Running", state.RunningOk)
	waitState(ts, instB, "agent_B's Running", state.RunningOk)
	a.close()
	b.close()
	ts.stop()

	ts2 := startServerIn(t, dir, nil)
	defer ts2.stop()
	waitState(ts2, instA, "agent_A's workload unconfirmed after the restart", state.PendingInitial)
	if s, _ := ts2.stateOf(instB); s != state.RunningOk {
		t.Fatalf("the Ankaios agent's workload shows %v after the restart, want its last report Running(Ok)", s)
	}
	// The same agent process reconnects and reports again, as a Grapnel
	// agent does after every ServerHello.
	a2, _ := ts2.hello("agent_A", 7, nil)
	a2.report(2, state.WorkloadState{Instance: instA, State: state.RunningOk})
	waitState(ts2, instA, "agent_A's report after the restart", state.RunningOk)
}
