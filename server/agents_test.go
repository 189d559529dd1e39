package server

import (
	"testing"

	"github.com/grapnel-io/grapnel/internal/testwait"
	"github.com/grapnel-io/grapnel/rpc"
	"github.com/grapnel-io/grapnel/rpc/ankbase"
	"github.com/grapnel-io/grapnel/rpc/grpcapi"
	"github.com/grapnel-io/grapnel/rpc/wire"
	"github.com/grapnel-io/grapnel/state"
)

const twoAgents = `
apiVersion: v1
workloads:
  wl_a:
    runtime: podman
    agent: agent_A
    runtimeConfig: "image: a"
  wl_b:
    runtime: podman
    agent: agent_B
    runtimeConfig: "image: b"
  unscheduled:
    runtime: podman
    agent: ""
    runtimeConfig: "image: c"
`

// swdd~server-starts-without-startup-config~1
// swdd~server-state-in-memory~1
func TestServerStartsEmpty(t *testing.T) {
	ts := startServer(t, nil)
	cs := ts.cli().get()
	if n := len(cs.GetDesiredState().GetWorkloads().GetWorkloads()); n != 0 {
		t.Fatalf("empty start has %d workloads", n)
	}
	if v := cs.GetDesiredState().GetApiVersion(); v != state.APIVersion {
		t.Fatalf("apiVersion %q", v)
	}
}

// swdd~server-loads-startup-state-file~3
// swdd~server-sets-state-of-new-workloads-to-pending~1
func TestStartupStateLoadedWithInitialStates(t *testing.T) {
	ts := startServer(t, mustState(t, twoAgents))
	var got map[string]state.ExecutionState
	ts.store(func(s *state.Store) {
		got = map[string]state.ExecutionState{}
		for _, ws := range s.States.All() {
			got[ws.Instance.WorkloadName] = ws.State
		}
	})
	want := map[string]state.ExecutionState{"wl_a": state.PendingInitial, "wl_b": state.PendingInitial, "unscheduled": state.NotScheduled}
	for wl, s := range want {
		if got[wl] != s {
			t.Errorf("%s: state %v, want %v", wl, got[wl], s)
		}
	}
}

// swdd~server-sends-all-workloads-on-start~2
// swdd~agent-from-agent-field~1
// swdd~server-stores-newly-connected-agent~2
// swdd~communication-to-from-server-middleware~1
// swdd~server-default-communication-grpc~1
func TestAgentHelloGetsItsWorkloads(t *testing.T) {
	ts := startServer(t, mustState(t, twoAgents))
	c := ts.dial(wire.KindAgent)
	c.send(&grpcapi.ToServer{ToServerEnum: &grpcapi.ToServer_AgentHello{AgentHello: &grpcapi.AgentHello{
		AgentName: "agent_A", ProtocolVersion: rpc.ProtocolVersion, Tags: &ankbase.Tags{Tags: map[string]string{"zone": "front"}}}}})
	hello := c.expect("ServerHello", func(m *grpcapi.FromServer) bool { return m.GetServerHello() != nil }).GetServerHello()
	if len(hello.GetAddedWorkloads()) != 1 || hello.GetAddedWorkloads()[0].GetInstanceName().GetWorkloadName() != "wl_a" {
		t.Fatalf("agent_A got %v", hello.GetAddedWorkloads())
	}
	wl := hello.GetAddedWorkloads()[0]
	want := state.NewInstanceName("wl_a", "agent_A", "image: a")
	if rpc.InstanceNameFromProto(wl.GetInstanceName()) != want {
		t.Fatalf("instance %v, want %v", wl.GetInstanceName(), want)
	}
	cs := ts.cli().get("agents")
	a := cs.GetAgents().GetAgents()["agent_A"]
	if a == nil || a.GetTags().GetTags()["zone"] != "front" {
		t.Fatalf("agent map: %v", cs.GetAgents())
	}
}

// swdd~server-informs-a-newly-connected-agent-workload-states~1
// swdd~server-forwards-workload-state~1
// swdd~server-stores-workload-state~1
func TestWorkloadStatesStoredAndForwarded(t *testing.T) {
	ts := startServer(t, mustState(t, twoAgents))
	a := ts.agent("agent_A", nil)
	cli := ts.cli()
	cli.get() // registered before the report
	instA := state.NewInstanceName("wl_a", "agent_A", "image: a")
	a.send(statesMsg(state.WorkloadState{Instance: instA, State: state.RunningOk}))
	got := cli.expect("forwarded state", isStateOf(instA)).GetUpdateWorkloadState()
	if s, _ := rpc.ExecutionStateFromProto(got.GetWorkloadStates()[0].GetExecutionState()); s != state.RunningOk {
		t.Fatalf("CLI got %v", s)
	}
	testwait.For(t, 5e9, func() bool {
		var s state.ExecutionState
		ts.store(func(st *state.Store) { s, _ = st.States.Get(instA) })
		return s == state.RunningOk
	}, "state stored")
	// A newly connected agent learns the states of the others, not its own.
	b := ts.dial(wire.KindAgent)
	b.send(&grpcapi.ToServer{ToServerEnum: &grpcapi.ToServer_AgentHello{AgentHello: &grpcapi.AgentHello{AgentName: "agent_B", ProtocolVersion: rpc.ProtocolVersion}}})
	first := b.expect("states of other agents", func(m *grpcapi.FromServer) bool { return m.GetUpdateWorkloadState() != nil })
	for _, ws := range first.GetUpdateWorkloadState().GetWorkloadStates() {
		if ws.GetInstanceName().GetAgentName() == "agent_B" {
			t.Fatalf("agent_B was sent its own state %v", ws)
		}
	}
	if !hasInstance(first.GetUpdateWorkloadState(), instA) {
		t.Fatalf("agent_B did not learn agent_A's state: %v", first)
	}
	// The sender does not get its own report back.
	if _, ok := a.tryExpect(200e6, isStateOf(instA)); ok {
		t.Fatal("the reporting agent got its own state back")
	}
}

