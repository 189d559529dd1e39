package plan

import (
	"encoding/json"
	"fmt"
	"sort"
	"strings"

	"github.com/grapnel-io/grapnel/placement"
	"github.com/grapnel-io/grapnel/rpc/grapnelpb"
	"github.com/grapnel-io/grapnel/state"
)

// Wait conditions of a plan step besides the Ankaios add and delete
// conditions: the old instance of an updated workload goes first.
const CondRemoved = "REMOVED"

// Plan step actions.
const (
	ActionDelete = "delete"
	ActionAdd    = "add"
)

// describePlan fills resp with what a plan does, as a dry-run answers
// it: the workloads added, updated (with the fields that change) and
// deleted, the config items, and per agent the order of its actions. It
// reads st, the store the plan was made on, and changes nothing; what it
// computes beyond the plan is proportional to the workloads the update
// changes, not to the state.
func describePlan(resp *grapnelpb.PlanResponse, st *state.Store, next state.State, pd *planned) {
	d, rd := pd.diff, pd.rd
	resp.Changed = pd.Changed
	resp.ApiVersion = pd.Update.APIVersion
	resp.Workloads = plannedWorkloads(st, next, pd)
	for _, k := range state.SortedKeys(d.changedCfg) {
		change := "changed"
		if _, ok := st.Desired.Configs[k]; !ok {
			change = "added"
		} else if _, ok := next.Configs[k]; !ok {
			change = "deleted"
		}
		resp.Configs = append(resp.Configs, &grapnelpb.ConfigChange{Key: k, Change: change})
	}
	var blocked []string
	resp.Agents, blocked = agentPlans(st, pd)
	resp.Warnings = append(planWarnings(st, next, d, rd), blocked...)
	resp.Warnings = append(resp.Warnings, placementWarnings(st, pd.placed)...)
}

// placementWarnings names what the allocator does once the update is
// made: each placed workload it lays out anew, with the agents it gets
// and loses (an eviction by a pinned workload is one), and each it cannot
// place as asked.
func placementWarnings(st *state.Store, pl *Placed) []string {
	if pl == nil {
		return nil
	}
	var out []string
	for _, c := range placement.Diff(placement.Layout(st.Placement), pl.Update.Layout) {
		if _, changed := pl.Update.Layout[c.Workload]; !changed {
			continue
		}
		msg := fmt.Sprintf("placed workload '%s' is laid out anew after the update:", c.Workload)
		if len(c.Added) > 0 {
			msg += fmt.Sprintf(" onto %s", strings.Join(c.Added, ", "))
		}
		if len(c.Removed) > 0 {
			msg += fmt.Sprintf(" off %s", strings.Join(c.Removed, ", "))
		}
		out = append(out, msg)
	}
	for _, u := range pl.Unsatisfied {
		out = append(out, fmt.Sprintf("placed workload '%s' gets %d of the %d instances it asks for (%s)", u.Workload, u.Placed, u.Wanted, u.Reason))
	}
	return out
}

// plannedWorkloads lists, by name, every workload the update adds,
// changes or deletes in the desired state, and those it renders again
// because a config item they reference changed.
//
// swdd~server-detects-new-workload~1
// swdd~server-detects-deleted-workload~1
// swdd~server-detects-changed-workload~1
func plannedWorkloads(st *state.Store, next state.State, pd *planned) []*grapnelpb.PlannedWorkload {
	d, rd := pd.diff, pd.rd
	names := map[string]bool{}
	for n := range d.changed.Workloads {
		names[n] = true
	}
	for _, n := range d.deletedWl {
		names[n] = true
	}
	for n := range rd.put {
		names[n] = true
	}
	serverRemoves := map[state.InstanceName]bool{}
	for _, del := range pd.Deleted {
		if del.ServerHandled {
			serverRemoves[del.Instance] = true
		}
	}
	var out []*grapnelpb.PlannedWorkload
	for _, n := range sortedSet(names) {
		old, had := st.Desired.Workloads[n]
		oldR, hadR := st.Rendered[n]
		w, keeps := next.Workloads[n]
		nr, rendered := rd.put[n]
		pw := &grapnelpb.PlannedWorkload{Name: n}
		switch {
		case !keeps:
			pw.Change, pw.Agent = "deleted", old.Agent
			if hadR {
				pw.OldInstance = oldR.Instance.String()
				pw.ServerRemoves = serverRemoves[oldR.Instance]
			}
		case !had:
			pw.Change, pw.Agent = "added", w.Agent
			if rendered {
				pw.Instance = nr.Instance.String()
			}
		default:
			pw.Change, pw.Agent = "updated", w.Agent
			if hadR {
				pw.OldInstance = oldR.Instance.String()
				pw.Instance = pw.OldInstance
			}
			if rendered && hadR {
				pw.Instance = nr.Instance.String()
				pw.Fields = fieldChanges(oldR.Workload, nr.Workload)
			} else {
				pw.Fields = fieldChanges(old, w)
			}
			if _, ok := d.changed.Workloads[n]; ok {
				pw.Causes = append(pw.Causes, "spec")
			}
			for _, alias := range state.SortedKeys(w.Configs) {
				if key := w.Configs[alias]; d.changedCfg[key] {
					pw.Causes = append(pw.Causes, fmt.Sprintf("config '%s'", key))
				}
			}
		}
		out = append(out, pw)
	}
	return out
}

