package server

import (
	"bytes"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/grapnel-io/grapnel/internal/testwait"
	"github.com/grapnel-io/grapnel/rpc"
	"github.com/grapnel-io/grapnel/rpc/ankbase"
	"github.com/grapnel-io/grapnel/rpc/grpcapi"
	"github.com/grapnel-io/grapnel/server/metrics"
	"github.com/grapnel-io/grapnel/state"
	"github.com/grapnel-io/grapnel/workloadpolicy"
)

// forwardedRules: reader (on agent_A) may read the configs but not the
// secret one, and write its own entry; admin (on agent_B) may do
// anything; svc is placed on one agent and may read the workloads.
const forwardedRules = `
apiVersion: v1
workloads:
  reader:
    runtime: podman
    agent: agent_A
    runtimeConfig: "image: r"
    controlInterfaceAccess:
      allowRules:
        - type: StateRule
          operation: Read
          filterMasks: ["desiredState.configs"]
        - type: StateRule
          operation: Write
          filterMasks: ["desiredState.workloads.reader"]
      denyRules:
        - type: StateRule
          operation: Read
          filterMasks: ["desiredState.configs.secret"]
  admin:
    runtime: podman
    agent: agent_B
    runtimeConfig: "image: a"
    controlInterfaceAccess:
      allowRules:
        - type: StateRule
          operation: ReadWrite
          filterMasks: ["*"]
  svc:
    runtime: podman
    agent: ""
    tags:
      grapnel.io/instances: "1"
    runtimeConfig: "image: s"
    controlInterfaceAccess:
      allowRules:
        - type: StateRule
          operation: Read
          filterMasks: ["desiredState.workloads"]
configs:
  secret: s3cret
  public: hello
`

// forward sends a request on an agent's stream as its control interface
// forwards one, with the id "<workload>@<id>", and waits for the answer.
func forward(c *testConn, id string, req *ankbase.Request) *ankbase.Response {
	c.t.Helper()
	req.RequestId = id
	c.send(&grpcapi.ToServer{ToServerEnum: &grpcapi.ToServer_Request{Request: req}})
	return c.expect("response to "+id, func(m *grpcapi.FromServer) bool { return m.GetResponse().GetRequestId() == id }).GetResponse()
}

func readRequest(masks ...string) *ankbase.Request {
	return &ankbase.Request{RequestContent: &ankbase.Request_CompleteStateRequest{
		CompleteStateRequest: &ankbase.CompleteStateRequest{FieldMask: masks}}}
}

func updateRequest(t *testing.T, tree state.Tree, masks ...string) *ankbase.Request {
	t.Helper()
	cs, err := rpc.CompleteStateFromTree(tree)
	if err != nil {
		t.Fatal(err)
	}
	return &ankbase.Request{RequestContent: &ankbase.Request_UpdateStateRequest{
		UpdateStateRequest: &ankbase.UpdateStateRequest{NewState: cs, UpdateMask: masks}}}
}