// swdd~server-set-workload-state-on-disconnect~1
// swdd~server-distribute-workload-state-on-disconnect~1
// swdd~server-removes-disconnected-agents-from-state~2
func TestAgentGoneMarksDisconnected(t *testing.T) {
	ts := startServerCfg(t, t.TempDir(), mustState(t, twoAgents), shortReconnectGrace)
	a := ts.agent("agent_A", nil)
	b := ts.agent("agent_B", nil)
	instA := state.NewInstanceName("wl_a", "agent_A", "image: a")
	a.send(statesMsg(state.WorkloadState{Instance: instA, State: state.RunningOk}))
	b.expect("running state", isStateOf(instA))
	a.close()
	m := b.expect("disconnected state", func(m *grpcapi.FromServer) bool {
		ws := m.GetUpdateWorkloadState().GetWorkloadStates()
		return len(ws) > 0 && ws[0].GetExecutionState().GetAgentDisconnected() == ankbase.AgentDisconnected_AGENT_DISCONNECTED
	})
	if !hasInstance(m.GetUpdateWorkloadState(), instA) {
		t.Fatalf("wrong instance: %v", m)
	}
	testwait.For(t, 5e9, func() bool {
		gone := false
		ts.store(func(s *state.Store) { _, ok := s.Agents["agent_A"]; gone = !ok })
		return gone
	}, "agent_A removed")
}

// A load report is kept in the leader's memory and served from there; it
// writes nothing to Raft (every byte written wears a vehicle's flash, and
// a load is stale within seconds).
//
// swdd~server-receives-resource-availability~2
func TestAgentLoadServedFromLeaderMemory(t *testing.T) {
	ts := startServer(t, nil)
	a := ts.agent("agent_A", nil)
	cli := ts.cli()
	cli.get() // everything before is committed
	applied := ts.fsm.AppliedIndex()
	a.send(&grpcapi.ToServer{ToServerEnum: &grpcapi.ToServer_AgentLoadStatus{AgentLoadStatus: &grpcapi.AgentLoadStatus{
		AgentName: "agent_A", CpuUsage: &ankbase.CpuUsage{CpuUsage: 42}, FreeMemory: &ankbase.FreeMemory{FreeMemory: 1 << 30}}}})
	a.sync("load sent")
	for _, masks := range [][]string{nil, {"agents"}, {"agents.agent_A.status"}} {
		st := cli.get(masks...).GetAgents().GetAgents()["agent_A"].GetStatus()
		if st.GetCpuUsage().GetCpuUsage() != 42 || st.GetFreeMemory().GetFreeMemory() != 1<<30 {
			t.Fatalf("masks %v: status %v", masks, st)
		}
	}
	if got := ts.fsm.AppliedIndex(); got != applied {
		t.Fatalf("a load report moved the Raft index from %d to %d", applied, got)
	}
}

// TestProtocolVersionMismatchRefused: the major version must be 1 and the
// refusal names both versions.
func TestProtocolVersionMismatchRefused(t *testing.T) {
	ts := startServer(t, nil)
	c := ts.dial(wire.KindAgent)
	c.send(&grpcapi.ToServer{ToServerEnum: &grpcapi.ToServer_AgentHello{AgentHello: &grpcapi.AgentHello{AgentName: "a", ProtocolVersion: "2.0.0"}}})
	testwait.For(t, 5e9, func() bool { return c.streamErr() != nil }, "stream refused")
	err := c.streamErr().Error()
	for _, want := range []string{"FailedPrecondition", "2.0.0", "'1'"} {
		if !contains(err, want) {
			t.Errorf("refusal %q lacks %q", err, want)
		}
	}
	cli := ts.dial(wire.KindCLI)
	cli.send(&grpcapi.ToServer{ToServerEnum: &grpcapi.ToServer_AgentHello{AgentHello: &grpcapi.AgentHello{AgentName: "a"}}})
	testwait.For(t, 5e9, func() bool { return cli.streamErr() != nil }, "CLI stream refused")
	if !contains(cli.streamErr().Error(), "No CommanderHello received.") {
		t.Errorf("CLI refusal: %v", cli.streamErr())
	}
}

func statesMsg(ws ...state.WorkloadState) *grpcapi.ToServer {
	return &grpcapi.ToServer{ToServerEnum: &grpcapi.ToServer_UpdateWorkloadState{
		UpdateWorkloadState: &grpcapi.UpdateWorkloadState{WorkloadStates: rpc.WorkloadStatesToProto(ws)}}}
}

func isStateOf(n state.InstanceName) func(*grpcapi.FromServer) bool {
	return func(m *grpcapi.FromServer) bool { return hasInstance(m.GetUpdateWorkloadState(), n) }
}

func hasInstance(u *grpcapi.UpdateWorkloadState, n state.InstanceName) bool {
	for _, ws := range u.GetWorkloadStates() {
		if rpc.InstanceNameFromProto(ws.GetInstanceName()) == n {
			return true
		}
	}
	return false
}

func contains(s, sub string) bool {
	return len(sub) == 0 || (len(s) >= len(sub) && indexOf(s, sub) >= 0)
}

func indexOf(s, sub string) int {
	for i := 0; i+len(sub) <= len(s); i++ {
		if s[i:i+len(sub)] == sub {
			return i
		}
	}
	return -1
}
