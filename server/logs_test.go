package server

import (
	"testing"

	"github.com/grapnel-io/grapnel/rpc"
	"github.com/grapnel-io/grapnel/rpc/ankbase"
	"github.com/grapnel-io/grapnel/rpc/grpcapi"
	"github.com/grapnel-io/grapnel/state"
)

func logsReq(names ...state.InstanceName) *ankbase.Request {
	var ps []*ankbase.WorkloadInstanceName
	for _, n := range names {
		ps = append(ps, rpc.InstanceNameToProto(n))
	}
	follow := true
	return &ankbase.Request{RequestContent: &ankbase.Request_LogsRequest{LogsRequest: &ankbase.LogsRequest{WorkloadNames: ps, Follow: &follow}}}
}

// twoAgentsWithRules is twoAgents where wl_b may read the whole state
// and collect every workload's logs through its control interface: the
// server refuses what an agent forwards beyond a workload's rules.
const twoAgentsWithRules = `
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
    controlInterfaceAccess:
      allowRules:
        - type: StateRule
          operation: Read
          filterMasks: ["*"]
        - type: LogRule
          workloadNames: ["*"]
`

func isLogsRequest(m *grpcapi.FromServer) bool { return m.GetLogsRequest() != nil }
func isLogsCancel(m *grpcapi.FromServer) bool  { return m.GetLogsCancelRequest() != nil }

// swdd~server-handles-logs-request-message~1
// swdd~server-forwards-logs-entries-response-messages~1
// swdd~server-forwards-logs-stop-response-messages~1
// swdd~server-handles-logs-cancel-request-message~1
func TestLogsFlow(t *testing.T) {
	ts := startServer(t, mustState(t, twoAgents))
	a := ts.agent("agent_A", nil)
	cli := ts.cli()
	instA := state.NewInstanceName("wl_a", "agent_A", "image: a")
	bogus := state.NewInstanceName("wl_a", "agent_A", "something else")
	r := cli.request(logsReq(instA, bogus))
	acc := r.GetLogsRequestAccepted()
	if acc == nil || len(acc.GetWorkloadNames()) != 1 || rpc.InstanceNameFromProto(acc.GetWorkloadNames()[0]) != instA {
		t.Fatalf("accepted %v", r)
	}
	lr := a.expect("LogsRequest", isLogsRequest).GetLogsRequest()
	if len(lr.GetLogsRequest().GetWorkloadNames()) != 1 {
		t.Fatalf("agent asked for %v", lr)
	}
	a.send(&grpcapi.ToServer{ToServerEnum: &grpcapi.ToServer_LogEntriesResponse{LogEntriesResponse: &grpcapi.LogEntriesResponse{
		RequestId: lr.GetRequestId(), LogEntriesResponse: &ankbase.LogEntriesResponse{LogEntries: []*ankbase.LogEntry{
			{WorkloadName: rpc.InstanceNameToProto(instA), Message: "hello"}}}}}})
	entries := cli.expect("log entries", func(m *grpcapi.FromServer) bool { return m.GetResponse().GetLogEntriesResponse() != nil })
	if entries.GetResponse().GetRequestId() != r.GetRequestId() || entries.GetResponse().GetLogEntriesResponse().GetLogEntries()[0].GetMessage() != "hello" {
		t.Fatalf("CLI got %v", entries)
	}
	a.send(&grpcapi.ToServer{ToServerEnum: &grpcapi.ToServer_LogsStopResponse{LogsStopResponse: &grpcapi.LogsStopResponse{
		RequestId: lr.GetRequestId(), LogsStopResponse: &ankbase.LogsStopResponse{WorkloadName: rpc.InstanceNameToProto(instA)}}}})
	cli.expect("logs stop", func(m *grpcapi.FromServer) bool { return m.GetResponse().GetLogsStopResponse() != nil })
	// Cancel: accepted, forwarded to agents, forgotten.
	c := cli.request(&ankbase.Request{RequestId: "ignored", RequestContent: &ankbase.Request_LogsCancelRequest{LogsCancelRequest: &ankbase.LogsCancelRequest{}}})
	if c.GetLogsCancelAccepted() == nil {
		t.Fatalf("cancel answered %v", c)
	}
	a.expect("LogsCancelRequest", isLogsCancel)
}

// swdd~server-cancels-log-campaign-for-disconnected-cli~1
func TestLogsCancelledWhenCLIGoes(t *testing.T) {
	ts := startServer(t, mustState(t, twoAgents))
	a := ts.agent("agent_A", nil)
	cli := ts.cli()
	cli.request(logsReq(state.NewInstanceName("wl_a", "agent_A", "image: a")))
	lr := a.expect("LogsRequest", isLogsRequest).GetLogsRequest()
	cli.send(&grpcapi.ToServer{ToServerEnum: &grpcapi.ToServer_Goodbye{Goodbye: &grpcapi.Goodbye{}}})
	got := a.expect("cancel", isLogsCancel).GetLogsCancelRequest()
	if got.GetRequestId() != lr.GetRequestId() {
		t.Fatalf("cancelled %q, want %q", got.GetRequestId(), lr.GetRequestId())
	}
}

// swdd~server-handles-log-campaign-for-disconnected-agent~1
func TestLogsStoppedWhenProviderAgentGoes(t *testing.T) {
	ts := startServer(t, mustState(t, twoAgents))
	a := ts.agent("agent_A", nil)
	ts.agent("agent_B", nil)
	cli := ts.cli()
	instA := state.NewInstanceName("wl_a", "agent_A", "image: a")
	r := cli.request(logsReq(instA))
	a.expect("LogsRequest", isLogsRequest)
	a.close()
	stop := cli.expect("logs stop for the lost agent", func(m *grpcapi.FromServer) bool {
		return m.GetResponse().GetLogsStopResponse() != nil
	}).GetResponse()
	if stop.GetRequestId() != r.GetRequestId() || rpc.InstanceNameFromProto(stop.GetLogsStopResponse().GetWorkloadName()) != instA {
		t.Fatalf("stop %v", stop)
	}
}

// swdd~server-cancels-log-campaign-for-deleted-workloads~1
func TestLogsOfDeletedCollectorCancelled(t *testing.T) {
	ts := startServer(t, mustState(t, twoAgentsWithRules))
	a := ts.agent("agent_A", nil)
	b := ts.agent("agent_B", nil)
	// wl_b (a workload on agent_B) collects logs of wl_a through the
	// control interface: its request id carries the workload prefix.
	instA := state.NewInstanceName("wl_a", "agent_A", "image: a")
	req := logsReq(instA)
	req.RequestId = "wl_b@42"
	b.send(&grpcapi.ToServer{ToServerEnum: &grpcapi.ToServer_Request{Request: req}})
	b.expect("accepted", func(m *grpcapi.FromServer) bool { return m.GetResponse().GetLogsRequestAccepted() != nil })
	lr := a.expect("LogsRequest", isLogsRequest).GetLogsRequest()
	ts.cli().update(state.Tree{}, "desiredState.workloads.wl_b")
	got := a.expect("cancel", isLogsCancel).GetLogsCancelRequest()
	if got.GetRequestId() != lr.GetRequestId() {
		t.Fatalf("cancelled %q, want %q", got.GetRequestId(), lr.GetRequestId())
	}
}