// A compromised agent forwards what its workloads' rules would refuse,
// or requests of workloads it does not run, or requests of nobody: the
// server refuses each with PERMISSION_DENIED's reason naming the workload
// and the missing right, counts it, and changes nothing. What the rules
// allow still passes.
func TestForwardedRequestsBoundedByWorkloadRules(t *testing.T) {
	m := metrics.NewSet()
	ts := startServerCfg(t, t.TempDir(), mustState(t, forwardedRules), func(c *Config) { c.Metrics = m })
	a := ts.agent("agent_A", nil)
	b := ts.agent("agent_B", nil)
	var svcOn string
	testwait.For(t, 10*time.Second, func() bool {
		ts.store(func(s *state.Store) {
			if l := s.Placement["svc"]; len(l) == 1 {
				svcOn = l[0]
			}
		})
		return svcOn != ""
	}, "svc placed")
	hosting, other := a, b
	if svcOn == "agent_B" {
		hosting, other = b, a
	}
	var revision uint64
	ts.store(func(s *state.Store) { revision = s.Revision })

	widened := manifest(t, `
workloads:
  reader:
    runtime: podman
    agent: agent_A
    runtimeConfig: "image: r"
    controlInterfaceAccess:
      allowRules:
        - type: StateRule
          operation: ReadWrite
          filterMasks: ["*"]
`)
	newWorkload := manifest(t, `
workloads:
  evil:
    runtime: podman
    agent: agent_A
    runtimeConfig: "image: e"
    controlInterfaceAccess:
      allowRules:
        - type: StateRule
          operation: ReadWrite
          filterMasks: ["*"]
`)
	refused := []struct {
		name string
		conn *testConn
		id   string
		req  *ankbase.Request
		want []string
	}{
		{"issue 17: configs.* past the deny rule", a, "reader@1", readRequest("desiredState.configs.*"),
			[]string{"Access denied", "workload 'reader' on agent 'agent_A'", "Read 'desiredState.configs.*'", "deny rule 'desiredState.configs.secret'"}},
		{"a subscription past the deny rule", a, "reader@2", &ankbase.Request{RequestContent: &ankbase.Request_CompleteStateRequest{
			CompleteStateRequest: &ankbase.CompleteStateRequest{FieldMask: []string{"desiredState.configs"}, SubscribeForEvents: true}}},
			[]string{"Read 'desiredState.configs'", "deny rule"}},
		{"a write beyond the rules", a, "reader@3", updateRequest(t, state.Tree{}, "desiredState.workloads.admin"),
			[]string{"workload 'reader'", "Write 'desiredState.workloads.admin'", "no allow rule"}},
		{"widening its own rules", a, "reader@4", updateRequest(t, widened, "desiredState.workloads.reader"),
			[]string{"workload 'reader' on agent 'agent_A'", "widen the controlInterfaceAccess of workload 'reader'"}},
		{"a workload on another agent", a, "admin@5", updateRequest(t, newWorkload, "desiredState.workloads.evil"),
			[]string{"agent 'agent_A'", "workload 'admin'", "does not run on it"}},
		{"a workload not in the state", a, "ghost@6", readRequest("desiredState"),
			[]string{"workload 'ghost'", "not in the desired state"}},
		{"no workload named", a, "7", readRequest("desiredState"),
			[]string{"agent 'agent_A'", "naming no workload"}},
		{"a placed workload on the agent without its instance", other, "svc@8", readRequest("desiredState.workloads"),
			[]string{"workload 'svc'", "does not run on it"}},
		{"admin starts a workload with rules", b, "admin@9", updateRequest(t, newWorkload, "desiredState.workloads.evil"),
			[]string{"workload 'admin' on agent 'agent_B'", "widen the controlInterfaceAccess of workload 'evil'"}},
	}
	for _, tc := range refused {
		r := forward(tc.conn, tc.id, tc.req)
		msg := r.GetError().GetMessage()
		for _, w := range tc.want {
			if !strings.Contains(msg, w) {
				t.Errorf("%s: answer %v does not name %q", tc.name, r, w)
			}
		}
	}
	ts.store(func(s *state.Store) {
		if s.Revision != revision {
			t.Errorf("refused requests changed the desired state: revision %d, was %d", s.Revision, revision)
		}
		if _, ok := s.Desired.Workloads["evil"]; ok {
			t.Error("a refused request added a workload")
		}
		if n := len(s.Desired.Workloads["reader"].ControlInterfaceAccess.AllowRules); n != 2 {
			t.Errorf("reader's rules changed: %d allow rules", n)
		}
	})
	var text bytes.Buffer
	if _, err := m.Registry.WriteTo(&text); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{`grapnel_forwarded_requests_refused_total{agent="agent_A"} 7`} {
		if !strings.Contains(text.String(), want) {
			t.Errorf("metrics lack %s:\n%s", want, text.String())
		}
	}

	// Allowed: a config the deny rule does not reach, an update of its
	// own entry that keeps its rules, the placed workload on its agent,
	// and anything of admin's that grants no rights.
	if cs := forward(a, "reader@10", readRequest("desiredState.configs.public")).GetCompleteStateResponse(); cs == nil ||
		cs.GetCompleteState().GetDesiredState().GetConfigs().GetConfigs()["public"] == nil {
		t.Fatalf("allowed read answered %v", cs)
	}
	own := manifest(t, `
workloads:
  reader:
    runtime: podman
    agent: agent_A
    runtimeConfig: "image: r"
    tags:
      touched: "yes"
    controlInterfaceAccess:
      allowRules:
        - type: StateRule
          operation: Read
          filterMasks: ["desiredState.configs"]
        - type: StateRule
          operation: Write
          filterMasks: ["desiredState.workloads.reader"]
      denyRules:
        - type: StateRule
          operation: Read
          filterMasks: ["desiredState.configs.secret"]
`)
	if r := forward(a, "reader@11", updateRequest(t, own, "desiredState.workloads.reader")); r.GetUpdateStateSuccess() == nil {
		t.Fatalf("own update keeping the rules answered %v", r)
	}
	if r := forward(hosting, "svc@12", readRequest("desiredState.workloads")); r.GetCompleteStateResponse() == nil {
		t.Fatalf("placed workload on its agent answered %v", r)
	}
	plain := manifest(t, `
workloads:
  helper:
    runtime: podman
    agent: agent_B
    runtimeConfig: "image: h"
`)
	if r := forward(b, "admin@13", updateRequest(t, plain, "desiredState.workloads.helper")); r.GetUpdateStateSuccess() == nil {
		t.Fatalf("admin adding a workload without rules answered %v", r)
	}
}

