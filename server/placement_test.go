package server

import (
	"context"
	"errors"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/grapnel-io/grapnel/fsm"
	"github.com/grapnel-io/grapnel/internal/clock"
	"github.com/grapnel-io/grapnel/internal/errs"
	"github.com/grapnel-io/grapnel/internal/testwait"
	"github.com/grapnel-io/grapnel/placement"
	"github.com/grapnel-io/grapnel/rpc/grpcapi"
	"github.com/grapnel-io/grapnel/server/plan"
	"github.com/grapnel-io/grapnel/state"
)

const placedSvc = `
apiVersion: v1
workloads:
  svc:
    runtime: podman
    agent: ""
    tags:
      grapnel.io/instances: "2"
      grapnel.io/spread: risk-group
    runtimeConfig: "image: svc"
  pinned:
    runtime: podman
    agent: a2
    runtimeConfig: "image: p"
`

// layoutOf reads a placed workload's agents as committed.
func (ts *testServer) layoutOf(w string) []string {
	var out []string
	ts.store(func(s *state.Store) { out = slices.Clone(s.Placement[w]) })
	return out
}

func (ts *testServer) waitLayout(t *testing.T, w string, want ...string) {
	t.Helper()
	testwait.For(t, 10*time.Second, func() bool { return slices.Equal(ts.layoutOf(w), want) },
		"layout of %s is %v, want %v", w, ts.layoutOf(w), want)
}

// added and deleted wait for an UpdateWorkload on an agent's stream that
// adds (deletes) an instance of w on that agent.
func expectAdded(c *testConn, agent, w string) {
	c.t.Helper()
	c.expect(agent+" gets "+w, func(m *grpcapi.FromServer) bool {
		for _, a := range m.GetUpdateWorkload().GetAddedWorkloads() {
			if a.GetInstanceName().GetWorkloadName() == w && a.GetInstanceName().GetAgentName() == agent {
				return true
			}
		}
		return false
	})
}

func expectDeleted(c *testConn, agent, w string) {
	c.t.Helper()
	c.expect(agent+" deletes "+w, func(m *grpcapi.FromServer) bool {
		for _, d := range m.GetUpdateWorkload().GetDeletedWorkloads() {
			if d.GetInstanceName().GetWorkloadName() == w && d.GetInstanceName().GetAgentName() == agent {
				return true
			}
		}
		return false
	})
}

