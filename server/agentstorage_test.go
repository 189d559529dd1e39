package server

import (
	"strings"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/grapnel-io/grapnel/internal/testwait"
	"github.com/grapnel-io/grapnel/rpc"
	"github.com/grapnel-io/grapnel/rpc/ankbase"
	"github.com/grapnel-io/grapnel/rpc/grpcapi"
	"github.com/grapnel-io/grapnel/rpc/wire"
	"github.com/grapnel-io/grapnel/server/problems"
	"github.com/grapnel-io/grapnel/state"
)

// storageProblem is the open AgentStorageFailed problem of agent, nil
// when there is none.
func (ts *testServer) storageProblem(agent string) *state.Problem {
	var out *state.Problem
	ts.store(func(s *state.Store) {
		if p, ok := s.Problems.Open[string(problems.AgentStorageFailed)+"/"+agent]; ok {
			c := *p
			out = &c
		}
	})
	return out
}

func loadWithFault(agent, fault string) *grpcapi.ToServer {
	return &grpcapi.ToServer{ToServerEnum: &grpcapi.ToServer_AgentLoadStatus{AgentLoadStatus: &grpcapi.AgentLoadStatus{
		AgentName: agent, CpuUsage: &ankbase.CpuUsage{CpuUsage: 1}, FreeMemory: &ankbase.FreeMemory{FreeMemory: 1},
		GrapnelStorageFailed: fault}}}
}

// Requirement (issue 29 point 3, agents): what an agent's hello and load
// reports say of its run folder opens an AgentStorageFailed problem that
// names the agent and the fault, and a report without it closes the
// problem. The fault lives in the leader's memory: only the problem's own
// entry is written.
func TestAgentStorageFaultOpensAndClosesAProblem(t *testing.T) {
	ts := startServerCfg(t, t.TempDir(), nil, shortReconnectGrace)
	const fault = "replace workload-uids.json: no space left on device"

	// Said in the hello: an agent that restarted on a failed run folder.
	hello := ts.dial(wire.KindAgent)
	hello.send(&grpcapi.ToServer{ToServerEnum: &grpcapi.ToServer_AgentHello{AgentHello: &grpcapi.AgentHello{
		AgentName: "agent_H", ProtocolVersion: rpc.ProtocolVersion, GrapnelStorageFailed: fault}}})
	hello.expect("ServerHello", func(m *grpcapi.FromServer) bool { return m.GetServerHello() != nil })
	testwait.For(t, 10*time.Second, func() bool { return ts.storageProblem("agent_H") != nil }, "a problem from the hello")

	// An agent gone (here: a clean stop) takes its problem along; the
	// fault was its stream's.
	hello.send(&grpcapi.ToServer{ToServerEnum: &grpcapi.ToServer_Goodbye{Goodbye: &grpcapi.Goodbye{}}})
	hello.close()
	testwait.For(t, 10*time.Second, func() bool { return ts.storageProblem("agent_H") == nil }, "the gone agent's problem to close")

	// Said in a load report, then cleared by the next one.
	a := ts.agent("agent_A", nil)
	a.send(loadWithFault("agent_A", fault))
	testwait.For(t, 10*time.Second, func() bool { return ts.storageProblem("agent_A") != nil }, "a problem from the load report")
	p := ts.storageProblem("agent_A")
	if p.Summary != "Agent agent_A: run folder failed: "+fault+"." || !strings.Contains(p.Detail, fault) ||
		len(p.Objects) != 1 || p.Objects[0] != (state.ProblemObject{Kind: problems.ObjAgent, Name: "agent_A"}) {
		t.Fatalf("problem %+v", p)
	}
	applied := ts.fsm.AppliedIndex()
	a.send(loadWithFault("agent_A", fault)) // the same again: nothing new
	a.sync("the same fault again")
	if got := ts.fsm.AppliedIndex(); got != applied {
		t.Fatalf("a repeated fault moved the Raft index from %d to %d", applied, got)
	}
	a.send(loadWithFault("agent_A", ""))
	testwait.For(t, 10*time.Second, func() bool { return ts.storageProblem("agent_A") == nil }, "the problem to close")

	// A text that is too long is kept, cut.
	a.send(loadWithFault("agent_A", strings.Repeat("ü", 200)))
	testwait.For(t, 10*time.Second, func() bool { return ts.storageProblem("agent_A") != nil }, "a problem from a bad text")
	p = ts.storageProblem("agent_A")
	if got := strings.TrimSuffix(strings.TrimPrefix(p.Summary, "Agent agent_A: run folder failed: "), "."); len(got) > maxAgentStorageFault || !utf8.ValidString(got) {
		t.Fatalf("a bad fault text is kept as %q (%d bytes)", got, len(got))
	}
}

func TestCutFault(t *testing.T) {
	if got := cutFault("short", 160); got != "short" {
		t.Fatalf("%q", got)
	}
	got := cutFault(strings.Repeat("ü", 100), 160)
	if len(got) > 160 || !utf8.ValidString(got) || !strings.HasSuffix(got, "…") {
		t.Fatalf("%q (%d bytes)", got, len(got))
	}
}
