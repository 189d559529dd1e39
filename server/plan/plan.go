package plan

import (
	"sort"

	"github.com/grapnel-io/grapnel/fsm"

	"github.com/grapnel-io/grapnel/state"
	"github.com/grapnel-io/grapnel/state/render"
)

// Deletion is an instance to delete, and whether the server deletes it
// itself (no agent would report its removal).
type Deletion struct {
	Instance      state.InstanceName
	ServerHandled bool
}

// Plan is what an accepted UpdateState does: the command to propose
// and what to tell agents once it is committed.
type Plan struct {
	Update           state.DesiredUpdate
	Added            []state.Rendered
	Deleted          []Deletion
	ChangedWorkloads []string // workloads added, changed or deleted in the desired state
	ChangedConfigs   []string // config keys added, changed or deleted
	Changed          bool
	// History is the leader's part of the transaction, set by the caller
	// after planning: the plan is a function of the store and the
	// request only.
	History *fsm.HistoryMeta
}

// Make validates, renders and diffs a new desired state against the
// store. Only workloads whose spec changed, or that reference a changed
// config item, are rendered and compared again; the others keep their
// rendering. The store is only read. Each step is a function of its own
// file: diff (diff.go), checks (validate.go), render (rendering.go),
// the workload policy (admission.go), server-side deletes (deletes.go)
// and the command (command.go); the
// checks run in this order, so the first error an update meets is
// always the same one.
//
// swdd~server-state-triggers-configuration-rendering-of-workloads~1
// swdd~server-state-compares-rendered-workloads~1
// swdd~server-state-triggers-validation-of-workload-fields~1
// swdd~server-desired-state-field-conventions~1
func Make(r *render.Renderer, lim state.Limits, adm Admission, st *state.Store, next state.State, tags map[string]map[string]string, connected func(string) bool) (*Plan, error) {
	c := &checks{}
	pd := planSteps(c, r, lim, adm, st, next, tags, connected)
	if err := c.first(); err != nil {
		return nil, err
	}
	return pd.Plan, nil
}

// planned is a plan with what its steps found on the way, which a dry-run
// describes.
type planned struct {
	*Plan
	diff desiredDiff
	rd   *rendering
	// placed is the layout change the allocator asks for once the update
	// is made; nil when the update places nothing (a dry-run computes it,
	// the leader runs the allocator itself).
	placed *Placed
}

// planSteps runs the steps of Make. With c.all (a dry-run) no check stops
// it: it goes on past every rejection, which c collects, and plans what
// it can; otherwise it stops at the first and returns nil.
func planSteps(c *checks, r *render.Renderer, lim state.Limits, adm Admission, st *state.Store, next state.State, tags map[string]map[string]string, connected func(string) bool) *planned {
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

	p := &Plan{Added: rd.added, Deleted: deleted}
	p.Update = desiredUpdate(st.Desired, next, d, rd)
	p.Update.DeleteStates = serverDeletes(st, p.Deleted, rd.readded, connected)
	p.Update.AgentTags = tagChanges(st, tags)
	p.ChangedWorkloads = append(state.SortedKeys(d.changed.Workloads), d.deletedWl...)
	sort.Strings(p.ChangedWorkloads)
	p.ChangedConfigs = state.SortedKeys(d.changedCfg)
	u := &p.Update
	p.Changed = u.APIVersion != "" || len(p.ChangedWorkloads) > 0 || len(p.ChangedConfigs) > 0 ||
		len(u.AgentTags) > 0 || len(rd.put) > 0
	return &planned{Plan: p, diff: d, rd: rd}
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
