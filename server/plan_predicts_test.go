package server

import (
	"fmt"
	"math/rand/v2"
	"slices"
	"sort"
	"strings"
	"testing"

	"github.com/grapnel-io/grapnel/fsm"
	"github.com/grapnel-io/grapnel/rpc"
	"github.com/grapnel-io/grapnel/rpc/ankbase"
	"github.com/grapnel-io/grapnel/rpc/grapnelpb"
	"github.com/grapnel-io/grapnel/rpc/grpcapi"
	"github.com/grapnel-io/grapnel/server/plan"
	"github.com/grapnel-io/grapnel/server/secrets"
	"github.com/grapnel-io/grapnel/state"
)

// The plan predicts the apply (issue 30 point 3): for random states and
// updates (pinned and placed workloads with dependencies, config and
// secret items, agents connected or not, with capacities and modes, some
// instances reported running),
// what a dry-run shows is what the update then does, as the leader does
// it: the update planned (plan.Make), executed by the FSM on the store
// (projected.execute, which decodes the entry as every replica will),
// the agents' messages of its dispatch (planDispatch), then the allocator
// on the store it made (plan.Place, as leader.layout runs it) with that
// entry executed and dispatched. Compared: whether it is accepted and
// changes anything, each workload's new and old instance names (and
// whether the server removes a deleted one itself), every
// agent's steps (add or delete, which instance), the conditions each step
// waits for, and that an instance replaced on an agent is added after the
// old one there is removed. A failing seed is printed.
func TestPlanPredictsApply(t *testing.T) {
	keys, err := secrets.ParseKeyring([]byte("k1 AAECAwQFBgcICQoLDA0ODxAREhMUFRYXGBkaGxwdHh8="))
	if err != nil {
		t.Fatal(err)
	}
	rounds := 2000
	switch {
	case testing.Short():
		rounds = 300
	case raceEnabled:
		rounds = 200 // the rest without the detector: make chaos
	}
	for seed := uint64(1); seed <= uint64(rounds); seed++ {
		r := rand.New(rand.NewPCG(seed, 0x9e3779b97f4a7c15))
		g := newGen(r)
		l := planLeader(state.NewStore(), state.DefaultLimits())
		l.s.cfg.Secrets = keys
		st := l.projected.store
		for _, a := range g.agents {
			if r.IntN(5) > 0 {
				st.AgentConnected(a, g.agentTags(a))
			}
			if r.IntN(6) == 0 {
				st.SetAgentMode(a, state.AgentMode(1+r.IntN(2)))
			}
		}
		owner := []string{"", "alice", "bob"}[r.IntN(3)]
		if _, ok := applyAsLeader(t, l, replaceAll(t, g.manifest()), owner); !ok {
			t.Fatalf("seed %d: the first state is refused:\n%s", seed, g.manifest())
		}
		reportSome(r, st)
		g.mutate()
		next := replaceAll(t, g.manifest())
		before := st.Clone()
		resp := l.dryRun(next, owner, plan.Admission{})
		did, ok := applyAsLeader(t, l, next, owner)
		if msg := comparePlan(resp, did, ok, before, l.projected.store); msg != "" {
			t.Fatalf("seed %d: %s\nstate before:\n%s\nupdate:\n%s\nplan:\n  %s", seed, msg,
				manifestOf(before), g.manifest(), strings.Join(stepsText(resp), "\n  "))
		}
	}
}

// reportSome sets some instances Running, as their agents would report
// them: an instance still Pending(Initial) on an agent that is not
// connected is one the server deletes itself, a running one is not.
func reportSome(r *rand.Rand, st *state.Store) {
	var states []state.WorkloadState
	for _, n := range state.SortedKeys(st.Rendered) {
		rw := st.Rendered[n]
		instances := []state.InstanceName{rw.Instance}
		if rw.Instance.AgentName == "" {
			instances = rw.InstancesIn(st.Placement)
		}
		for _, in := range instances {
			if in.AgentName != "" && r.IntN(2) == 0 {
				states = append(states, state.WorkloadState{Instance: in, State: state.RunningOk})
			}
		}
	}
	st.ApplyStates(states)
}

// applied is what an update did: its plan and the messages its entries
// sent to each agent, in order (the update's, then the layout's).
type applied struct {
	p        *plan.Plan
	messages []map[string]*grpcapi.UpdateWorkload
}

// applyAsLeader makes req on l's store as the leader does, and returns
// what it did; false if it is refused.
func applyAsLeader(t *testing.T, l *leader, req *ankbase.UpdateStateRequest, owner string) (applied, bool) {
	t.Helper()
	p, err := l.planUpdate(req, plan.Admission{}, plan.Guard{Owner: owner})
	if err != nil {
		return applied{}, false
	}
	out := applied{p: p}
	if !p.Changed {
		return out, true
	}
	execute(t, l, &fsm.UpdateDesiredStateRequest{Update: p.Update, Seq: l.projected.store.DesiredSeq + 1})
	out.messages = append(out.messages, planDispatch(l.s, l.projected.store, p).perAgent)
	if !plan.HasPlacement(l.projected.store) {
		return out, true
	}
	pl := plan.Place(l.projected.store, l.adoptable(l.projected.store))
	if pl.Update.Layout == nil {
		return out, true
	}
	execute(t, l, &fsm.PlacementRequest{Update: pl.Update})
	out.messages = append(out.messages, planDispatch(l.s, l.projected.store, &plan.Plan{Added: pl.Added, Deleted: pl.Deleted}).perAgent)
	return out, true
}

