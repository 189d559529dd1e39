package server

import (
	"slices"
	"testing"

	"github.com/grapnel-io/grapnel/rpc/ankbase"
	"github.com/grapnel-io/grapnel/rpc/grpcapi"
	"github.com/grapnel-io/grapnel/state"
)

func subscribe(c *testConn, masks ...string) string {
	r := c.request(&ankbase.Request{RequestContent: &ankbase.Request_CompleteStateRequest{
		CompleteStateRequest: &ankbase.CompleteStateRequest{FieldMask: masks, SubscribeForEvents: true}}})
	return r.GetRequestId()
}

func nextEvent(c *testConn, id string) *ankbase.CompleteStateResponse {
	c.t.Helper()
	m := c.expect("event", func(m *grpcapi.FromServer) bool {
		r := m.GetResponse()
		return r.GetRequestId() == id && r.GetCompleteStateResponse().GetAlteredFields() != nil
	})
	return m.GetResponse().GetCompleteStateResponse()
}

// swdd~server-stores-new-event-subscription~1
// swdd~server-sends-state-differences-as-events~1
// swdd~server-sends-event-for-initial-workload-states~1
func TestEventsOnUpdate(t *testing.T) {
	ts := startServer(t, nil)
	cli := ts.cli()
	id := subscribe(cli, "desiredState.workloads.*.agent", "workloadStates")
	cli.update(manifest(t, nginx), "desiredState.workloads.nginx")
	ev := nextEvent(cli, id)
	inst := state.NewInstanceName("nginx", "agent_A", "image: nginx\n")
	added := ev.GetAlteredFields().GetAddedFields()
	for _, want := range []string{"desiredState.workloads.nginx.agent", statePath(inst)} {
		if !slices.Contains(added, want) {
			t.Errorf("added fields %v lack %s", added, want)
		}
	}
	if ev.GetCompleteState().GetDesiredState().GetWorkloads().GetWorkloads()["nginx"].GetAgent() != "agent_A" {
		t.Errorf("event state %v", ev.GetCompleteState())
	}
}

// swdd~server-sends-event-for-newly-connected-agent~1
// swdd~server-sends-event-for-updated-agent-resource-availability~1
// swdd~server-sends-events-for-disconnected-agent~1
// swdd~server-sends-event-for-updated-workload-states~1
// swdd~server-sends-event-for-removed-workload-states~1
func TestEventsOnAgentLifecycle(t *testing.T) {
	ts := startServerCfg(t, t.TempDir(), mustState(t, twoAgents), shortReconnectGrace)
	cli := ts.cli()
	id := subscribe(cli, "agents", "workloadStates.agent_A")
	a := ts.agent("agent_A", nil)
	if ev := nextEvent(cli, id); !slices.Contains(ev.GetAlteredFields().GetAddedFields(), "agents.agent_A") {
		t.Fatalf("connect event %v", ev.GetAlteredFields())
	}
	a.send(&grpcapi.ToServer{ToServerEnum: &grpcapi.ToServer_AgentLoadStatus{AgentLoadStatus: &grpcapi.AgentLoadStatus{
		AgentName: "agent_A", CpuUsage: &ankbase.CpuUsage{CpuUsage: 7}, FreeMemory: &ankbase.FreeMemory{FreeMemory: 9}}}})
	if ev := nextEvent(cli, id); !slices.Contains(ev.GetAlteredFields().GetUpdatedFields(), "agents.agent_A.status.cpuUsage") {
		t.Fatalf("load event %v", ev.GetAlteredFields())
	}
	instA := state.NewInstanceName("wl_a", "agent_A", "image: a")
	a.send(statesMsg(state.WorkloadState{Instance: instA, State: state.RunningOk}))
	if ev := nextEvent(cli, id); !slices.Contains(ev.GetAlteredFields().GetUpdatedFields(), statePath(instA)) {
		t.Fatalf("state event %v", ev.GetAlteredFields())
	}
	a.close()
	ev := nextEvent(cli, id)
	if !slices.Contains(ev.GetAlteredFields().GetRemovedFields(), "agents.agent_A") ||
		!slices.Contains(ev.GetAlteredFields().GetUpdatedFields(), statePath(instA)) {
		t.Fatalf("disconnect event %v", ev.GetAlteredFields())
	}
	// Removed states are reported as removed fields.
	a2 := ts.agent("agent_A", nil)
	nextEvent(cli, id) // reconnect
	a2.send(statesMsg(state.WorkloadState{Instance: instA, State: state.Removed}))
	if ev := nextEvent(cli, id); !slices.Contains(ev.GetAlteredFields().GetRemovedFields(), statePath(instA)) {
		t.Fatalf("removed event %v", ev.GetAlteredFields())
	}
}

// swdd~server-removes-event-subscription~1
// swdd~server-removes-event-subscription-for-disconnected-cli~1
func TestEventsCancel(t *testing.T) {
	ts := startServer(t, nil)
	cli := ts.cli()
	id := subscribe(cli)
	// The cancel names the subscription by its request id.
	cli.send(&grpcapi.ToServer{ToServerEnum: &grpcapi.ToServer_Request{Request: &ankbase.Request{RequestId: id,
		RequestContent: &ankbase.Request_EventsCancelRequest{EventsCancelRequest: &ankbase.EventsCancelRequest{}}}}})
	cli.expect("cancel accepted", func(m *grpcapi.FromServer) bool {
		return m.GetResponse().GetRequestId() == id && m.GetResponse().GetEventsCancelAccepted() != nil
	})
	// A subscription of a CLI that leaves is dropped too.
	other := ts.cli()
	subscribe(other)
	other.send(&grpcapi.ToServer{ToServerEnum: &grpcapi.ToServer_Goodbye{Goodbye: &grpcapi.Goodbye{}}})
	cli.update(manifest(t, nginx), "desiredState.workloads.nginx")
	if _, ok := cli.tryExpect(300e6, func(m *grpcapi.FromServer) bool {
		return m.GetResponse().GetCompleteStateResponse().GetAlteredFields() != nil
	}); ok {
		t.Fatal("event after cancel")
	}
}

// swdd~server-removes-subscription-for-deleted-subscriber-workload~1
func TestSubscriptionOfDeletedWorkloadDropped(t *testing.T) {
	ts := startServer(t, mustState(t, twoAgentsWithRules))
	b := ts.agent("agent_B", nil)
	req := &ankbase.Request{RequestId: "wl_b@7", RequestContent: &ankbase.Request_CompleteStateRequest{
		CompleteStateRequest: &ankbase.CompleteStateRequest{SubscribeForEvents: true}}}
	b.send(&grpcapi.ToServer{ToServerEnum: &grpcapi.ToServer_Request{Request: req}})
	b.expect("response", func(m *grpcapi.FromServer) bool { return m.GetResponse().GetRequestId() == "wl_b@7" })
	cli := ts.cli()
	cli.update(state.Tree{}, "desiredState.workloads.wl_b")
	// The delete itself may produce one event; after it nothing more.
	b.expect("delete", isUpdateWorkload)
	for {
		if _, ok := b.tryExpect(200e6, func(m *grpcapi.FromServer) bool { return m.GetResponse().GetRequestId() == "wl_b@7" }); !ok {
			break
		}
	}
	cli.update(manifest(t, nginx), "desiredState.workloads.nginx")
	if _, ok := b.tryExpect(300e6, func(m *grpcapi.FromServer) bool { return m.GetResponse().GetRequestId() == "wl_b@7" }); ok {
		t.Fatal("event sent to a deleted workload's subscription")
	}
}
