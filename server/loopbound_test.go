package server

import (
	"bytes"
	"fmt"
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"

	"github.com/grapnel-io/grapnel/internal/testwait"
	"github.com/grapnel-io/grapnel/rpc"
	"github.com/grapnel-io/grapnel/rpc/ankbase"
	"github.com/grapnel-io/grapnel/rpc/grapnelpb"
	"github.com/grapnel-io/grapnel/rpc/grpcapi"
	"github.com/grapnel-io/grapnel/server/ingest"
	"github.com/grapnel-io/grapnel/server/metrics"
	"github.com/grapnel-io/grapnel/state"
)

// An agent that goes while many of its reported states wait to be
// proposed has them all stored before its departure, in entries of at
// most a batch each. They went in one entry: past max_update_bytes it
// was refused and the states were lost, and below it the leader loop
// planned and executed it in one go, for seconds with tens of thousands
// of states (issue 27).
//
// The limit is lowered so that 8,000 states (not 40,000 at the default
// 3 MiB) are more than one entry may carry: the same case at a fifth of
// the time, which under -race was 30 to 45 s of make test.
func TestDepartingAgentsPendingStatesAreStoredInBatches(t *testing.T) {
	lim := state.DefaultLimits()
	lim.MaxUpdateBytes = 128 << 10
	ts := startServerCfg(t, t.TempDir(), nil, func(c *Config) { c.Limits = &lim })
	c := ts.agent("agent_A", nil)
	const n = 8000
	var ws []state.WorkloadState
	for i := range n {
		ws = append(ws, state.WorkloadState{Instance: state.NewInstanceName(fmt.Sprintf("wl_%05d", i), "agent_A", fmt.Sprint(i)), State: state.RunningOk})
	}
	// Two messages (each under the 4 MiB message limit), then goodbye:
	// most of the states still wait in the agent's conflation unit.
	c.report(2, ws[:n/2]...)
	c.report(3, ws[n/2:]...)
	c.send(&grpcapi.ToServer{ToServerEnum: &grpcapi.ToServer_Goodbye{Goodbye: &grpcapi.Goodbye{}}})
	if err := c.stream.CloseSend(); err != nil {
		t.Fatal(err)
	}
	var stored, disconnected int
	// A bound, not a target: the benchmarks time it.
	testwait.For(t, 90*time.Second, func() bool {
		ts.store(func(st *state.Store) {
			_, connected := st.Agents["agent_A"]
			stored, disconnected = 0, 0
			for _, s := range st.States.OfAgent("agent_A") {
				stored++
				if s.State == state.AgentDisconnected {
					disconnected++
				}
			}
			if connected {
				disconnected = -1
			}
		})
		return stored == n && disconnected == n
	}, "all %d states stored and AgentDisconnected", n)
	t.Logf("stored %d, disconnected %d", stored, disconnected)
}

func TestSplitReports(t *testing.T) {
	mark := func(g uint64) state.ReportMark { return state.ReportMark{Incarnation: 1, Generation: g} }
	states := func(agent string, k int) []state.WorkloadState {
		out := make([]state.WorkloadState, k)
		for i := range out {
			out[i] = state.WorkloadState{Instance: state.InstanceName{WorkloadName: fmt.Sprint(i), AgentName: agent, ID: "x"}, State: state.RunningOk}
		}
		return out
	}
	in := []ingest.Report{
		{Agent: "a", Mark: mark(1), States: states("a", 3)},
		{Agent: "b", Mark: mark(2), States: states("b", 6)},
		{Agent: "c", Mark: mark(3), States: states("c", 1)},
	}
	got := splitReports(in, 4)
	type part struct {
		agent string
		n     int
		mark  state.ReportMark
	}
	want := [][]part{
		{{"a", 3, mark(1)}, {"b", 1, state.ReportMark{}}},
		{{"b", 4, state.ReportMark{}}},
		{{"b", 1, mark(2)}, {"c", 1, mark(3)}},
	}
	var have [][]part
	for _, e := range got {
		var ps []part
		for _, r := range e {
			ps = append(ps, part{r.Agent, len(r.States), r.Mark})
		}
		have = append(have, ps)
	}
	if fmt.Sprint(have) != fmt.Sprint(want) {
		t.Fatalf("split %v, want %v", have, want)
	}
	// In order, nothing lost.
	var all []state.WorkloadState
	for _, e := range got {
		for _, r := range e {
			all = append(all, r.States...)
		}
	}
	var flat []state.WorkloadState
	for _, r := range in {
		flat = append(flat, r.States...)
	}
	if fmt.Sprint(all) != fmt.Sprint(flat) {
		t.Fatal("the split lost or reordered states")
	}
}

