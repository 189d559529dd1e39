package plan

import (
	"fmt"
	"sort"

	"github.com/grapnel-io/grapnel/rpc/grapnelpb"
	"github.com/grapnel-io/grapnel/state"
)

// The agents' steps of a plan, in the order they run (describePlan):
// which step waits for which, and the waves that follow from it.

// Wait conditions of a plan step besides the Ankaios add and delete
// conditions: the old instance of an updated workload goes first.
const CondRemoved = "REMOVED"

// Plan step actions.
const (
	ActionDelete = "delete"
	ActionAdd    = "add"
)

// step is one agent action while the steps are ordered.
type step struct {
	pb    *grapnelpb.PlanStep
	agent string
	// wl is an added instance's workload, for its add conditions.
	wl *state.Workload
	// placed marks a step of the layout change the allocator asks for
	// after the update (Place): the leader proposes it as an entry of its
	// own, so it comes after the update's steps on the same instance.
	placed bool
	// after are the steps this one waits for.
	after []*step
	wave  int // -1 while unknown; -2 while computing (a cycle guard)
}

// agentPlans orders the agents' actions. What an agent waits for, it
// learns from the update: the delete conditions the delete graph gives a
// deleted instance (those of the store the update produces, as the
// dispatch sends them), the add conditions of an added one, and, for a
// workload updated in place, the removal of its old instance (Ankaios
// updates delete first, then create). With it come the steps of the
// layout change the allocator asks for after the update (pd.placed),
// which the update's steps never wait for. A step's wave is one more
// than the latest wave of the steps of this plan it waits for, so that
// steps in the same wave run independently of each other.
//
// It also names, as warnings, the deletes held by a workload outside the
// update that is running or pending now: they wait until it stops.
//
// swdd~server-state-stores-delete-condition~1
// swdd~server-state-adds-delete-conditions-to-deleted-workload~1
func agentPlans(st *state.Store, pd *planned) ([]*grapnelpb.AgentPlan, []string) {
	ss, serverRemoves := collectSteps(pd)
	graph := newGraphAfter(st, pd.rd, goneAfter(st, pd.diff.deletedWl, serverRemoves))
	warnings := ss.wait(st, graph)
	return inWaves(ss.all), warnings
}

// stepSet is the steps of a plan while they are ordered.
type stepSet struct {
	all []*step
	// dels and adds are the steps by workload name: a placed workload
	// has an instance on each agent of its layout, so a step on each.
	dels, adds map[string][]*step
}

// add adds the step of action on instance in; wl is an added instance's
// workload, placed marks a step of the layout change.
func (ss *stepSet) add(action string, in state.InstanceName, wl *state.Workload, placed bool) *step {
	s := &step{agent: in.AgentName, wl: wl, placed: placed, wave: -1, pb: &grapnelpb.PlanStep{
		Action: action, Workload: in.WorkloadName, Instance: in.String()}}
	by := ss.adds
	if action == ActionDelete {
		by = ss.dels
	}
	by[in.WorkloadName] = append(by[in.WorkloadName], s)
	ss.all = append(ss.all, s)
	return s
}

// collectSteps is the agents' steps of a plan: the update's, then those
// of the layout change after it, which wait for the update's on the same
// instance (an instance the update adds and the allocator moves at
// once). It also returns the instances the server removes itself, which
// no agent acts on.
func collectSteps(pd *planned) (*stepSet, map[state.InstanceName]bool) {
	ss := &stepSet{dels: map[string][]*step{}, adds: map[string][]*step{}}
	serverRemoves := map[state.InstanceName]bool{}
	for _, del := range pd.Deleted {
		if del.ServerHandled {
			serverRemoves[del.Instance] = true
			continue
		}
		ss.add(ActionDelete, del.Instance, nil, false)
	}
	for _, a := range pd.Added {
		if a.Instance.AgentName != "" {
			ss.add(ActionAdd, a.Instance, a.Workload, false)
		}
	}
	pl := pd.placed
	if pl == nil {
		return ss, serverRemoves
	}
	sameInstance := map[string][]*step{}
	for _, s := range ss.all {
		sameInstance[s.pb.Instance] = append(sameInstance[s.pb.Instance], s)
	}
	for _, del := range pl.Deleted {
		if !del.ServerHandled {
			s := ss.add(ActionDelete, del.Instance, nil, true)
			s.waitFor(sameInstance[s.pb.Instance])
		}
	}
	for _, a := range pl.Added {
		s := ss.add(ActionAdd, a.Instance, a.Workload, true)
		s.waitFor(sameInstance[s.pb.Instance])
	}
	return ss, serverRemoves
}