// fieldChanges is the field-level difference of two workloads: every
// leaf of their tree views whose value differs, by path, lists compared
// whole. Values are JSON text; an absent one is empty. They hold sealed
// secrets as tokens, which the caller masks (DryRun's mask).
func fieldChanges(old, cur *state.Workload) []*grapnelpb.FieldChange {
	a, b := map[string]string{}, map[string]string{}
	if old != nil {
		flatten("", map[string]any(old.ToTree()), a)
	}
	if cur != nil {
		flatten("", map[string]any(cur.ToTree()), b)
	}
	paths := map[string]bool{}
	for p, v := range a {
		if b[p] != v {
			paths[p] = true
		}
	}
	for p, v := range b {
		if a[p] != v {
			paths[p] = true
		}
	}
	out := make([]*grapnelpb.FieldChange, 0, len(paths))
	for _, p := range sortedSet(paths) {
		out = append(out, &grapnelpb.FieldChange{Path: p, Old: a[p], New: b[p]})
	}
	return out
}

// flatten writes the leaves of a tree into out by dotted path. Empty
// maps and lists are left out, so that an absent field and an empty one
// read the same.
func flatten(prefix string, v any, out map[string]string) {
	switch x := v.(type) {
	case map[string]any:
		for k, e := range x {
			p := k
			if prefix != "" {
				p = prefix + "." + k
			}
			flatten(p, e, out)
		}
	case []any:
		if len(x) > 0 {
			out[prefix] = jsonText(x)
		}
	default:
		out[prefix] = jsonText(x)
	}
}