// An agent's reports cannot make the cluster hold more workload states
// than --max-workload-states: the states of instances it has no state
// for are dropped beyond it and counted, while the states of the
// instances it knows still pass, and a removal frees room. Without the
// cap an agent reporting made-up instances grew the store, the
// snapshots, every complete state and every agent's hello without end
// (issue 27).
func TestReportedStatesOfUnknownInstancesAreCapped(t *testing.T) {
	const max = 300
	m := metrics.NewSet()
	ts := startServerCfg(t, t.TempDir(), mustState(t, dbWeb), func(c *Config) { c.MaxWorkloadStates = max; c.Metrics = m })
	c := ts.agent("agent_A", nil)
	var own []state.InstanceName
	ts.store(func(st *state.Store) {
		for _, ws := range st.States.OfAgent("agent_A") {
			own = append(own, ws.Instance)
		}
	})
	if len(own) != 2 {
		t.Fatalf("agent_A has %d instances, want 2", len(own))
	}
	ghost := func(i int) state.InstanceName {
		return state.InstanceName{WorkloadName: fmt.Sprintf("ghost_%04d", i), AgentName: "agent_A", ID: "x"}
	}
	var report []state.WorkloadState
	for i := range 500 {
		report = append(report, state.WorkloadState{Instance: ghost(i), State: state.RunningOk})
	}
	for _, in := range own {
		report = append(report, state.WorkloadState{Instance: in, State: state.RunningOk})
	}
	c.report(2, report...)
	c.sync("m1")
	count := func() (all, running int) {
		ts.store(func(st *state.Store) {
			for _, ws := range st.States.OfAgent("agent_A") {
				all++
				if ws.State == state.RunningOk {
					running++
				}
			}
		})
		return all, running
	}
	testwait.For(t, 10*time.Second, func() bool { all, running := count(); return all == max && running == max }, "%d states, all running", max)
	for _, in := range own {
		if s, _ := ts.stateOf(in); s != state.RunningOk {
			t.Fatalf("the state of the known instance %s is %v, want running", in, s)
		}
	}
	var text bytes.Buffer
	if _, err := m.Registry.WriteTo(&text); err != nil {
		t.Fatal(err)
	}
	if want := fmt.Sprintf("grapnel_workload_states_dropped_total %d", 500-(max-2)); !strings.Contains(text.String(), want) {
		t.Errorf("the drops are not counted: want %q", want)
	}

	// A removal frees room for one more; the next is dropped.
	c.report(3, state.WorkloadState{Instance: ghost(0), State: state.Removed})
	c.sync("m2")
	testwait.For(t, 10*time.Second, func() bool { all, _ := count(); return all == max-1 }, "ghost_0000 removed")
	c.report(4, state.WorkloadState{Instance: ghost(1000), State: state.RunningOk},
		state.WorkloadState{Instance: ghost(1001), State: state.RunningOk})
	c.sync("m3")
	testwait.For(t, 10*time.Second, func() bool {
		_, gone := ts.stateOf(ghost(0))
		_, in := ts.stateOf(ghost(1000))
		_, out := ts.stateOf(ghost(1001))
		all, _ := count()
		return !gone && in && !out && all == max
	}, "ghost_0000 removed, ghost_1000 stored, ghost_1001 dropped")
}