// Log responses count only from the agent that hosts an instance of a
// live campaign, for that instance: another agent, a CLI, or the right
// agent speaking of another instance cannot put lines into the campaign.
//
// swdd~server-forwards-logs-entries-response-messages~1
// swdd~server-forwards-logs-stop-response-messages~1
func TestForgedLogResponsesDropped(t *testing.T) {
	m := metrics.NewSet()
	ts := startServerCfg(t, t.TempDir(), mustState(t, twoAgents), func(c *Config) { c.Metrics = m })
	a := ts.agent("agent_A", nil)
	b := ts.agent("agent_B", nil)
	cli := ts.cli()
	instA := state.NewInstanceName("wl_a", "agent_A", "image: a")
	instB := state.NewInstanceName("wl_b", "agent_B", "image: b")
	r := cli.request(logsReq(instA))
	if len(r.GetLogsRequestAccepted().GetWorkloadNames()) != 1 {
		t.Fatalf("accepted %v", r)
	}
	id := a.expect("LogsRequest", isLogsRequest).GetLogsRequest().GetRequestId()
	entries := func(inst state.InstanceName, msg string) *grpcapi.ToServer {
		return &grpcapi.ToServer{ToServerEnum: &grpcapi.ToServer_LogEntriesResponse{LogEntriesResponse: &grpcapi.LogEntriesResponse{
			RequestId: id, LogEntriesResponse: &ankbase.LogEntriesResponse{LogEntries: []*ankbase.LogEntry{
				{WorkloadName: rpc.InstanceNameToProto(inst), Message: msg}}}}}}
	}
	stop := func(inst state.InstanceName) *grpcapi.ToServer {
		return &grpcapi.ToServer{ToServerEnum: &grpcapi.ToServer_LogsStopResponse{LogsStopResponse: &grpcapi.LogsStopResponse{
			RequestId: id, LogsStopResponse: &ankbase.LogsStopResponse{WorkloadName: rpc.InstanceNameToProto(inst)}}}}
	}
	b.send(entries(instA, "forged by another agent"))
	b.send(stop(instA))
	cli.send(entries(instA, "forged by a client"))
	a.send(entries(instB, "forged for another instance"))
	a.send(&grpcapi.ToServer{ToServerEnum: &grpcapi.ToServer_LogEntriesResponse{LogEntriesResponse: &grpcapi.LogEntriesResponse{
		RequestId: "cli-conn-guess@req-1", LogEntriesResponse: &ankbase.LogEntriesResponse{LogEntries: []*ankbase.LogEntry{
			{WorkloadName: rpc.InstanceNameToProto(instA), Message: "forged for a campaign that is not live"}}}}}})
	a.send(entries(instA, "genuine"))
	got := cli.expect("log entries", func(m *grpcapi.FromServer) bool { return m.GetResponse().GetLogEntriesResponse() != nil })
	if msg := got.GetResponse().GetLogEntriesResponse().GetLogEntries()[0].GetMessage(); msg != "genuine" {
		t.Fatalf("the collector got %q first", msg)
	}
	a.send(stop(instA))
	cli.expect("logs stop", func(m *grpcapi.FromServer) bool { return m.GetResponse().GetLogsStopResponse() != nil })
	if m, ok := cli.tryExpect(200*time.Millisecond, func(m *grpcapi.FromServer) bool { return m.GetResponse() != nil }); ok {
		t.Fatalf("the collector got a forged response: %v", m)
	}
	var text bytes.Buffer
	if _, err := m.Registry.WriteTo(&text); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{`grapnel_log_responses_dropped_total{from="agent"} 4`, `grapnel_log_responses_dropped_total{from="client"} 1`} {
		if !strings.Contains(text.String(), want) {
			t.Errorf("metrics lack %s:\n%s", want, text.String())
		}
	}
}

// selfWriters: each workload may write its own entry (tpl only the config
// item its options come from), as in the audit of issue 27.
const selfWriters = `
apiVersion: v1
workloads:
  me:
    runtime: process
    agent: agent_A
    runtimeConfig: "command: sleep\nargs: ['600']"
    controlInterfaceAccess:
      allowRules:
        - {type: StateRule, operation: Write, filterMasks: ["desiredState.workloads.me"]}
  pod:
    runtime: podman
    agent: agent_A
    runtimeConfig: "image: p"
    controlInterfaceAccess:
      allowRules:
        - {type: StateRule, operation: Write, filterMasks: ["desiredState.workloads.pod"]}
  tpl:
    runtime: podman
    agent: agent_A
    configs: {o: opts}
    runtimeConfig: "image: t\ncommandOptions: [\"{{o}}\"]"
    controlInterfaceAccess:
      allowRules:
        - {type: StateRule, operation: Write, filterMasks: ["desiredState.configs.opts"]}
configs:
  opts: "--rm"
`

