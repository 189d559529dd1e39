package server

import (
	"fmt"
	"log/slog"
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"

	"github.com/grapnel-io/grapnel/internal/syncbuf"
	"github.com/grapnel-io/grapnel/rpc"
	"github.com/grapnel-io/grapnel/rpc/ankbase"
	"github.com/grapnel-io/grapnel/rpc/grpcapi"
	"github.com/grapnel-io/grapnel/rpc/wire"
	"github.com/grapnel-io/grapnel/state"
)

// testMessageLimit stands in for rpc.MaxMessageBytes: a state whose
// answers exceed 4 MiB can no longer be written under the state budget,
// while 100 kB still can.
const testMessageLimit = 64 << 10

// bigConfigs is a startup state with five 20 kB config items.
func bigConfigs(t *testing.T) *state.State {
	var b strings.Builder
	b.WriteString("apiVersion: v1\nconfigs:\n")
	for i := range 5 {
		fmt.Fprintf(&b, "  c%d: %s\n", i, strings.Repeat(string(rune('a'+i)), 20_000))
	}
	return mustState(t, b.String())
}

// A complete state answer over the message limit is answered with the
// Ankaios error response naming its size, the limit and what to ask
// instead; the stream keeps working, and a narrower mask is answered.
// Before, gRPC ended the stream, and the next get state failed the same
// way ("received message larger than max (7783120 vs. 4194304)").
func TestCompleteStateOverTheLimit(t *testing.T) {
	ts := startServerCfg(t, t.TempDir(), bigConfigs(t), func(c *Config) { c.MaxMessageBytes = testMessageLimit })
	cli := ts.cli()
	for range 2 {
		r := cli.request(&ankbase.Request{RequestContent: &ankbase.Request_CompleteStateRequest{CompleteStateRequest: &ankbase.CompleteStateRequest{}}})
		msg := r.GetError().GetMessage()
		if msg == "" {
			t.Fatalf("an answer over the limit came as %T", r.GetResponseContent())
		}
		for _, want := range []string{"message too large", "complete state", fmt.Sprint(testMessageLimit), "field mask"} {
			if !strings.Contains(msg, want) {
				t.Fatalf("the error %q does not say %q", msg, want)
			}
		}
		size := 0
		if _, err := fmt.Sscanf(msg[strings.Index(msg, "answer is ")+len("answer is "):], "%d", &size); err != nil || size <= testMessageLimit || size > 2*testMessageLimit {
			t.Fatalf("the error %q does not name the answer's size (%d, %v)", msg, size, err)
		}
	}
	one := cli.get("desiredState.configs.c1")
	if got := len(one.GetDesiredState().GetConfigs().GetConfigs()); got != 1 {
		t.Fatalf("the narrower mask answered %d config items", got)
	}
	if err := cli.streamErr(); err != nil {
		t.Fatalf("the stream ended: %v", err)
	}
}

