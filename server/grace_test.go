package server

import (
	"slices"
	"testing"
	"time"

	"google.golang.org/protobuf/proto"

	"github.com/grapnel-io/grapnel/fsm"
	"github.com/grapnel-io/grapnel/internal/clock"
	"github.com/grapnel-io/grapnel/internal/testwait"
	"github.com/grapnel-io/grapnel/rpc/ankbase"
	"github.com/grapnel-io/grapnel/rpc/grpcapi"
	"github.com/grapnel-io/grapnel/state"
)

const testGrace = 3 * time.Second

// failover runs a replica with an agent that reports a running workload
// and its load, then stops it without the agent leaving, and starts it
// again on the same data with a fake clock: the new leader finds agent_A
// in the agent map with no stream.
func failover(t *testing.T) (*testServer, *clock.Fake, *grpcapi.ServerHello) {
	t.Helper()
	dir := t.TempDir()
	ts := startServerCfg(t, dir, mustState(t, twoAgents), nil)
	agent, hello := ts.hello("agent_A", 1, map[string]string{"zone": "front"})
	agent.report(1, state.WorkloadState{Instance: instA, State: state.RunningOk})
	agent.send(&grpcapi.ToServer{ToServerEnum: &grpcapi.ToServer_AgentLoadStatus{AgentLoadStatus: &grpcapi.AgentLoadStatus{
		AgentName: "agent_A", CpuUsage: &ankbase.CpuUsage{CpuUsage: 42}, FreeMemory: &ankbase.FreeMemory{FreeMemory: 7}}}})
	testwait.For(t, 5e9, func() bool {
		ok := false
		ts.store(func(s *state.Store) {
			st, _ := s.States.Get(instA)
			ok = st == state.RunningOk && s.Agents["agent_A"] != nil
		})
		return ok
	}, "state stored")
	agent.sync("load handled")
	ts.stop()
	fake := clock.NewFake(time.Unix(1_700_000_000, 0))
	// The restart of the only replica stands in for a failover: the new
	// leader trusts the stored states, as one that followed the old
	// leader does.
	ts2 := startServerCfg(t, dir, nil, func(c *Config) {
		c.Clock, c.AgentReconnectGrace, c.TrustStoredStatesAtStart = fake, testGrace, true
	})
	if n := fake.PendingFor(testGrace); n != 1 {
		t.Fatalf("%d grace timers, want one for agent_A", n)
	}
	return ts2, fake, hello
}

var instA = state.NewInstanceName("wl_a", "agent_A", "image: a")

// An agent that reconnects to a new leader within the grace changes
// nothing visible: no AgentConnected entry, no event, its workloads still
// running; it gets the same workloads as before. Its load lived in the
// old leader's memory only: the new leader shows none until it reports.
func TestAgentBackWithinGraceChangesNothing(t *testing.T) {
	ts, fake, before := failover(t)
	count := countEntries(ts)
	cli := ts.cli()
	id := subscribe(cli)
	fake.Advance(testGrace - time.Millisecond)
	_, hello := ts.hello("agent_A", 1, map[string]string{"zone": "front"})
	if len(hello.GetAddedWorkloads()) != 1 || !proto.Equal(hello, before) {
		t.Fatalf("ServerHello after the failover differs:\n%v\n%v", hello, before)
	}
	if fake.PendingFor(testGrace) != 0 {
		t.Fatal("the grace timer still runs after the agent came back")
	}
	fake.Advance(time.Hour)
	// An update's event comes after any event the reconnection caused.
	cli.update(manifest(t, nginx), "desiredState.workloads.nginx")
	for {
		ev := nextEvent(cli, id)
		fields := slices.Concat(ev.GetAlteredFields().GetAddedFields(), ev.GetAlteredFields().GetUpdatedFields(), ev.GetAlteredFields().GetRemovedFields())
		for _, f := range fields {
			if f == "agents.agent_A" || f == statePath(instA) {
				t.Fatalf("the reconnection was visible: %v", fields)
			}
		}
		if slices.Contains(fields, "desiredState.workloads.nginx") {
			break
		}
	}
	if n := count(fsm.AgentConnectedType) + count(fsm.AgentGoneType); n != 0 {
		t.Fatalf("%d agent entries for a reconnection within the grace", n)
	}
	if a := cli.get("agents.agent_A").GetAgents().GetAgents()["agent_A"]; a == nil || a.GetStatus().GetCpuUsage() != nil || a.GetTags().GetTags()["zone"] != "front" {
		t.Fatalf("agent map entry %v", a)
	}
	ts.store(func(s *state.Store) {
		if st, _ := s.States.Get(instA); st != state.RunningOk {
			t.Fatalf("state %v", st)
		}
	})
}