// A placed workload runs on as many agents as it asks, in distinct risk
// groups; it moves off a Disabled agent and off an agent gone past its
// grace, to an agent of an unused risk group where there is one; it
// stays on an agent in Maintenance, even when that agent disconnects;
// and each layout is a Placement transaction in the history.
func TestPlacedWorkloadFollowsAgents(t *testing.T) {
	fake := clock.NewFake(time.Unix(1_700_000_000, 0))
	ts := startServerCfg(t, t.TempDir(), nil, func(c *Config) { c.Clock, c.AgentReconnectGrace = fake, testGrace })
	rg := func(g string) map[string]string { return map[string]string{placement.TagRiskGroup: g} }
	a1, _ := ts.hello("a1", 1, rg("rg1"))
	a2, _ := ts.hello("a2", 1, map[string]string{placement.TagRiskGroup: "rg1", placement.TagCapacity: "3"})
	b1, _ := ts.hello("b1", 1, rg("rg2"))
	c1, _ := ts.hello("c1", 1, rg("rg3"))
	testwait.For(t, 10*time.Second, func() bool {
		n := 0
		ts.store(func(s *state.Store) { n = len(s.Agents) })
		return n == 4
	}, "four agents")

	cli := ts.cli()
	if r := cli.update(manifest(t, placedSvc), "desiredState"); r.GetUpdateStateSuccess() == nil {
		t.Fatalf("update refused: %v", r)
	}
	// One per risk group, the emptiest agents by name: a1 (rg1), b1 (rg2).
	ts.waitLayout(t, "svc", "a1", "b1")
	expectAdded(a1, "a1", "svc")
	expectAdded(b1, "b1", "svc")
	var id string
	ts.store(func(s *state.Store) { id = s.Rendered["svc"].Instance.ID })
	onB1 := state.InstanceName{WorkloadName: "svc", AgentName: "b1", ID: id}
	if st, ok := ts.stateOf(onB1); !ok || !st.IsPendingInitial() {
		t.Fatalf("placed instance state = %v %v, want Pending(Initial)", st, ok)
	}

	// Disabled: drained to the unused group rg3.
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := ts.srv.setAgentMode(ctx, "b1", state.ModeDisabled, "test", false); err != nil {
		t.Fatal(err)
	}
	ts.waitLayout(t, "svc", "a1", "c1")
	expectDeleted(b1, "b1", "svc")
	expectAdded(c1, "c1", "svc")

	// Maintenance: c1 keeps its instance while it is away past the grace.
	if err := ts.srv.setAgentMode(ctx, "c1", state.ModeMaintenance, "test", false); err != nil {
		t.Fatal(err)
	}
	c1.close()
	testwait.For(t, 10*time.Second, func() bool { return fake.PendingFor(testGrace) == 1 }, "grace timer for c1")
	fake.Advance(testGrace)
	testwait.For(t, 10*time.Second, func() bool {
		gone := false
		ts.store(func(s *state.Store) { _, present := s.Agents["c1"]; gone = !present })
		return gone
	}, "c1 gone past its grace")
	if got := ts.layoutOf("svc"); !slices.Equal(got, []string{"a1", "c1"}) {
		t.Fatalf("maintenance agent lost its instance: layout %v", got)
	}
	// An agent in Maintenance raises no problem when it is away.
	if p := ts.problemByKey("AgentGone/c1"); p != nil {
		t.Fatalf("an agent in maintenance raised a problem: %+v", p)
	}

	// Gone past grace: a1's instance moves; rg1 is the only group left
	// with an eligible agent, a2 (b1 disabled, c1 in maintenance).
	a1.close()
	testwait.For(t, 10*time.Second, func() bool { return fake.PendingFor(testGrace) == 1 }, "grace timer for a1")
	fake.Advance(testGrace)
	ts.waitLayout(t, "svc", "a2", "c1")
	expectAdded(a2, "a2", "svc")
	onA1 := state.InstanceName{WorkloadName: "svc", AgentName: "a1", ID: id}
	testwait.For(t, 10*time.Second, func() bool { _, ok := ts.stateOf(onA1); return !ok },
		"the server removes the state of the instance on the gone agent")

	// Asking for more than the eligible agents can give is unsatisfied,
	// and says why.
	more := manifest(t, placedSvc)
	more["desiredState"].(state.Tree)["workloads"].(state.Tree)["svc"].(state.Tree)["tags"].(state.Tree)[placement.TagInstances] = "3"
	if r := cli.update(more, "desiredState.workloads.svc"); r.GetUpdateStateSuccess() == nil {
		t.Fatalf("update refused: %v", r)
	}
	testwait.For(t, 10*time.Second, func() bool { return len(ts.srv.Unsatisfied()) == 1 }, "one unsatisfied workload")
	if u := ts.srv.Unsatisfied()[0]; u != (placement.Unsatisfied{Workload: "svc", Wanted: 3, Placed: 2, Reason: placement.ReasonNoEligibleAgent}) {
		t.Fatalf("unsatisfied = %+v", u)
	}
	// The problems view shows it (docs/problems.md): as a shortage of
	// eligible agents, not of capacity (no capacity is set anywhere),
	// naming the agents that take no new instances (D5).
	p := ts.waitProblem("NoEligibleAgent/svc", true)
	if !slices.ContainsFunc(p.Objects, func(o state.ProblemObject) bool { return o.Name == "svc" }) {
		t.Fatalf("the shortfall's problem does not name the workload: %+v", p)
	}
	if !strings.Contains(p.Detail, "in Maintenance: c1") || !strings.Contains(p.Detail, "Disabled: b1") {
		t.Fatalf("the shortfall's detail does not say which agents take no new instances: %q", p.Detail)
	}

	var kinds []state.TxKind
	ts.store(func(s *state.Store) {
		for _, tx := range s.History.Txs {
			kinds = append(kinds, tx.Kind)
		}
	})
	if n := countKind(kinds, state.TxPlacement); n < 3 {
		t.Fatalf("%d Placement transactions in %v, want at least 3", n, kinds)
	}
	if n := countKind(kinds, state.TxAgentMode); n != 2 {
		t.Fatalf("%d AgentMode transactions in %v, want 2", n, kinds)
	}
}

