package server

import (
	"sort"

	"github.com/grapnel-io/grapnel/fsm"

	"github.com/grapnel-io/grapnel/server/render"
	"github.com/grapnel-io/grapnel/state"
)

// deletion is an instance to delete, with the delete conditions its
// dependents impose and whether the server deletes it itself.
type deletion struct {
	instance      state.InstanceName
	serverHandled bool
}

// updatePlan is what an accepted UpdateState does: the command to propose
// and what to tell agents once it is committed.
type updatePlan struct {
	update    state.DesiredUpdate
	added     []state.Rendered
	deleted   []deletion
	changedWl []string // workloads added, changed or deleted in the desired state
	changedCf []string // config keys added, changed or deleted
	changed   bool
	// history is the leader's part of the transaction (history.go), set
	// by the caller after planning: the plan is a function of the store
	// and the request only.
	history *fsm.HistoryMeta
}

// plan validates, renders and diffs a new desired state against the
// store. Only workloads whose spec changed, or that reference a changed
// config item, are rendered and compared again; the others keep their
// rendering. The store is only read. Each step is a function of its own
// file: diff (plan_diff.go), checks (plan_validate.go), render
// (plan_render.go), the workload policy (admission.go), server-side
// deletes (plan_deletes.go) and the command (plan_command.go); the
// checks run in this order, so the first error an update meets is
// always the same one.
//
// swdd~server-state-triggers-configuration-rendering-of-workloads~1
// swdd~server-state-compares-rendered-workloads~1
// swdd~server-state-triggers-validation-of-workload-fields~1
// swdd~server-desired-state-field-conventions~1
func plan(r *render.Renderer, lim state.Limits, adm admission, st *state.Store, next state.State, tags map[string]map[string]string, connected func(string) bool) (*updatePlan, error) {
	c := &checks{}
	pd := planSteps(c, r, lim, adm, st, next, tags, connected)
	if err := c.first(); err != nil {
		return nil, err
	}
	return pd.updatePlan, nil
}

// planned is a plan with what its steps found on the way, which a dry-run
// describes.
type planned struct {
	*updatePlan
	diff desiredDiff
	rd   *rendering
}

// planSteps runs the steps of plan. With c.all (a dry-run) no check stops
// it: it goes on past every rejection, which c collects, and plans what
// it can; otherwise it stops at the first and returns nil.
func planSteps(c *checks, r *render.Renderer, lim state.Limits, adm admission, st *state.Store, next state.State, tags map[string]map[string]string, connected func(string) bool) *planned {
	if checkNext(c, lim, next) {
		return nil
	}
	d := diffDesired(st.Desired, next)
	if checkChanged(c, lim, st, d) {
		return nil
	}
	if checkPlacement(c, d) {
		return nil
	}
	rd, stop := renderChanged(c, r, lim, st, next, d)
	if stop {
		return nil
	}
	if checkAdmission(c, adm, st, rd) {
		return nil
	}
	deleted := expandPlaced(st, rd, deletions(st, rd.replaced, d.deletedWl))
	if checkAgentBytes(c, lim, st, rd.put, d.deletedWl) {
		return nil
	}
	if checkCycles(c, next, d) {
		return nil
	}

	p := &updatePlan{added: rd.added, deleted: deleted}
	p.update = desiredUpdate(st.Desired, next, d, rd)
	p.update.DeleteStates = serverDeletes(st, p.deleted, rd.readded, connected)
	p.update.AgentTags = tagChanges(st, tags)
	p.changedWl = append(state.SortedKeys(d.changed.Workloads), d.deletedWl...)
	sort.Strings(p.changedWl)
	p.changedCf = state.SortedKeys(d.changedCfg)
	u := &p.update
	p.changed = u.APIVersion != "" || len(p.changedWl) > 0 || len(p.changedCf) > 0 ||
		len(u.AgentTags) > 0 || len(rd.put) > 0
	return &planned{updatePlan: p, diff: d, rd: rd}
}

func normTags(t map[string]string) map[string]string {
	if t == nil {
		return map[string]string{}
	}
	return t
}

func sortedSet(m map[string]bool) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}