// An agent that does not come back within the grace is gone, as after a
// disconnect: its workloads AgentDisconnected, broadcast, and out of the
// agent map.
//
// swdd~server-set-workload-state-on-disconnect~1
// swdd~server-distribute-workload-state-on-disconnect~1
// swdd~server-removes-disconnected-agents-from-state~2
func TestAgentNotBackWithinGraceIsGone(t *testing.T) {
	ts, fake, _ := failover(t)
	other := ts.agent("agent_B", nil)
	fake.Advance(testGrace - time.Millisecond)
	cli := ts.cli()
	cli.get() // ordered after anything a timer might have proposed
	if _, ok := ts.stateOf(instA); !ok {
		t.Fatal("gone before the grace ended")
	}
	fake.Advance(time.Millisecond)
	other.expect("AgentDisconnected", func(m *grpcapi.FromServer) bool {
		return stateIn(m.GetUpdateWorkloadState(), instA) == state.AgentDisconnected
	})
	testwait.For(t, 5e9, func() bool {
		gone := false
		ts.store(func(s *state.Store) { _, ok := s.Agents["agent_A"]; gone = !ok })
		return gone
	}, "agent_A removed")
	if st, _ := ts.stateOf(instA); st != state.AgentDisconnected {
		t.Fatalf("stored %v", st)
	}
}

// An agent that comes back within the grace with other tags is stored
// again with them, as a connect.
//
// swdd~server-stores-newly-connected-agent~2
func TestAgentBackWithOtherTagsReconnects(t *testing.T) {
	ts, _, _ := failover(t)
	count := countEntries(ts)
	ts.hello("agent_A", 2, map[string]string{"zone": "rear"})
	testwait.For(t, 5e9, func() bool {
		ok := false
		ts.store(func(s *state.Store) { ok = s.Agents["agent_A"] != nil && s.Agents["agent_A"].Tags["zone"] == "rear" })
		return ok
	}, "new tags")
	if count(fsm.AgentConnectedType) != 1 {
		t.Fatal("no AgentConnected entry for changed tags")
	}
}

// A broken agent stream gets the same reconnect grace as a failover: an
// agent back within it changes nothing, one that stays away is gone when
// it ends. So does an agent that said Goodbye (a clean stop, systemd's
// restart of the agent, issue 30): it stays in the agent map through the
// grace, but its workloads read AgentDisconnected at once, as nobody
// observes them any more; back within the grace it is not gone, away
// past it it is.
//
// swdd~server-set-workload-state-on-disconnect~1
func TestBrokenAgentStreamGetsTheGrace(t *testing.T) {
	for _, tc := range []struct {
		name    string
		goodbye bool
		back    bool
	}{
		{name: "back within the grace", back: true},
		{name: "away past the grace"},
		{name: "goodbye, back within the grace", goodbye: true, back: true},
		{name: "goodbye, away past the grace", goodbye: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			fake := clock.NewFake(time.Unix(1_700_000_000, 0))
			ts := startServerCfg(t, t.TempDir(), mustState(t, twoAgents), func(c *Config) { c.Clock, c.AgentReconnectGrace = fake, testGrace })
			count := countEntries(ts)
			agent, _ := ts.hello("agent_A", 1, nil)
			agent.report(1, state.WorkloadState{Instance: instA, State: state.RunningOk})
			testwait.For(t, 5e9, func() bool { st, _ := ts.stateOf(instA); return st == state.RunningOk }, "running stored")
			if tc.goodbye {
				// As an agent leaves: Goodbye, then the end of what it sends;
				// the server ends the stream once it has read both. A cancel
				// right after the send could cut the Goodbye off.
				agent.send(&grpcapi.ToServer{ToServerEnum: &grpcapi.ToServer_Goodbye{Goodbye: &grpcapi.Goodbye{}}})
				if err := agent.stream.CloseSend(); err != nil {
					t.Fatal(err)
				}
				testwait.For(t, 5e9, func() bool { return agent.streamErr() != nil }, "the server to end the stream")
			}
			agent.close()
			// Within the grace: a broken stream shows what was last
			// reported, a goodbye AgentDisconnected; the agent stays.
			within := state.RunningOk
			if tc.goodbye {
				within = state.AgentDisconnected
				testwait.For(t, 5e9, func() bool { st, _ := ts.stateOf(instA); return st == within }, "AgentDisconnected after goodbye")
			}
			testwait.For(t, 5e9, func() bool { return fake.PendingFor(testGrace) == 1 }, "the grace timer")
			fake.Advance(testGrace - time.Millisecond)
			if tc.back {
				ts.hello("agent_A", 1, nil)
			}
			ts.cli().get() // ordered after anything the timer proposed
			present := false
			ts.store(func(s *state.Store) { present = s.Agents["agent_A"] != nil })
			if st, _ := ts.stateOf(instA); st != within || !present || count(fsm.AgentGoneType) != 0 {
				t.Fatalf("within the grace: state %v (want %v), in the agent map %v, %d AgentGone entries", st, within, present, count(fsm.AgentGoneType))
			}
			fake.Advance(time.Millisecond)
			if tc.back {
				ts.cli().get()
				if st, _ := ts.stateOf(instA); st != within || count(fsm.AgentGoneType) != 0 {
					t.Fatalf("state %v, %d AgentGone entries after coming back", st, count(fsm.AgentGoneType))
				}
				return
			}
			testwait.For(t, 5e9, func() bool {
				st, _ := ts.stateOf(instA)
				gone := false
				ts.store(func(s *state.Store) { gone = s.Agents["agent_A"] == nil })
				return st == state.AgentDisconnected && gone && count(fsm.AgentGoneType) == 1
			}, "AgentDisconnected and out of the agent map after the grace")
		})
	}
}