func countKind(ks []state.TxKind, k state.TxKind) int {
	n := 0
	for _, x := range ks {
		if x == k {
			n++
		}
	}
	return n
}

// Bad placement tags are refused with an error naming the field.
func TestPlacementTagsRefused(t *testing.T) {
	ts := startServer(t, nil)
	cli := ts.cli()
	bad := manifest(t, placedSvc)
	bad["desiredState"].(state.Tree)["workloads"].(state.Tree)["svc"].(state.Tree)["tags"].(state.Tree)[placement.TagInstances] = "many"
	r := cli.update(bad, "desiredState")
	if msg := r.GetError().GetMessage(); !strings.Contains(msg, "desiredState.workloads.svc.tags[grapnel.io/instances]") {
		t.Fatalf("response = %v, want an error naming the tag", r)
	}
}

// A spec change of a placed workload replaces its instance on each agent
// it runs on, without moving it; deleting it deletes every instance.
func TestPlacedWorkloadChangedAndDeleted(t *testing.T) {
	ts := startServer(t, nil)
	a, _ := ts.hello("a1", 1, map[string]string{placement.TagRiskGroup: "rg1"})
	b, _ := ts.hello("b1", 1, map[string]string{placement.TagRiskGroup: "rg2"})
	cli := ts.cli()
	watcher := ts.cli()
	id := subscribe(watcher, "workloadStates")
	if r := cli.update(manifest(t, placedSvc), "desiredState"); r.GetUpdateStateSuccess() == nil {
		t.Fatalf("update refused: %v", r)
	}
	ts.waitLayout(t, "svc", "a1", "b1")
	expectAdded(a, "a1", "svc")
	expectAdded(b, "b1", "svc")
	// Subscribers see the placed instances' states added.
	svcID := state.NewInstanceName("svc", "", "image: svc").ID
	for i := 0; ; i++ {
		if i == 10 {
			t.Fatal("no event adds the placed instances' states")
		}
		added := nextEvent(watcher, id).GetAlteredFields().GetAddedFields()
		if slices.Contains(added, "workloadStates.a1.svc."+svcID) && slices.Contains(added, "workloadStates.b1.svc."+svcID) {
			break
		}
	}

	// Minimal change, and nothing written when nothing changes: a new
	// agent of a new risk group, and an update that changes nothing else,
	// run the allocator but propose no layout.
	count := countEntries(ts)
	ts.hello("c1", 1, map[string]string{placement.TagRiskGroup: "rg3"})
	if r := cli.update(manifest(t, nginx), "desiredState.workloads.nginx"); r.GetUpdateStateSuccess() == nil {
		t.Fatalf("update refused: %v", r)
	}
	cli.get() // answered after the update settled
	if n := count(fsm.PlacementType); n != 0 {
		t.Fatalf("%d Placement entries after changes that move nothing", n)
	}
	if got := ts.layoutOf("svc"); !slices.Equal(got, []string{"a1", "b1"}) {
		t.Fatalf("layout moved to %v", got)
	}

	changed := manifest(t, placedSvc)
	changed["desiredState"].(state.Tree)["workloads"].(state.Tree)["svc"].(state.Tree)["runtimeConfig"] = "image: svc2"
	r := cli.update(changed, "desiredState.workloads.svc")
	if len(r.GetUpdateStateSuccess().GetAddedWorkloads()) != 2 || len(r.GetUpdateStateSuccess().GetDeletedWorkloads()) != 2 {
		t.Fatalf("the change answers %v, want two instances added and two deleted", r)
	}
	newID := state.NewInstanceName("svc", "", "image: svc2").ID
	for _, c := range []struct {
		conn  *testConn
		agent string
	}{{a, "a1"}, {b, "b1"}} {
		c.conn.expect(c.agent+" replaces svc", func(m *grpcapi.FromServer) bool {
			u := m.GetUpdateWorkload()
			return len(u.GetDeletedWorkloads()) == 1 && len(u.GetAddedWorkloads()) == 1 &&
				u.GetAddedWorkloads()[0].GetInstanceName().GetId() == newID && u.GetAddedWorkloads()[0].GetInstanceName().GetAgentName() == c.agent
		})
	}
	if got := ts.layoutOf("svc"); !slices.Equal(got, []string{"a1", "b1"}) {
		t.Fatalf("a spec change moved the workload: %v", got)
	}

	if r := cli.update(manifest(t, "apiVersion: v1\nworkloads: {}\n"), "desiredState.workloads.svc"); len(r.GetUpdateStateSuccess().GetDeletedWorkloads()) != 2 {
		t.Fatalf("the deletion answers %v, want two instances deleted", r)
	}
	expectDeleted(a, "a1", "svc")
	expectDeleted(b, "b1", "svc")
	ts.waitLayout(t, "svc")
}

