package server

import (
	"testing"
	"time"

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
		waitFor(t, 10*time.Second, what, func() bool { s, _ := ts.stateOf(inst); return s == want })
	}

	c1, _ := ts.hello("agent_A", 1, nil)
	c1.report(1, state.WorkloadState{Instance: inst, State: state.RunningOk})
	waitState("Running from incarnation 1", state.RunningOk)

	c1.close()
	c1b, _ := ts.hello("agent_A", 1, nil) // the same process reconnects
	c1b.sync("agent_A", "same-life")
	if s, _ := ts.stateOf(inst); s != state.RunningOk {
		t.Fatalf("a reconnection of the same incarnation changed the state to %v", s)
	}

	c1b.close()
	c2, _ := ts.hello("agent_A", 2, nil) // the agent restarted
	waitState("AgentDisconnected after a restart, before any report", state.AgentDisconnected)
	c2.report(1, state.WorkloadState{Instance: inst, State: state.SucceededOk})
	waitState("the new incarnation's report", state.SucceededOk)

	c2.close()
	c0, _ := ts.hello("agent_A", 0, nil) // an Ankaios agent sends no incarnation
	c0.sync("agent_A", "ankaios")
	if s, _ := ts.stateOf(inst); s != state.SucceededOk {
		t.Fatalf("an agent without incarnation changed the state to %v", s)
	}
}