// ownEntry is workload name's entry with the given runtime and config,
// its rules unchanged.
func ownEntry(t *testing.T, name, runtime, rc string) state.Tree {
	t.Helper()
	return manifest(t, "workloads:\n  "+name+":\n    runtime: "+runtime+"\n    agent: agent_A\n    runtimeConfig: "+strconv.Quote(rc)+
		"\n    controlInterfaceAccess:\n      allowRules:\n        - {type: StateRule, operation: Write, filterMasks: [\"desiredState.workloads."+name+"\"]}\n")
}

// Requirement (issue 27, holes 2 and 3): a workload allowed to write its
// own entry cannot, through the control interface, take another
// workload's uid (user:), change its runtime to a privileged podman
// container with the host's root mounted, add such options to its
// container, nor smuggle them in through a config item it may write;
// the server refuses each naming the workload and what widened, even
// with the servers' policy at privileged, and counts them. A change that
// widens nothing goes through.
func TestForwardedWritesCannotWidenPrivileges(t *testing.T) {
	m := metrics.NewSet()
	ts := startServerCfg(t, t.TempDir(), mustState(t, selfWriters), func(c *Config) {
		c.Metrics, c.WorkloadPolicy = m, workloadpolicy.Privileged
	})
	a := ts.agent("agent_A", nil)
	var revision uint64
	ts.store(func(s *state.Store) { revision = s.Revision })
	const hole3 = "image: alpine\ncommandOptions: [--privileged, -v, /:/host]\ncommandArgs: [cat, /host/root/secret]"
	for _, tc := range []struct {
		name, id string
		req      *ankbase.Request
		want     string
	}{
		{"hole 2: another workload's uid", "me@1", updateRequest(t, ownEntry(t, "me", "process", "command: sleep\nargs: ['600']\nuser: '60123'"), "desiredState.workloads.me"),
			"workload 'me' on agent 'agent_A' may not widen the privileges of workload 'me' through the control interface: it adds runtimeConfig.user (user 60123)"},
		{"hole 3: a privileged podman container with / mounted", "me@2", updateRequest(t, ownEntry(t, "me", "podman", hole3), "desiredState.workloads.me"),
			"it changes the runtime from 'process' to 'podman'"},
		{"hole 3 in its own container", "pod@3", updateRequest(t, ownEntry(t, "pod", "podman", hole3), "desiredState.workloads.pod"),
			"may not widen the privileges of workload 'pod' through the control interface: it adds runtimeConfig.commandOptions[0] (--privileged)"},
		{"the host's namespaces", "pod@4", updateRequest(t, ownEntry(t, "pod", "podman", "image: p\ncommandOptions: [--pid=host, --net=host]"), "desiredState.workloads.pod"),
			"it adds runtimeConfig.commandOptions[0] (--pid=host)"},
		{"smuggled through a config item", "tpl@5", updateRequest(t, manifest(t, "configs:\n  opts: --privileged\n"), "desiredState.configs.opts"),
			"workload 'tpl' on agent 'agent_A' may not widen the privileges of workload 'tpl' through the control interface: it adds runtimeConfig.commandOptions[0] (--privileged)"},
	} {
		r := forward(a, tc.id, tc.req)
		if msg := r.GetError().GetMessage(); !strings.Contains(msg, tc.want) {
			t.Errorf("%s: answer %v does not name %q", tc.name, r, tc.want)
		}
	}
	ts.store(func(s *state.Store) {
		if s.Revision != revision {
			t.Errorf("refused writes changed the desired state: revision %d, was %d", s.Revision, revision)
		}
	})
	var text bytes.Buffer
	if _, err := m.Registry.WriteTo(&text); err != nil {
		t.Fatal(err)
	}
	if want := `grapnel_workload_policy_refused_total{check="widening"} 5`; !strings.Contains(text.String(), want) {
		t.Errorf("metrics lack %s:\n%s", want, text.String())
	}
	// Widening nothing: other arguments, a published port, the config
	// item with another harmless option.
	for _, tc := range []struct {
		id  string
		req *ankbase.Request
	}{
		{"me@6", updateRequest(t, ownEntry(t, "me", "process", "command: sleep\nargs: ['700']"), "desiredState.workloads.me")},
		{"pod@7", updateRequest(t, ownEntry(t, "pod", "podman", "image: p2\ncommandOptions: [-p, '8080:80', --env, --privileged]"), "desiredState.workloads.pod")},
		{"tpl@8", updateRequest(t, manifest(t, "configs:\n  opts: --read-only\n"), "desiredState.configs.opts")},
	} {
		if r := forward(a, tc.id, tc.req); r.GetUpdateStateSuccess() == nil {
			t.Errorf("%s: a write widening nothing answered %v", tc.id, r)
		}
	}
}