// The layout survives a restart of the leader, and the new leader, whose
// allocator runs once on the reloaded store, proposes nothing while the
// agents come back within their grace: nothing is written at idle.
func TestPlacementSurvivesRestartWithoutWrites(t *testing.T) {
	dir := t.TempDir()
	ts := startServerCfg(t, dir, nil, nil)
	ts.hello("a1", 1, map[string]string{placement.TagRiskGroup: "rg1"})
	ts.hello("b1", 1, map[string]string{placement.TagRiskGroup: "rg2"})
	if r := ts.cli().update(manifest(t, placedSvc), "desiredState"); r.GetUpdateStateSuccess() == nil {
		t.Fatalf("update refused: %v", r)
	}
	ts.waitLayout(t, "svc", "a1", "b1")
	before := ts.placementTxs()
	ts.stop()

	fake := clock.NewFake(time.Unix(1_700_000_000, 0))
	ts2 := startServerCfg(t, dir, nil, func(c *Config) {
		c.Clock, c.AgentReconnectGrace, c.TrustStoredStatesAtStart = fake, testGrace, true
	})
	count := countEntries(ts2)
	if got := ts2.layoutOf("svc"); !slices.Equal(got, []string{"a1", "b1"}) {
		t.Fatalf("layout after restart: %v", got)
	}
	_, hello := ts2.hello("a1", 1, map[string]string{placement.TagRiskGroup: "rg1"})
	if ws := hello.GetAddedWorkloads(); len(ws) != 1 || ws[0].GetInstanceName().GetAgentName() != "a1" {
		t.Fatalf("a1's ServerHello after the restart: %v", ws)
	}
	ts2.hello("b1", 1, map[string]string{placement.TagRiskGroup: "rg2"})
	ts2.cli().get() // answered after everything before it settled
	if n := count(fsm.PlacementType); n != 0 || ts2.placementTxs() != before {
		t.Fatalf("%d Placement entries (%d transactions, %d before) after a restart that changed nothing", n, ts2.placementTxs(), before)
	}
}

// placementTxs counts the Placement transactions in the history.
func (ts *testServer) placementTxs() int {
	n := 0
	ts.store(func(s *state.Store) {
		for _, tx := range s.History.Txs {
			if tx.Kind == state.TxPlacement {
				n++
			}
		}
	})
	return n
}