// Event subscriptions are capped per requester and in all: past either
// cap a subscribing CompleteStateRequest is answered with an error that
// names the setting, nothing is subscribed, and the refusal is counted;
// a re-subscription under the same id replaces the old one, and a cancel
// frees room. Without the caps every subscription cost every commit an
// event on the leader loop, 1.4 to 1.9 s per state report with 131,072
// of them (BenchmarkLoopHoldEvents; issue 27).
func TestEventSubscriptionsAreCapped(t *testing.T) {
	m := metrics.NewSet()
	ts := startServerCfg(t, t.TempDir(), mustState(t, dbWeb), func(c *Config) {
		c.MaxEventSubscriptionsPerRequester, c.MaxEventSubscriptions, c.Metrics = 2, 5, m
	})
	subscribe := func(c *testConn, id string) *ankbase.Response {
		t.Helper()
		c.send(&grpcapi.ToServer{ToServerEnum: &grpcapi.ToServer_Request{Request: &ankbase.Request{RequestId: id,
			RequestContent: &ankbase.Request_CompleteStateRequest{CompleteStateRequest: &ankbase.CompleteStateRequest{
				FieldMask: []string{"workloadStates"}, SubscribeForEvents: true}}}}})
		return c.expect("answer to "+id, func(m *grpcapi.FromServer) bool { return m.GetResponse().GetRequestId() == id }).GetResponse()
	}
	admitted := func(r *ankbase.Response) bool { return r.GetCompleteStateResponse() != nil }
	refusedFor := func(r *ankbase.Response, setting string) bool {
		return strings.Contains(r.GetError().GetMessage(), "Event subscription refused") && strings.Contains(r.GetError().GetMessage(), setting)
	}
	c1, c2, c3 := ts.cli(), ts.cli(), ts.cli()
	for _, id := range []string{"a", "b"} {
		if r := subscribe(c1, id); !admitted(r) {
			t.Fatalf("subscription %s: %v", id, r)
		}
	}
	if r := subscribe(c1, "c"); !refusedFor(r, "--max-event-subscriptions-per-requester 2") {
		t.Fatalf("a third subscription of one connection: %v", r)
	}
	if r := subscribe(c1, "a"); !admitted(r) {
		t.Fatalf("a re-subscription under the same id: %v", r)
	}
	for _, id := range []string{"a", "b"} {
		if r := subscribe(c2, id); !admitted(r) {
			t.Fatalf("second connection, %s: %v", id, r)
		}
	}
	if r := subscribe(c3, "a"); !admitted(r) {
		t.Fatalf("the fifth subscription: %v", r)
	}
	if r := subscribe(c3, "b"); !refusedFor(r, "--max-event-subscriptions 5") {
		t.Fatalf("a sixth subscription: %v", r)
	}
	c1.send(&grpcapi.ToServer{ToServerEnum: &grpcapi.ToServer_Request{Request: &ankbase.Request{RequestId: "b",
		RequestContent: &ankbase.Request_EventsCancelRequest{EventsCancelRequest: &ankbase.EventsCancelRequest{}}}}})
	c1.expect("the cancel's answer", func(m *grpcapi.FromServer) bool { return m.GetResponse().GetEventsCancelAccepted() != nil })
	if r := subscribe(c3, "b"); !admitted(r) {
		t.Fatalf("a subscription after a cancel: %v", r)
	}
	var text bytes.Buffer
	if _, err := m.Registry.WriteTo(&text); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{`grapnel_event_subscriptions_refused_total{cap="per_requester",requester="client"} 1`,
		`grapnel_event_subscriptions_refused_total{cap="total",requester="client"} 1`} {
		if !strings.Contains(text.String(), want) {
			t.Errorf("not counted: %s", want)
		}
	}
}

// The cluster holds at most --max-locks intent locks: a lock call that
// would take more is refused as over a limit (INVALID_ARGUMENT, naming
// max_locks) and changes nothing; renewing held locks adds none, and an
// unlock frees room. Without the cap a commander's calls, 1,000 objects
// each, grew the locks without end, and every lock call and list cost
// the leader loop 1.5 µs per lock held (BenchmarkLoopHoldLocks; issue
// 27).
func TestLocksAreCapped(t *testing.T) {
	ts := startServerCfg(t, t.TempDir(), nil, func(c *Config) { c.MaxLocks = 5 })
	lc := grapnelpb.NewLocksClient(dialRaw(t, ts.addr))
	ctx := as(t, "alice")
	lock := func(objs ...string) error {
		_, err := lc.Lock(ctx, &grapnelpb.LockRequest{Objects: objs, TtlMs: 600_000})
		return err
	}
	if err := lock("workload/a", "workload/b", "config/c"); err != nil {
		t.Fatal(err)
	}
	if err := lock("workload/a", "workload/b", "config/c"); err != nil {
		t.Fatalf("a renewal: %v", err)
	}
	err := lock("workload/d", "workload/e", "workload/f")
	if status.Code(err) != codes.InvalidArgument || !strings.Contains(err.Error(), "max_locks") || !strings.Contains(err.Error(), "6, more than the limit of 5") {
		t.Fatalf("a call past the cap: %v", err)
	}
	list, err := lc.List(ctx, &grapnelpb.ListLocksRequest{})
	if err != nil || len(list.GetLocks()) != 3 {
		t.Fatalf("after the refusal: %v, %v", list.GetLocks(), err)
	}
	if err := lock("workload/d", "workload/e"); err != nil {
		t.Fatalf("up to the cap: %v", err)
	}
	if _, err := lc.Unlock(ctx, &grapnelpb.UnlockRequest{Objects: []string{"workload/a"}}); err != nil {
		t.Fatal(err)
	}
	if err := lock("workload/f"); err != nil {
		t.Fatalf("after an unlock: %v", err)
	}
}

