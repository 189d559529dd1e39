package server

import (
	"testing"
	"time"

	"github.com/grapnel-io/grapnel/internal/clock"
	"github.com/grapnel-io/grapnel/internal/testwait"
	"github.com/grapnel-io/grapnel/state"
)

// Ending the term (here by shutting the server down) while an update is
// in flight and an agent is in its grace: the loop stops without waiting
// for the commit, the grace timer is stopped, the gate closes, and the
// update is not acknowledged.
func TestEndOfTermStopsLeaderWork(t *testing.T) {
	dir := t.TempDir()
	ts := startServerCfg(t, dir, mustState(t, twoAgents), nil)
	ts.hello("agent_A", 1, nil)
	testwait.For(t, 5e9, func() bool {
		ok := false
		ts.store(func(s *state.Store) { _, ok = s.Agents["agent_A"] })
		return ok
	}, "agent_A stored")
	ts.stop()
	fake := clock.NewFake(time.Unix(1_700_000_000, 0))
	ts2 := startServerCfg(t, dir, nil, func(c *Config) { c.Clock = fake })
	if n := fake.PendingFor(DefaultAgentReconnectGrace); n != 1 {
		t.Fatalf("%d grace timers", n)
	}
	cli := ts2.cli()
	cli.get()
	release := holdFSM(ts2)
	cli.send(workloadUpdate(t, "in-flight", "w", "x"))
	done := make(chan struct{})
	go func() {
		ts2.srv.Shutdown()
		close(done)
	}()
	select {
	case <-done:
	case <-time.After(10 * time.Second):
		t.Fatal("shutdown waited for an entry that cannot commit")
	}
	release()
	if ts2.srv.IsLeading() {
		t.Fatal("still leading")
	}
	// Only the grace timers: the streams' drain timers use the same clock
	// and stop as their handlers return, which may be just after Shutdown.
	if fake.PendingFor(DefaultAgentReconnectGrace) != 0 {
		t.Fatal("a grace timer survived the term")
	}
	if m, ok := cli.tryExpect(2*time.Second, isResponse); ok && m.GetResponse().GetUpdateStateSuccess() != nil {
		t.Fatal("an update was acknowledged after the term ended")
	}
}