const placedMon = `
apiVersion: v1
workloads:
  mon:
    runtime: podman
    agent: ""
    tags:
      grapnel.io/instances: "3"
      grapnel.io/spread: none
    runtimeConfig: "image: mon"
`

// An agent back after its grace finds the placed instance the allocator
// gives it again in its ServerHello, under the name it had, and gets no
// UpdateWorkload adding it after: it adopts the instance it still runs.
// Its hello waits for the layout its arrival leads to (issue 30, D10);
// sent at once, it listed nothing, the agent deleted what it ran as left
// over and created it again when the layout's entry reached it.
func TestAgentBackAfterGraceFindsItsPlacedInstanceInItsHello(t *testing.T) {
	fake := clock.NewFake(time.Unix(1_700_000_000, 0))
	ts := startServerCfg(t, t.TempDir(), nil, func(c *Config) { c.Clock, c.AgentReconnectGrace = fake, testGrace })
	ts.hello("a1", 1, nil)
	ts.hello("a2", 1, nil)
	a3, _ := ts.hello("a3", 1, nil)
	testwait.For(t, 10*time.Second, func() bool {
		n := 0
		ts.store(func(s *state.Store) { n = len(s.Agents) })
		return n == 3
	}, "three agents")
	cli := ts.cli()
	if r := cli.update(manifest(t, placedMon), "desiredState"); r.GetUpdateStateSuccess() == nil {
		t.Fatalf("update refused: %v", r)
	}
	ts.waitLayout(t, "mon", "a1", "a2", "a3")
	expectAdded(a3, "a3", "mon")
	onA3 := state.NewInstanceName("mon", "a3", "image: mon")

	// Gone past its grace: no other agent can take a third instance.
	a3.close()
	testwait.For(t, 10*time.Second, func() bool { return fake.PendingFor(testGrace) == 1 }, "grace timer for a3")
	fake.Advance(testGrace)
	ts.waitLayout(t, "mon", "a1", "a2")

	back, hello := ts.hello("a3", 2, nil)
	if ws := hello.GetAddedWorkloads(); len(ws) != 1 || ws[0].GetInstanceName().GetWorkloadName() != "mon" ||
		ws[0].GetInstanceName().GetId() != onA3.ID || ws[0].GetInstanceName().GetAgentName() != "a3" {
		t.Fatalf("a3's ServerHello lists %v, want mon's instance %s", ws, onA3)
	}
	if got := ts.layoutOf("mon"); !slices.Equal(got, []string{"a1", "a2", "a3"}) {
		t.Fatalf("layout when a3 was greeted: %v", got)
	}
	cli.get()          // after everything proposed so far settled
	back.sync("after") // and after whatever it sent a3
	if m, ok := back.tryExpect(0, func(m *grpcapi.FromServer) bool { return len(m.GetUpdateWorkload().GetAddedWorkloads()) > 0 }); ok {
		t.Fatalf("a3 was sent its instance again after its hello: %v", m)
	}
}