func jsonText(v any) string {
	b, err := json.Marshal(v)
	if err != nil {
		return fmt.Sprint(v)
	}
	return string(b)
}

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
// updates delete first, then create). A step's wave is one more than
// the latest wave of the steps of this update it waits for, so that
// steps in the same wave run independently of each other.
//
// It also names, as warnings, the deletes held by a workload outside the
// update that is running or pending now: they wait until it stops.
//
// swdd~server-state-stores-delete-condition~1
// swdd~server-state-adds-delete-conditions-to-deleted-workload~1
func agentPlans(st *state.Store, pd *planned) ([]*grapnelpb.AgentPlan, []string) {
	rd := pd.rd
	// By workload name: a placed workload has an instance on each agent
	// of its layout, so one step per agent.
	dels := map[string][]*step{}
	adds := map[string][]*step{}
	var steps []*step
	serverRemoves := map[state.InstanceName]bool{}
	for _, del := range pd.Deleted {
		if del.ServerHandled {
			serverRemoves[del.Instance] = true
			continue
		}
		s := &step{agent: del.Instance.AgentName, wave: -1, pb: &grapnelpb.PlanStep{
			Action: ActionDelete, Workload: del.Instance.WorkloadName, Instance: del.Instance.String()}}
		dels[del.Instance.WorkloadName] = append(dels[del.Instance.WorkloadName], s)
		steps = append(steps, s)
	}
	for _, a := range pd.Added {
		if a.Instance.AgentName == "" {
			continue
		}
		s := &step{agent: a.Instance.AgentName, wl: a.Workload, wave: -1, pb: &grapnelpb.PlanStep{
			Action: ActionAdd, Workload: a.Instance.WorkloadName, Instance: a.Instance.String()}}
		adds[a.Instance.WorkloadName] = append(adds[a.Instance.WorkloadName], s)
		steps = append(steps, s)
	}
	// The layout change after the update: its steps wait for the
	// update's on the same instance (an instance the update adds and the
	// allocator moves at once).
	sameInstance := map[string][]*step{}
	for _, s := range steps {
		sameInstance[s.pb.Instance] = append(sameInstance[s.pb.Instance], s)
	}
	if pl := pd.placed; pl != nil {
		for _, del := range pl.Deleted {
			if del.ServerHandled {
				continue
			}
			s := &step{agent: del.Instance.AgentName, placed: true, wave: -1, pb: &grapnelpb.PlanStep{
				Action: ActionDelete, Workload: del.Instance.WorkloadName, Instance: del.Instance.String()}}
			s.waitFor(sameInstance[s.pb.Instance])
			dels[del.Instance.WorkloadName] = append(dels[del.Instance.WorkloadName], s)
			steps = append(steps, s)
		}
		for _, a := range pl.Added {
			s := &step{agent: a.Instance.AgentName, wl: a.Workload, placed: true, wave: -1, pb: &grapnelpb.PlanStep{
				Action: ActionAdd, Workload: a.Instance.WorkloadName, Instance: a.Instance.String()}}
			s.waitFor(sameInstance[s.pb.Instance])
			adds[a.Instance.WorkloadName] = append(adds[a.Instance.WorkloadName], s)
			steps = append(steps, s)
		}
	}
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
	graph := newGraphAfter(st, rd, goneAfter(st, pd.diff.deletedWl, serverRemoves))
	for _, s := range steps {
		n := s.pb.Workload
		if s.pb.Action == ActionDelete {
			conds := graph.conditions(n)
			for _, dep := range state.SortedKeys(conds) {
				after := s.visible(dels[dep])
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
		for _, old := range dels[n] {
			if old.agent == s.agent && old.placed == s.placed {
				s.pb.WaitFor = append(s.pb.WaitFor, &grapnelpb.Wait{Workload: n, Condition: CondRemoved, InPlan: true, Current: current(n)})
				s.after = append(s.after, old)
			}
		}
		deps := s.wl.Dependencies
		for _, dep := range state.SortedKeys(deps) {
			after := s.visible(adds[dep])
			s.pb.WaitFor = append(s.pb.WaitFor, &grapnelpb.Wait{Workload: dep, Condition: string(deps[dep]), InPlan: len(after) > 0, Current: current(dep)})
			s.waitFor(after)
		}
	}
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
	return out, warnings
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

// planWarnings names what will not make the update fail but may keep a
// workload waiting: a dependency on a workload the desired state does
// not have (swdd~cycle-detection-ignores-non-existing-workloads~1: the
// server accepts it, the agent waits), and an agent not connected.
func planWarnings(st *state.Store, next state.State, d desiredDiff, rd *rendering) []string {
	var out []string
	for _, n := range d.deletedWl {
		for _, dep := range state.SortedKeys(st.DeleteGraph[n]) {
			if _, stays := next.Workloads[dep]; stays {
				if _, changed := d.changed.Workloads[dep]; !changed {
					out = append(out, fmt.Sprintf("workload '%s' depends on '%s', which the update deletes: a new instance of '%s' would wait until '%s' is added again", dep, n, dep, n))
				}
			}
		}
	}
	for _, n := range state.SortedKeys(d.changed.Workloads) {
		w := d.changed.Workloads[n]
		for _, dep := range state.SortedKeys(w.Dependencies) {
			if _, ok := next.Workloads[dep]; !ok {
				out = append(out, fmt.Sprintf("workload '%s' depends on '%s', which is not in the desired state: it waits until '%s' is added", n, dep, dep))
			}
		}
	}
	agents := map[string]bool{}
	for _, r := range rd.put {
		if a := r.Instance.AgentName; a != "" {
			if _, ok := st.Agents[a]; !ok {
				agents[a] = true
			}
		}
	}
	for _, a := range sortedSet(agents) {
		out = append(out, fmt.Sprintf("agent '%s' is not connected: its workloads start when it connects", a))
	}
	return out
}