// A layout of more instances than one entry may carry is proposed in
// parts of whole workloads and all of it is placed. It went in one
// Placement entry: over max_update_bytes it was refused, nothing was
// placed, and every later change of the allocator's inputs computed it
// again and had it refused again, each time on the leader loop (0.4 to
// 1 s at the default limits' 64,000 instances; BenchmarkLoopHoldPlacement).
func TestLargeLayoutIsProposedInParts(t *testing.T) {
	lim := state.DefaultLimits()
	lim.MaxUpdateBytes = 16 << 10
	ts := startServerCfg(t, t.TempDir(), nil, func(c *Config) { c.Limits = &lim })
	for i := range 8 {
		ts.agent(fmt.Sprintf("agent_%d", i), nil)
	}
	const workloads, instances = 40, 8
	var y strings.Builder
	y.WriteString("apiVersion: v1\nworkloads:\n")
	for i := range workloads {
		fmt.Fprintf(&y, "  wl_%02d:\n    runtime: podman\n    runtimeConfig: \"image: busybox\"\n    tags:\n      grapnel.io/instances: \"%d\"\n", i, instances)
	}
	if r := ts.cli().update(manifest(t, y.String()), "desiredState.workloads"); r.GetUpdateStateSuccess() == nil {
		t.Fatalf("update: %v", r)
	}
	if n := placementChangesPerEntry(lim); n >= workloads*instances {
		t.Fatalf("%d changes per entry would carry the layout in one", n)
	}
	placed := func() (n int) {
		ts.store(func(st *state.Store) {
			for _, as := range st.Placement {
				n += len(as)
			}
		})
		return n
	}
	testwait.For(t, 20*time.Second, func() bool { return placed() == workloads*instances }, "%d instances placed", workloads*instances)
}

// A mask that names a part of the complete state whole (`workloadStates`,
// `agents`, `desiredState`) has that part converted directly, not through
// a Tree and the filter, which cost three passes over 64,000 workload
// states on the leader loop; the answer is the same as the filter's, for
// those masks alone, mixed with narrower ones, and with wildcards.
func TestWholePartsOfTheCompleteStateAsFiltered(t *testing.T) {
	ts := startServer(t, mustState(t, dbWeb+`configs:
  greeting: hello
  nested:
    a: [1, 2]
`))
	c := ts.agent("agent_A", map[string]string{"rack": "1"})
	ts.agent("agent_B", nil)
	var own []state.InstanceName
	ts.store(func(st *state.Store) {
		for _, ws := range st.States.OfAgent("agent_A") {
			own = append(own, ws.Instance)
		}
	})
	c.report(2, state.WorkloadState{Instance: own[0], State: state.RunningOk})
	c.sync("m")
	l := &leader{s: ts.srv, status: map[string]state.AgentStatus{}}
	filtered := func(masks []string) *ankbase.CompleteState {
		tree := state.Tree{}
		ts.store(func(st *state.Store) {
			tree["desiredState"] = st.Desired.ToTree()
			tree["workloadStates"] = st.States.ToTree()
			tree["agents"] = l.agentsWithStatus(st.Agents).ToTree()
		})
		cs, err := rpc.CompleteStateFromTree(state.FilterTree(tree, masks))
		if err != nil {
			t.Fatal(err)
		}
		return cs
	}
	for _, masks := range [][]string{
		{"workloadStates"}, {"agents"}, {"desiredState"},
		{"desiredState", "workloadStates", "agents"},
		{"desiredState.workloads", "workloadStates", "agents"},
		{"workloadStates", "workloadStates.agent_A"},
		{"workloadStates.agent_A", "agents"},
		{"desiredState.configs.nested", "workloadStates"},
		{"workloadStates", "*.agent_B"},
		{"*"},
	} {
		if got, want := l.readCompleteState(masks), filtered(masks); !proto.Equal(got, want) {
			t.Errorf("masks %v:\ngot  %v\nwant %v", masks, got, want)
		}
	}
}
