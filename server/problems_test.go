package server

import (
	"context"
	"slices"
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"

	"github.com/grapnel-io/grapnel/fsm"
	"github.com/grapnel-io/grapnel/internal/clock"
	"github.com/grapnel-io/grapnel/internal/testwait"
	"github.com/grapnel-io/grapnel/rpc/grapnelpb"
	"github.com/grapnel-io/grapnel/rpc/grpcapi"
	"github.com/grapnel-io/grapnel/server/metrics"
	"github.com/grapnel-io/grapnel/server/problems"
	"github.com/grapnel-io/grapnel/state"
)

// problemByKey is the open problem with key, or nil.
func (ts *testServer) problemByKey(key string) *state.Problem {
	var p *state.Problem
	ts.store(func(st *state.Store) {
		if o := st.Problems.Open[key]; o != nil {
			c := *o
			p = &c
		}
	})
	return p
}

// waitProblem waits until the problem with key is open (open true) or
// closed, and returns it when open.
func (ts *testServer) waitProblem(key string, open bool) *state.Problem {
	ts.t.Helper()
	var p *state.Problem
	testwait.For(ts.t, 10*time.Second, func() bool {
		p = ts.problemByKey(key)
		return (p != nil) == open
	}, "problem %s open=%v", key, open)
	return p
}

// problemEvent waits for the next event of subscription id and returns
// its added and removed fields.
func problemEvent(c *testConn, id string) (added, removed []string) {
	c.t.Helper()
	ev := nextEvent(c, id)
	return ev.GetAlteredFields().GetAddedFields(), ev.GetAlteredFields().GetRemovedFields()
}

const appNeedsDB = `
apiVersion: v1
workloads:
  app:
    runtime: podman
    agent: agent_A
    runtimeConfig: "image: app"
    dependencies:
      db: ADD_COND_RUNNING
`

const dbWorkload = `
apiVersion: v1
workloads:
  db:
    runtime: podman
    agent: agent_A
    runtimeConfig: "image: db"
`

// Requirement (issue 16, points 3 and 7): a dependency on a missing
// workload is a problem with an id, the leader's time and the objects
// involved, sent as an event to subscribers of problems; it disappears
// when the dependency is added and comes back with a new id when it is
// deleted again. Nothing is written while nothing changes.
func TestProblemsMissingDependencyAppearsClearsRecurs(t *testing.T) {
	fake := clock.NewFake(time.Unix(1_700_000_000, 0))
	ts := startServerCfg(t, t.TempDir(), nil, func(c *Config) { c.Clock, c.AgentReconnectGrace = fake, testGrace })
	ts.hello("agent_A", 1, nil)
	cli := ts.cli()
	sub := subscribe(cli, "problems")
	all := subscribe(cli) // an Ankaios client's subscription to everything
	key := "MissingDependency/app/db"

	cli.update(manifest(t, appNeedsDB), "desiredState.workloads.app")
	p := ts.waitProblem(key, true)
	if p.Kind != string(problems.MissingDependency) || p.SinceMs != fake.Now().UnixMilli() || p.Summary == "" || p.Detail == "" ||
		!slices.Equal(p.Objects, []state.ProblemObject{{Kind: "workload", Name: "app"}, {Kind: "workload", Name: "db"}}) {
		t.Fatalf("problem %+v", p)
	}
	if added, _ := problemEvent(cli, sub); !slices.Equal(added, []string{problemPath(p.ID)}) {
		t.Fatalf("event added %v, want %s", added, problemPath(p.ID))
	}

	fake.Advance(time.Minute)
	cli.update(manifest(t, dbWorkload), "desiredState.workloads.db")
	ts.waitProblem(key, false)
	if _, removed := problemEvent(cli, sub); !slices.Equal(removed, []string{problemPath(p.ID)}) {
		t.Fatalf("event removed %v, want %s", removed, problemPath(p.ID))
	}

	cli.update(manifest(t, "apiVersion: v1"), "desiredState.workloads.db")
	again := ts.waitProblem(key, true)
	if again.ID == p.ID || again.SinceMs != fake.Now().UnixMilli() {
		t.Fatalf("the recurrence is %+v; want a new id (not %d) since now", again, p.ID)
	}

	// The subscriber of everything (an Ankaios client) saw no problem path.
	for {
		m, ok := cli.tryExpect(200*time.Millisecond, func(m *grpcapi.FromServer) bool { return m.GetResponse().GetRequestId() == all })
		if !ok {
			break
		}
		af := m.GetResponse().GetCompleteStateResponse().GetAlteredFields()
		for _, f := range slices.Concat(af.GetAddedFields(), af.GetRemovedFields()) {
			if len(f) >= 8 && f[:8] == "problems" {
				t.Fatalf("a subscriber without a problems mask got %s", f)
			}
		}
	}

	// Idle: reads, load reports and time write nothing.
	count := countEntries(ts)
	for range 3 {
		cli.get("desiredState")
		fake.Advance(time.Hour)
	}
	if n := count(fsm.ProblemsChangedType); n != 0 {
		t.Fatalf("%d ProblemsChanged entries while nothing changed", n)
	}
	if n := fake.Pending(); n != 0 {
		t.Fatalf("%d timers armed at idle", n)
	}
}