// execute encodes cmd and executes it on l's store as projected does.
func execute(t *testing.T, l *leader, cmd fsm.Command) {
	t.Helper()
	buf, err := plan.EncodeChecked(l.s.limits, cmd)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := l.projected.execute(cmd.Type(), buf); err != nil {
		t.Fatal(err)
	}
}

// comparePlan returns what the dry-run resp got wrong about what the
// update did (did, accepted), made on before and producing after; "" if
// nothing.
func comparePlan(resp *grapnelpb.PlanResponse, did applied, accepted bool, before, after *state.Store) string {
	if resp.GetAccepted() != accepted {
		return fmt.Sprintf("the dry-run accepted %v (%v), the update %v", resp.GetAccepted(), resp.GetRejections(), accepted)
	}
	if !accepted {
		return ""
	}
	if resp.GetChanged() != did.p.Changed {
		return fmt.Sprintf("the dry-run says changed %v, the update %v", resp.GetChanged(), did.p.Changed)
	}
	serverRemoved := map[string]bool{}
	for _, d := range did.p.Deleted {
		serverRemoved[d.Instance.String()] = d.ServerHandled
	}
	for _, w := range resp.GetWorkloads() {
		if w.GetChange() == "deleted" && w.GetOldInstance() != "" && w.GetServerRemoves() != serverRemoved[w.GetOldInstance()] {
			return fmt.Sprintf("workload %s: the dry-run says the server removes %s: %v; the update: %v", w.GetName(), w.GetOldInstance(), w.GetServerRemoves(), serverRemoved[w.GetOldInstance()])
		}
		if w.GetChange() != "deleted" && w.GetInstance() != "" && after.Rendered[w.GetName()].Instance.String() != w.GetInstance() {
			return fmt.Sprintf("workload %s: the dry-run names instance %s, the update made %s", w.GetName(), w.GetInstance(), after.Rendered[w.GetName()].Instance)
		}
		if w.GetOldInstance() != "" && before.Rendered[w.GetName()].Instance.String() != w.GetOldInstance() {
			return fmt.Sprintf("workload %s: the dry-run replaces instance %s, the store had %s", w.GetName(), w.GetOldInstance(), before.Rendered[w.GetName()].Instance)
		}
	}
	// Every step the agents were sent, with what it waits for.
	var sent []string
	for _, msgs := range did.messages {
		for agent, uw := range msgs {
			deleting := map[string]bool{}
			for _, d := range uw.GetDeletedWorkloads() {
				n := rpc.InstanceNameFromProto(d.GetInstanceName())
				deleting[n.WorkloadName] = true
				var waits []string
				for dep, c := range d.GetDependencies() {
					waits = append(waits, dep+" "+c.String())
				}
				sent = append(sent, stepLine(agent, plan.ActionDelete, n.String(), waits))
			}
			for _, a := range uw.GetAddedWorkloads() {
				n := rpc.InstanceNameFromProto(a.GetInstanceName())
				var waits []string
				for dep, c := range a.GetWorkload().GetDependencies().GetDependencies() {
					waits = append(waits, dep+" "+c.String())
				}
				if deleting[n.WorkloadName] {
					// The agent updates it in place: the old one goes first.
					waits = append(waits, n.WorkloadName+" "+plan.CondRemoved)
				}
				sent = append(sent, stepLine(agent, plan.ActionAdd, n.String(), waits))
			}
		}
	}
	var planned []string
	for _, a := range resp.GetAgents() {
		wave := map[string]uint32{}
		for _, s := range a.GetSteps() {
			var waits []string
			for _, w := range s.GetWaitFor() {
				waits = append(waits, w.GetWorkload()+" "+w.GetCondition())
				if w.GetCondition() == plan.CondRemoved {
					if dw, ok := wave[s.GetWorkload()]; !ok || dw >= s.GetWave() {
						return fmt.Sprintf("agent %s: the add of %s in wave %d waits for the removal of the old instance, which is not in an earlier wave", a.GetAgent(), s.GetInstance(), s.GetWave())
					}
				}
			}
			if s.GetAction() == plan.ActionDelete {
				wave[s.GetWorkload()] = s.GetWave()
			}
			planned = append(planned, stepLine(a.GetAgent(), s.GetAction(), s.GetInstance(), waits))
		}
	}
	sort.Strings(sent)
	sort.Strings(planned)
	if !slices.Equal(sent, planned) {
		return fmt.Sprintf("the steps differ:\nplanned\n  %s\nsent\n  %s", strings.Join(planned, "\n  "), strings.Join(sent, "\n  "))
	}
	return ""
}