// wait sets what each step waits for: a delete, the delete conditions
// graph gives it; an add, the removal of the old instance on its agent
// and its add conditions. It returns, as warnings, the deletes held by a
// workload outside the plan that is running or pending now.
func (ss *stepSet) wait(st *state.Store, graph *graphAfter) []string {
	var warnings []string
	stateOf := func(workload string) (state.ExecutionState, bool) {
		if r, ok := st.Rendered[workload]; ok {
			return st.States.Get(r.Instance)
		}
		return state.ExecutionState{}, false
	}
	current := func(workload string) string {
		if s, ok := stateOf(workload); ok {
			return s.String()
		}
		return ""
	}
	for _, s := range ss.all {
		n := s.pb.Workload
		if s.pb.Action == ActionDelete {
			conds := graph.conditions(n)
			for _, dep := range state.SortedKeys(conds) {
				after := s.visible(ss.dels[dep])
				s.pb.WaitFor = append(s.pb.WaitFor, &grapnelpb.Wait{Workload: dep, Condition: string(conds[dep]), InPlan: len(after) > 0, Current: current(dep)})
				s.waitFor(after)
				if cur, ok := stateOf(dep); len(after) == 0 && ok && !cur.IsNotPendingNorRunning() {
					warnings = append(warnings, fmt.Sprintf("the delete of '%s' on %s waits until '%s' (%s now) is neither pending nor running; the update does not stop it",
						n, s.agent, dep, cur))
				}
			}
			continue
		}
		// An agent deletes the old instance of a workload it runs before
		// it creates the new one, when one message tells it both (the
		// update's, or the layout change's); another agent does not wait
		// for it.
		for _, old := range ss.dels[n] {
			if old.agent == s.agent && old.placed == s.placed {
				s.pb.WaitFor = append(s.pb.WaitFor, &grapnelpb.Wait{Workload: n, Condition: CondRemoved, InPlan: true, Current: current(n)})
				s.after = append(s.after, old)
			}
		}
		deps := s.wl.Dependencies
		for _, dep := range state.SortedKeys(deps) {
			after := s.visible(ss.adds[dep])
			s.pb.WaitFor = append(s.pb.WaitFor, &grapnelpb.Wait{Workload: dep, Condition: string(deps[dep]), InPlan: len(after) > 0, Current: current(dep)})
			s.waitFor(after)
		}
	}
	return warnings
}

// inWaves is the steps by agent, each agent's in waves: deletes first
// within a wave, then by workload name.
func inWaves(steps []*step) []*grapnelpb.AgentPlan {
	byAgent := map[string][]*step{}
	for _, s := range steps {
		s.pb.Wave = uint32(waveOf(s))
		byAgent[s.agent] = append(byAgent[s.agent], s)
	}
	out := make([]*grapnelpb.AgentPlan, 0, len(byAgent))
	for _, agent := range state.SortedKeys(byAgent) {
		ss := byAgent[agent]
		sort.Slice(ss, func(i, j int) bool {
			a, b := ss[i].pb, ss[j].pb
			if a.Wave != b.Wave {
				return a.Wave < b.Wave
			}
			if a.Action != b.Action {
				return a.Action == ActionDelete
			}
			return a.Workload < b.Workload
		})
		ap := &grapnelpb.AgentPlan{Agent: agent}
		for _, s := range ss {
			ap.Steps = append(ap.Steps, s.pb)
		}
		out = append(out, ap)
	}
	return out
}