// Requirement (issue 16, points 3 and 7): an agent with workloads that is
// gone past its reconnect grace is a problem until it comes back; an
// agent that never connected is one once the grace this leader gives it
// has run out, not before.
func TestProblemsAgentGoneAndNeverConnected(t *testing.T) {
	fake := clock.NewFake(time.Unix(1_700_000_000, 0))
	ts := startServerCfg(t, t.TempDir(), mustState(t, twoAgents), func(c *Config) { c.Clock, c.AgentReconnectGrace = fake, testGrace })
	ts.hello("agent_A", 1, nil)
	b, _ := ts.hello("agent_B", 1, nil)
	testwait.For(t, 10*time.Second, func() bool {
		ok := false
		ts.store(func(st *state.Store) { ok = st.Agents["agent_B"] != nil })
		return ok
	}, "agent_B connected")
	b.close()
	testwait.For(t, 10*time.Second, func() bool { return fake.PendingFor(testGrace) == 1 }, "agent_B's grace")
	if p := ts.problemByKey("AgentGone/agent_B"); p != nil {
		t.Fatalf("a problem during the grace: %+v", p)
	}
	fake.Advance(testGrace)
	p := ts.waitProblem("AgentGone/agent_B", true)
	if !slices.Contains(p.Objects, state.ProblemObject{Kind: "workload", Name: "wl_b"}) {
		t.Fatalf("the problem does not name wl_b: %+v", p)
	}
	ts.hello("agent_B", 2, nil)
	ts.waitProblem("AgentGone/agent_B", false)

	cli := ts.cli()
	cli.update(manifest(t, `
apiVersion: v1
workloads:
  lost:
    runtime: podman
    agent: ghost
    runtimeConfig: "image: x"
`), "desiredState.workloads.lost")
	testwait.For(t, 10*time.Second, func() bool { return fake.PendingFor(DefaultAgentConnectGrace) == 1 }, "the connect grace of the never-seen agent")
	fake.Advance(DefaultAgentConnectGrace - time.Millisecond)
	if p := ts.problemByKey("AgentNeverConnected/ghost"); p != nil {
		t.Fatalf("a never-connected problem within the grace: %+v", p)
	}
	fake.Advance(time.Millisecond)
	ts.waitProblem("AgentNeverConnected/ghost", true)
	cli.update(manifest(t, "apiVersion: v1"), "desiredState.workloads.lost")
	ts.waitProblem("AgentNeverConnected/ghost", false)
}

// Requirement (issue 16, points 3 and 7): a new leader gives a
// never-connected agent the connect grace again, and keeps its problem
// meanwhile and after: same id, same time.
func TestProblemsNeverConnectedKeptByNewLeader(t *testing.T) {
	dir := t.TempDir()
	fake := clock.NewFake(time.Unix(1_700_000_000, 0))
	ts := startServerCfg(t, dir, nil, func(c *Config) { c.Clock = fake })
	ts.cli().update(manifest(t, `
apiVersion: v1
workloads:
  lost:
    runtime: podman
    agent: ghost
    runtimeConfig: "image: x"
`), "desiredState.workloads.lost")
	testwait.For(t, 10*time.Second, func() bool { return fake.PendingFor(DefaultAgentConnectGrace) == 1 }, "the connect grace")
	fake.Advance(DefaultAgentConnectGrace)
	before := ts.waitProblem("AgentNeverConnected/ghost", true)
	ts.stop()

	fake2 := clock.NewFake(time.Unix(1_800_000_000, 0))
	ts2 := startServerCfg(t, dir, nil, func(c *Config) { c.Clock = fake2 })
	testwait.For(t, 10*time.Second, func() bool { return fake2.PendingFor(DefaultAgentConnectGrace) == 1 }, "the new leader's connect grace")
	if p := ts2.problemByKey(before.Key); p == nil || p.ID != before.ID {
		t.Fatalf("within the new leader's grace: %+v, want %+v", p, before)
	}
	count := countEntries(ts2)
	fake2.Advance(DefaultAgentConnectGrace)
	testwait.For(t, 10*time.Second, func() bool { return fake2.Pending() == 0 }, "the grace over")
	ts2.cli().get("desiredState") // a round trip through the leader loop after the detection
	if p := ts2.problemByKey(before.Key); p == nil || p.ID != before.ID || p.SinceMs != before.SinceMs {
		t.Fatalf("after the new leader's grace: %+v, want %+v", p, before)
	}
	if n := count(fsm.ProblemsChangedType); n != 0 {
		t.Fatalf("the new leader wrote %d ProblemsChanged entries for an unchanged problem", n)
	}
}