// An UpdateWorkload over the limit reaches the agent cut into messages
// that fit, deletions first; a ServerHello over it cannot be cut (the
// agent would stop every workload it does not list), so the stream is
// refused with a status that names the agent, the size and the limit,
// the server logs why, and it keeps serving.
func TestAgentMessagesOverTheLimit(t *testing.T) {
	var log syncbuf.Buffer
	ts := startServerCfg(t, t.TempDir(), mustState(t, nginx), func(c *Config) {
		c.MaxMessageBytes = testMessageLimit
		c.Logger = slog.New(slog.NewTextHandler(&log, nil))
	})
	agent, _ := ts.hello("agent_A", 1, nil)
	cli := ts.cli()
	workloads := map[string]any{}
	masks := []string{"desiredState.workloads.nginx"}
	for i := range 5 {
		name := fmt.Sprintf("w%d", i)
		workloads[name] = wlTree("agent_A", "image: "+strings.Repeat(string(rune('a'+i)), 20_000), nil)
		masks = append(masks, "desiredState.workloads."+name)
	}
	tree := state.Tree{"desiredState": map[string]any{"apiVersion": state.APIVersion, "workloads": workloads}}
	if r := cli.update(tree, masks...); r.GetUpdateStateSuccess() == nil {
		t.Fatalf("update: %v", r)
	}
	var added, deleted, msgs int
	deletedFirst := true
	for added < 5 || deleted < 1 {
		m := agent.expect("UpdateWorkload", func(m *grpcapi.FromServer) bool { return m.GetUpdateWorkload() != nil })
		if n := proto.Size(m); n > testMessageLimit {
			t.Fatalf("an UpdateWorkload of %d bytes went out", n)
		}
		u := m.GetUpdateWorkload()
		if len(u.GetDeletedWorkloads()) > 0 && added > 0 {
			deletedFirst = false
		}
		added += len(u.GetAddedWorkloads())
		deleted += len(u.GetDeletedWorkloads())
		msgs++
	}
	if added != 5 || deleted != 1 || msgs < 3 || !deletedFirst {
		t.Fatalf("%d added and %d deleted in %d messages (deletions first: %v); want 5 and 1 in at least 3, deletions first",
			added, deleted, msgs, deletedFirst)
	}
	if err := agent.streamErr(); err != nil {
		t.Fatalf("the agent stream ended: %v", err)
	}

	// The agent reconnects: its ServerHello would list 100 kB.
	again := ts.dial(wire.KindAgent)
	again.send(&grpcapi.ToServer{ToServerEnum: &grpcapi.ToServer_AgentHello{AgentHello: &grpcapi.AgentHello{
		AgentName: "agent_A", ProtocolVersion: rpc.ProtocolVersion, GrapnelIncarnation: 1}}})
	if m, ok := again.tryExpect(10*time.Second, func(m *grpcapi.FromServer) bool { return m.GetServerHello() != nil || m.GetUpdateWorkload() != nil }); ok {
		t.Fatalf("the refused agent got %T", m.GetFromServerEnum())
	}
	err := again.streamErr()
	st, _ := status.FromError(err)
	if st.Code() != codes.ResourceExhausted || !strings.Contains(st.Message(), "agent_A") ||
		!strings.Contains(st.Message(), fmt.Sprint(testMessageLimit)) || !strings.Contains(st.Message(), "ServerHello") {
		t.Fatalf("the refused agent's stream ended with %v, want ResourceExhausted naming the ServerHello, the agent and the limit", err)
	}
	if lines := linesOf(&log, "too large to send"); len(lines) != 1 || !strings.Contains(lines[0], "level=ERROR") {
		t.Fatalf("the server logged %q", lines)
	}
	if got := len(cli.get("desiredState.workloads.w0").GetDesiredState().GetWorkloads().GetWorkloads()); got != 1 {
		t.Fatalf("the server answered %d workloads after refusing the agent", got)
	}
}

// fit cuts state broadcasts into messages that fit and answers an
// oversized response with an error of the same request id.
func TestFit(t *testing.T) {
	var states []*ankbase.WorkloadState
	for i := range 300 {
		states = append(states, rpc.WorkloadStatesToProto([]state.WorkloadState{{
			Instance: state.NewInstanceName(fmt.Sprintf("workload_%03d", i), "agent_A", strings.Repeat("0", 64)),
			State:    state.RunningOk}})...)
	}
	msg := &grpcapi.FromServer{FromServerEnum: &grpcapi.FromServer_UpdateWorkloadState{
		UpdateWorkloadState: &grpcapi.UpdateWorkloadState{WorkloadStates: states}}}
	const limit = 8 << 10
	n := proto.Size(msg)
	parts, err := fit(msg, n, limit, "cli-conn-1")
	if err != nil {
		t.Fatal(err)
	}
	var got []*ankbase.WorkloadState
	for _, p := range parts {
		if s := proto.Size(p); s > limit {
			t.Fatalf("a part of %d bytes", s)
		}
		got = append(got, p.GetUpdateWorkloadState().GetWorkloadStates()...)
	}
	if len(parts) < n/limit || len(got) != len(states) {
		t.Fatalf("%d states in %d parts from %d bytes", len(got), len(parts), n)
	}
	for i := range got {
		if !proto.Equal(got[i], states[i]) {
			t.Fatalf("state %d changed or moved", i)
		}
	}

	resp := &grpcapi.FromServer{FromServerEnum: &grpcapi.FromServer_Response{Response: &ankbase.Response{RequestId: "r1",
		ResponseContent: &ankbase.Response_LogEntriesResponse{LogEntriesResponse: &ankbase.LogEntriesResponse{}}}}}
	parts, err = fit(resp, 9000, limit, "cli-conn-1")
	if err != nil || len(parts) != 1 {
		t.Fatalf("%v, %v", parts, err)
	}
	r := parts[0].GetResponse()
	if r.GetRequestId() != "r1" || !strings.Contains(r.GetError().GetMessage(), "9000 bytes") {
		t.Fatalf("an oversized answer became %v", r)
	}

	hello := &grpcapi.FromServer{FromServerEnum: &grpcapi.FromServer_ServerHello{ServerHello: &grpcapi.ServerHello{}}}
	if _, err := fit(hello, 9000, limit, "agent_A"); err == nil || !strings.Contains(err.Error(), "agent_A") {
		t.Fatalf("a ServerHello over the limit: %v", err)
	}
}