// What the leader remembers of an agent gone past its grace is what the
// allocator may place on it again for it to adopt: the instances the
// layout took off it, once it is back, as long as their workload is still
// placed and rendered the same.
func TestAdoptableIsWhatTheLayoutTookOffAnAgentThatIsBack(t *testing.T) {
	st := state.NewStore()
	render := func(name, rc, agent string) {
		w := &state.Workload{Runtime: "podman", Agent: agent, RuntimeConfig: rc}
		st.Rendered[name] = state.Rendered{Instance: state.NewInstanceName(name, agent, rc), Workload: w}
	}
	render("mon", "image: mon", "")
	render("log", "image: log2", "")  // changed while a3 was away
	render("pin", "image: pin", "a3") // pinned since
	st.Agents["a3"] = &state.AgentAttributes{}
	l := &leader{left: map[string]map[string]state.InstanceName{}}
	l.noteLeft([]plan.Deletion{
		{Instance: state.NewInstanceName("mon", "a3", "image: mon"), ServerHandled: true},
		{Instance: state.NewInstanceName("log", "a3", "image: log"), ServerHandled: true},
		{Instance: state.NewInstanceName("pin", "a3", "image: pin"), ServerHandled: true},
		{Instance: state.NewInstanceName("gone", "a3", "image: gone"), ServerHandled: true},
		{Instance: state.NewInstanceName("mon", "a4", "image: mon"), ServerHandled: true},  // a4 not back
		{Instance: state.NewInstanceName("mon", "a1", "image: mon"), ServerHandled: false}, // a1 deletes it itself
	})
	if got, want := l.adoptable(st), map[string][]string{"mon": {"a3"}}; !reflect.DeepEqual(got, want) {
		t.Fatalf("adoptable = %v, want %v", got, want)
	}
	if _, ok := l.left["a1"]; ok {
		t.Fatal("an instance a present agent deletes itself was remembered")
	}
}

// Requirement (issue 30 point 6, M3): disabling an agent must not leave a
// placed workload with fewer instances while another eligible agent has
// room (it moves there); where none has room it is refused, naming the
// workload, and nothing changes; --force drains anyway.
func TestDisableRefusedWhenItWouldLowerInstances(t *testing.T) {
	ts := startServerCfg(t, t.TempDir(), nil, nil)
	none := map[string]string{}
	ts.hello("a1", 1, none)
	ts.hello("a2", 1, none)
	cli := ts.cli()
	m := manifest(t, placedSvc)
	delete(m["desiredState"].(state.Tree)["workloads"].(state.Tree)["svc"].(state.Tree)["tags"].(state.Tree), placement.TagSpread)
	if r := cli.update(m, "desiredState"); r.GetUpdateStateSuccess() == nil {
		t.Fatalf("update refused: %v", r)
	}
	ts.waitLayout(t, "svc", "a1", "a2")
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()

	// No other agent: svc would keep 1 of its 2 instances.
	err := ts.srv.setAgentMode(ctx, "a2", state.ModeDisabled, "test", false)
	if !errors.Is(err, errs.ErrAvailability) || !strings.Contains(err.Error(), "svc would keep 1 of its 2 instances") {
		t.Fatalf("disable a2 with no room elsewhere: %v; want ErrAvailability naming svc 1 of 2", err)
	}
	var mode state.AgentMode
	ts.store(func(s *state.Store) { mode = s.AgentMode("a2") })
	if mode != state.ModeActive || !slices.Equal(ts.layoutOf("svc"), []string{"a1", "a2"}) {
		t.Fatalf("a refused disable changed something: a2 %v, layout %v", mode, ts.layoutOf("svc"))
	}

	// Another agent with room: the drain moves the instance there.
	ts.hello("a3", 1, none)
	testwait.For(t, 10*time.Second, func() bool {
		ok := false
		ts.store(func(s *state.Store) { _, ok = s.Agents["a3"] })
		return ok
	}, "a3 connected")
	if err := ts.srv.setAgentMode(ctx, "a2", state.ModeDisabled, "test", false); err != nil {
		t.Fatalf("disable a2 with a3 free: %v", err)
	}
	ts.waitLayout(t, "svc", "a1", "a3")

	// Again no room (a2 is Disabled): refused, unless forced.
	if err := ts.srv.setAgentMode(ctx, "a3", state.ModeDisabled, "test", false); !errors.Is(err, errs.ErrAvailability) {
		t.Fatalf("disable a3: %v; want ErrAvailability", err)
	}
	if err := ts.srv.setAgentMode(ctx, "a3", state.ModeDisabled, "test", true); err != nil {
		t.Fatalf("disable a3 --force: %v", err)
	}
	ts.waitLayout(t, "svc", "a1")
}