// Requirement (issue 16, point 3): an instance that fails three times
// within ten minutes is a problem; it stays while the instance runs
// again, and the one timer the leader arms clears it once ten minutes
// pass without a failure.
func TestProblemsFailingRepeatedlyClearsAfterWindow(t *testing.T) {
	fake := clock.NewFake(time.Unix(1_700_000_000, 0))
	ts := startServerCfg(t, t.TempDir(), mustState(t, twoAgents), func(c *Config) { c.Clock, c.AgentReconnectGrace = fake, testGrace })
	a, _ := ts.hello("agent_A", 1, nil)
	ts.hello("agent_B", 1, nil)
	failed := state.ExecutionState{State: state.StateFailed, SubState: state.SubExecFailed}
	gen := uint64(0)
	send := func(s state.ExecutionState) {
		gen++
		a.report(gen, state.WorkloadState{Instance: instA, State: s})
		testwait.For(t, 10*time.Second, func() bool { got, _ := ts.stateOf(instA); return got == s }, "state %s stored", s)
	}
	key := "FailingRepeatedly/" + instA.String()
	for i := range 3 {
		send(state.RunningOk)
		fake.Advance(time.Minute)
		send(failed)
		if i < 2 && ts.problemByKey(key) != nil {
			t.Fatalf("a problem after %d failures", i+1)
		}
	}
	p := ts.waitProblem(key, true)
	send(state.RunningOk)
	fake.Advance(9 * time.Minute)
	if got := ts.problemByKey(key); got == nil || got.ID != p.ID {
		t.Fatalf("the problem closed before the window ended: %+v", got)
	}
	fake.Advance(time.Minute)
	ts.waitProblem(key, false)
	testwait.For(t, 10*time.Second, func() bool { return fake.Pending() == 0 }, "no timer left")
}

// A read of the problems through the service answers what the store
// holds, in id order, and the gauge counts them by kind (0 for a kind
// with none).
func TestProblemsServiceAndGauge(t *testing.T) {
	set := metrics.NewSet()
	ts := startServerCfg(t, t.TempDir(), nil, func(c *Config) { c.Metrics = set })
	ts.hello("agent_A", 1, nil)
	cli := ts.cli()
	cli.update(manifest(t, appNeedsDB), "desiredState.workloads.app")
	ts.waitProblem("MissingDependency/app/db", true)
	resp := listProblems(t, ts)
	if len(resp.GetProblems()) != 1 || resp.GetProblems()[0].GetKind() != "MissingDependency" || resp.GetLastId() != resp.GetProblems()[0].GetId() {
		t.Fatalf("listed %v", resp)
	}
	var out strings.Builder
	if _, err := set.Registry.WriteTo(&out); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{`grapnel_problems{kind="MissingDependency"} 1`, `grapnel_problems{kind="AgentGone"} 0`} {
		if !strings.Contains(out.String(), want) {
			t.Fatalf("metrics lack %s:\n%s", want, out.String())
		}
	}
}