// visible is the steps of ss that s can wait for: a step of the update
// waits for none of the layout change, which comes in a later entry.
func (s *step) visible(ss []*step) []*step {
	if s.placed {
		return ss
	}
	out := make([]*step, 0, len(ss))
	for _, o := range ss {
		if !o.placed {
			out = append(out, o)
		}
	}
	return out
}

// waitFor makes s wait for the steps of the update in after (all the
// instances of one workload), itself excepted.
func (s *step) waitFor(after []*step) {
	for _, a := range after {
		if a != s {
			s.after = append(s.after, a)
		}
	}
}

// waveOf is 0 for a step that waits for no step of the update, else one
// more than the latest wave it waits for. A cycle (only in a plan that
// would be rejected for it) is cut where it closes.
func waveOf(s *step) int {
	switch s.wave {
	case -2:
		return 0
	case -1:
	default:
		return s.wave
	}
	s.wave = -2
	w := 0
	for _, a := range s.after {
		w = max(w, waveOf(a)+1)
	}
	s.wave = w
	return w
}

// goneAfter is the workloads the update deletes whose last instances
// the server removes itself: the store then keeps no state of them, and
// drops them from the delete graph (state.Store.ApplyDesired, as it
// removes those states). A workload still desired (rendered again
// because a config item changed, say) stays however its old instance
// goes, and so does one the server removes no instance of.
func goneAfter(st *state.Store, deletedWl []string, serverRemoves map[state.InstanceName]bool) map[string]bool {
	removesSome := map[string]bool{}
	for in := range serverRemoves {
		removesSome[in.WorkloadName] = true
	}
	gone := map[string]bool{}
	for _, w := range deletedWl {
		gone[w] = removesSome[w] && !statesLeft(st, w, serverRemoves)
	}
	return gone
}

// statesLeft reports whether st holds a state of workload w that is not
// among removed.
func statesLeft(st *state.Store, w string, removed map[state.InstanceName]bool) bool {
	for agent, wls := range st.States {
		for id := range wls[w] {
			if !removed[state.InstanceName{WorkloadName: w, AgentName: agent, ID: id}] {
				return true
			}
		}
	}
	return false
}

// graphAfter gives the delete conditions of the delete graph of the
// store the update produces, without producing it (see
// state.Store.ApplyDesired): the store's, less those of the workloads
// rendered again, plus those their new renderings impose, less the
// workloads whose last instance the server removes itself. Each lookup
// costs what the workload's conditions do, whatever the update's size.
type graphAfter struct {
	st   *state.Store
	put  map[string]state.Rendered
	gone map[string]bool
	// added is, per dependency, the workloads rendered again that depend
	// on it with ADD_COND_RUNNING.
	added map[string][]string
}

func newGraphAfter(st *state.Store, rd *rendering, gone map[string]bool) *graphAfter {
	g := &graphAfter{st: st, put: rd.put, gone: gone, added: map[string][]string{}}
	for n, rw := range rd.put {
		for dep, cond := range rw.Workload.Dependencies {
			if cond == state.AddCondRunning {
				g.added[dep] = append(g.added[dep], n)
			}
		}
	}
	return g
}

// conditions is the delete conditions of workload name after the update.
func (g *graphAfter) conditions(name string) map[string]state.DeleteCondition {
	conds := map[string]state.DeleteCondition{}
	for dep, c := range g.st.DeleteGraph[name] {
		if _, again := g.put[dep]; !again && !g.gone[dep] {
			conds[dep] = c
		}
	}
	for _, n := range g.added[name] {
		if !g.gone[n] {
			conds[n] = state.DelCondNotPendingNorRunning
		}
	}
	return conds
}