func stepLine(agent, action, instance string, waits []string) string {
	sort.Strings(waits)
	return fmt.Sprintf("%s: %s %s [%s]", agent, action, instance, strings.Join(waits, ", "))
}

// manifestOf is the desired state of st, for a failure's message.
func manifestOf(st *state.Store) string {
	var b strings.Builder
	for _, n := range state.SortedKeys(st.Desired.Workloads) {
		w := st.Desired.Workloads[n]
		fmt.Fprintf(&b, "  %s: agent %q tags %v deps %v configs %v on %v\n", n, w.Agent, w.Tags, w.Dependencies, w.Configs, st.Placement[n])
	}
	for _, a := range state.SortedKeys(st.Agents) {
		fmt.Fprintf(&b, "  agent %s %v mode %v\n", a, st.Agents[a].Tags, st.AgentMode(a))
	}
	return b.String()
}

// gen makes random desired states of a few workloads on a few agents.
type gen struct {
	r      *rand.Rand
	agents []string
	caps   map[string]string
	wls    map[string]*genWorkload
	cfg    string
	secret string
	fresh  int
}

// genWorkload is a workload as the generator writes it.
type genWorkload struct {
	agent     string // "" placed
	instances int
	spread    string
	image     string
	cfg, sec  bool
	deps      map[string]string
}

func newGen(r *rand.Rand) *gen {
	g := &gen{r: r, agents: []string{"a1", "a2", "a3", "a4"}, caps: map[string]string{}, wls: map[string]*genWorkload{}, cfg: "v1", secret: "pw1"}
	for _, a := range g.agents {
		if r.IntN(3) == 0 {
			g.caps[a] = fmt.Sprint(1 + r.IntN(3))
		}
	}
	for range 2 + r.IntN(5) {
		g.add()
	}
	return g
}

func (g *gen) agentTags(a string) map[string]string {
	t := map[string]string{"grapnel.io/risk-group": fmt.Sprint("g", g.r.IntN(2))}
	if c, ok := g.caps[a]; ok {
		t["grapnel.io/capacity"] = c
	}
	return t
}

// add adds a workload that may depend on those there are.
func (g *gen) add() {
	name := fmt.Sprintf("w%d", g.fresh)
	g.fresh++
	w := &genWorkload{image: "img" + fmt.Sprint(g.r.IntN(3)), deps: map[string]string{}}
	g.respec(w)
	for _, d := range state.SortedKeys(g.wls) {
		if g.r.IntN(4) == 0 {
			w.deps[d] = []string{"ADD_COND_RUNNING", "ADD_COND_SUCCEEDED"}[g.r.IntN(2)]
		}
	}
	g.wls[name] = w
}

// respec places or pins w anew.
func (g *gen) respec(w *genWorkload) {
	if g.r.IntN(2) == 0 {
		w.agent, w.instances = "", 1+g.r.IntN(3)
		w.spread = []string{"none", "risk-group"}[g.r.IntN(2)]
	} else {
		w.agent, w.instances = g.agents[g.r.IntN(len(g.agents))], 0
	}
	w.cfg, w.sec = g.r.IntN(3) == 0, g.r.IntN(3) == 0
}

// mutate changes a few things: workloads deleted, changed, re-placed or
// added, and the config and secret items.
func (g *gen) mutate() {
	for _, n := range state.SortedKeys(g.wls) {
		w := g.wls[n]
		switch g.r.IntN(6) {
		case 0:
			delete(g.wls, n)
		case 1:
			w.image += "x"
		case 2:
			g.respec(w)
		}
	}
	for range g.r.IntN(3) {
		g.add()
	}
	if g.r.IntN(3) == 0 {
		g.cfg += "x"
	}
	if g.r.IntN(3) == 0 {
		g.secret += "x"
	}
}

// manifest is the generator's desired state as a manifest.
func (g *gen) manifest() string {
	var b strings.Builder
	b.WriteString("apiVersion: v1\nworkloads:\n")
	for _, n := range state.SortedKeys(g.wls) {
		w := g.wls[n]
		fmt.Fprintf(&b, "  %s:\n    runtime: podman\n    agent: %q\n", n, w.agent)
		if w.agent == "" {
			fmt.Fprintf(&b, "    tags:\n      grapnel.io/instances: \"%d\"\n      grapnel.io/spread: %s\n", w.instances, w.spread)
		}
		rc := "image: " + w.image
		if w.cfg || w.sec {
			b.WriteString("    configs:\n")
			if w.cfg {
				b.WriteString("      c: cfg\n")
				rc += " {{c}}"
			}
			if w.sec {
				b.WriteString("      s: secret_s\n")
				rc += " {{s}}"
			}
		}
		fmt.Fprintf(&b, "    runtimeConfig: %q\n", rc)
		if len(w.deps) > 0 {
			b.WriteString("    dependencies:\n")
			for _, d := range state.SortedKeys(w.deps) {
				fmt.Fprintf(&b, "      %s: %s\n", d, w.deps[d])
			}
		}
	}
	fmt.Fprintf(&b, "configs:\n  cfg: %q\n  secret_s: %q\n", g.cfg, g.secret)
	return b.String()
}