// listProblems calls the Problems service of ts.
func listProblems(t *testing.T, ts *testServer) *grapnelpb.ProblemsListResponse {
	t.Helper()
	cc, err := grpc.NewClient(ts.addr, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	defer cc.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	resp, err := grapnelpb.NewProblemsClient(cc).List(ctx, &grapnelpb.ProblemsListRequest{})
	if err != nil {
		t.Fatal(err)
	}
	return resp
}

// Requirement (issue 30 point 6, MAMID's LastUpdated): when the condition
// of an open problem changes under its key (one more workload on a gone
// agent), the leader rewrites its objects and descriptions and dates it:
// same id, same since, a later lastUpdated, as `get problems` shows.
func TestProblemsUpdatedWithLastUpdated(t *testing.T) {
	fake := clock.NewFake(time.Unix(1_700_000_000, 0))
	ts := startServerCfg(t, t.TempDir(), mustState(t, twoAgents), func(c *Config) { c.Clock, c.AgentReconnectGrace = fake, testGrace })
	ts.hello("agent_A", 1, nil)
	b, _ := ts.hello("agent_B", 1, nil)
	testwait.For(t, 10*time.Second, func() bool {
		ok := false
		ts.store(func(st *state.Store) { ok = st.Agents["agent_B"] != nil && st.ProblemUpdates() })
		return ok
	}, "agent_B connected, at the cluster version of problem updates")
	b.close()
	testwait.For(t, 10*time.Second, func() bool { return fake.PendingFor(testGrace) == 1 }, "agent_B's grace")
	fake.Advance(testGrace)
	first := ts.waitProblem("AgentGone/agent_B", true)
	if first.LastUpdatedMs() != first.SinceMs {
		t.Fatalf("a new problem's lastUpdated %d, want its since %d", first.LastUpdatedMs(), first.SinceMs)
	}
	fake.Advance(time.Second)
	cli := ts.cli()
	cli.update(manifest(t, `
apiVersion: v1
workloads:
  wl_b2:
    runtime: podman
    agent: agent_B
    runtimeConfig: "image: b2"
`), "desiredState.workloads.wl_b2")
	var p *state.Problem
	testwait.For(t, 10*time.Second, func() bool {
		p = ts.problemByKey("AgentGone/agent_B")
		return p != nil && slices.Contains(p.Objects, state.ProblemObject{Kind: "workload", Name: "wl_b2"})
	}, "AgentGone/agent_B names wl_b2")
	if p.ID != first.ID || p.SinceMs != first.SinceMs || p.UpdatedMs <= first.SinceMs || !strings.Contains(p.Summary, "2 workload(s)") {
		t.Fatalf("updated problem %+v; first %+v", p, first)
	}
	resp := listProblems(t, ts)
	for _, pr := range resp.GetProblems() {
		if pr.GetKey() == "AgentGone/agent_B" && (pr.GetLastUpdatedMs() != p.UpdatedMs || pr.GetSinceMs() != p.SinceMs) {
			t.Fatalf("List: %v; want lastUpdatedMs %d", pr, p.UpdatedMs)
		}
	}
}

// Requirement (issue 30 point 6, issue 31 point 4, M14): a desired
// instance that sits in Failed(Lost) (restart policy NEVER) is a
// WorkloadLost problem once it has sat there problems.StuckMs, by the
// leader's timer, with no other change; it closes when the instance
// runs again.
func TestProblemsWorkloadLostAfterStuckMs(t *testing.T) {
	fake := clock.NewFake(time.Unix(1_700_000_000, 0))
	ts := startServerCfg(t, t.TempDir(), mustState(t, twoAgents), func(c *Config) { c.Clock, c.AgentReconnectGrace = fake, testGrace })
	a, _ := ts.hello("agent_A", 1, nil)
	ts.hello("agent_B", 1, nil)
	inst := state.NewInstanceName("wl_a", "agent_A", "image: a")
	lost := state.ExecutionState{State: state.StateFailed, SubState: state.SubLost, AdditionalInfo: "drift: removed behind the agent's back"}
	a.send(statesMsg(state.WorkloadState{Instance: inst, State: state.RunningOk}))
	a.send(statesMsg(state.WorkloadState{Instance: inst, State: lost}))
	testwait.For(t, 10*time.Second, func() bool { st, ok := ts.stateOf(inst); return ok && st.Is(state.StateFailed, state.SubLost) },
		"wl_a Failed(Lost) in the store")
	key := "WorkloadLost/" + inst.String()
	fake.Advance(problems.StuckMs*time.Millisecond - time.Second)
	if p := ts.problemByKey(key); p != nil {
		t.Fatalf("a lost instance is a problem before StuckMs: %+v", p)
	}
	fake.Advance(time.Second)
	p := ts.waitProblem(key, true)
	if !strings.Contains(p.Summary, "wl_a") || !strings.Contains(p.Detail, "removed behind the agent's back") {
		t.Fatalf("problem %+v", p)
	}
	a.send(statesMsg(state.WorkloadState{Instance: inst, State: state.RunningOk}))
	ts.waitProblem(key, false)
}
