package server

import (
	"bytes"
	"fmt"
	"strings"
	"testing"

	"github.com/grapnel-io/grapnel/rpc"
	"github.com/grapnel-io/grapnel/rpc/ankbase"
	"github.com/grapnel-io/grapnel/rpc/grpcapi"
	"github.com/grapnel-io/grapnel/server/metrics"
	"github.com/grapnel-io/grapnel/state"
)

// metricsText is the registry's exposition.
func metricsText(t *testing.T, m *metrics.Set) string {
	t.Helper()
	var text bytes.Buffer
	if _, err := m.Registry.WriteTo(&text); err != nil {
		t.Fatal(err)
	}
	return text.String()
}

// A requester past its cap of live campaigns is refused at once, naming
// itself and the cap, and no agent is asked; a campaign whose instances
// all stopped is over and frees its place (issue 27, point 5: a workload
// on a compromised agent, which keeps no cap of its own, cannot make the
// server ask the agents for thousands).
func TestLogCampaignCapPerRequester(t *testing.T) {
	const max = 3
	m := metrics.NewSet()
	ts := startServerCfg(t, t.TempDir(), mustState(t, twoAgentsWithRules), func(c *Config) {
		c.Metrics = m
		c.MaxLogCampaignsPerRequester = max
	})
	a := ts.agent("agent_A", nil)
	b := ts.agent("agent_B", nil)
	instA := state.NewInstanceName("wl_a", "agent_A", "image: a")
	var asked []string
	for i := range max {
		r := forward(b, fmt.Sprintf("wl_b@%d", i), logsReq(instA))
		if r.GetLogsRequestAccepted() == nil {
			t.Fatalf("request %d answered %v", i, r)
		}
		asked = append(asked, a.expect("LogsRequest", isLogsRequest).GetLogsRequest().GetRequestId())
	}
	r := forward(b, "wl_b@over", logsReq(instA))
	want := fmt.Sprintf("Log campaign refused: the workload 'wl_b' has %d live log campaigns, as many as the server allows one requester (--max-log-campaigns-per-requester %d)", max, max)
	if !strings.HasPrefix(r.GetError().GetMessage(), want) {
		t.Fatalf("past the cap: %v, want %q", r, want)
	}
	// Another requester has a cap of its own.
	if r := ts.cli().request(logsReq(instA)); r.GetLogsRequestAccepted() == nil {
		t.Fatalf("a client answered %v", r)
	}
	// In order: had the refused campaign reached the agent, its
	// LogsRequest would come first.
	if got := a.expect("the client's LogsRequest", isLogsRequest).GetLogsRequest().GetRequestId(); strings.Contains(got, "wl_b@") {
		t.Fatalf("the agent was asked for the refused campaign %q", got)
	}
	if text := metricsText(t, m); !strings.Contains(text, `grapnel_log_campaigns_refused_total{requester="workload"} 1`) {
		t.Fatalf("refusal not counted:\n%s", text)
	}
	// The provider stops the first campaign: it is over, and the
	// workload may open another.
	a.send(&grpcapi.ToServer{ToServerEnum: &grpcapi.ToServer_LogsStopResponse{LogsStopResponse: &grpcapi.LogsStopResponse{
		RequestId: asked[0], LogsStopResponse: &ankbase.LogsStopResponse{WorkloadName: rpc.InstanceNameToProto(instA)}}}})
	b.expect("the stop", func(m *grpcapi.FromServer) bool { return m.GetResponse().GetLogsStopResponse() != nil })
	if r := forward(b, "wl_b@next", logsReq(instA)); r.GetLogsRequestAccepted() == nil {
		t.Fatalf("after a campaign ended: %v", r)
	}
}

// An agent cancels the campaigns of a workload whose instance it stops,
// which may be after the workload left the desired state: the cancel is
// accepted and passed on to the agents, not refused as a forged request.
func TestForwardedCancelOfAGoneWorkload(t *testing.T) {
	m := metrics.NewSet()
	ts := startServerCfg(t, t.TempDir(), mustState(t, twoAgentsWithRules), func(c *Config) { c.Metrics = m })
	a := ts.agent("agent_A", nil)
	b := ts.agent("agent_B", nil)
	cancel := &ankbase.Request{RequestContent: &ankbase.Request_LogsCancelRequest{LogsCancelRequest: &ankbase.LogsCancelRequest{}}}
	if r := forward(b, "gone@7", cancel); r.GetLogsCancelAccepted() == nil {
		t.Fatalf("cancel answered %v", r)
	}
	if got := a.expect("the cancel", isLogsCancel).GetLogsCancelRequest().GetRequestId(); got != "agent_B@gone@7" {
		t.Fatalf("agents told to cancel %q", got)
	}
	if text := metricsText(t, m); strings.Contains(text, "grapnel_forwarded_requests_refused_total{") {
		t.Fatalf("the cancel counted as refused:\n%s", text)
	}
}
