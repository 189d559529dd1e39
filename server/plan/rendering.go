package plan

import (
	"github.com/grapnel-io/grapnel/placement"
	"github.com/grapnel-io/grapnel/state"
	"github.com/grapnel-io/grapnel/state/render"
)

// rendering is what rendering the changed workloads produced: the
// renderings that differ from the stored ones.
type rendering struct {
	put      map[string]state.Rendered // by workload name
	added    []state.Rendered          // in workload name order
	replaced []Deletion                // the stored instances the new renderings replace
	// readded holds the instances rendered again under the same name:
	// their deletion is the agent's, never the server's.
	readded map[state.InstanceName]bool
}

// toRender is, sorted, every workload whose spec changed or that
// references a changed config item.
func toRender(next state.State, d desiredDiff) []string {
	set := map[string]bool{}
	for n := range d.changed.Workloads {
		set[n] = true
	}
	if len(d.changedCfg) > 0 {
		for n, w := range next.Workloads {
			for _, key := range w.Configs {
				if d.changedCfg[key] {
					set[n] = true
					break
				}
			}
		}
	}
	return sortedSet(set)
}

// renderChanged renders the workloads toRender names and keeps those
// whose rendering differs from the store's. What templates render, and
// the work it takes, count against the request's budgets as it goes
// (max_update_bytes, max_render_steps_per_request: render.Budget), so a
// hostile config costs no more than the limits allow and a request over
// a budget stops where it ran out.
//
// A dry-run (c.all) skips the workloads already rejected, goes on past a
// workload that does not render, and stops rendering once a budget is
// spent; stop is set only when a real update meets a rejection.
func renderChanged(c *checks, r *render.Renderer, lim state.Limits, st *state.Store, next state.State, d desiredDiff) (rd *rendering, stop bool) {
	rd = &rendering{put: map[string]state.Rendered{}, readded: map[state.InstanceName]bool{}}
	rendered := 0 // bytes rendered from templates by this update
	budget := render.NewBudget(lim.MaxRenderStepsPerRequest, lim.MaxUpdateBytes)
	for _, n := range toRender(next, d) {
		if c.skipRender(n, next.Workloads[n]) {
			continue
		}
		rw, inst, err := r.WorkloadWithin(n, next.Workloads[n], next.Configs, budget)
		if err == nil {
			err = state.CheckAgentName("desiredState.workloads."+n+".agent", rw.Agent)
		}
		if err == nil && len(next.Workloads[n].Configs) > 0 {
			err = rw.CheckLimits("desiredState.workloads."+n, lim)
		}
		if err != nil {
			if c.failed(err) {
				return nil, true
			}
			if budget.Spent() {
				return rd, false // a dry-run renders no more
			}
			continue
		}
		if len(next.Workloads[n].Configs) > 0 {
			if rendered += rw.Size(); lim.MaxUpdateBytes > 0 && rendered > lim.MaxUpdateBytes {
				if c.failed(state.LimitError("desiredState.workloads."+n, "the size in bytes of what the update renders, up to this workload",
					"max_update_bytes", rendered, lim.MaxUpdateBytes)) {
					return nil, true
				}
				return rd, false // the budget is spent: a dry-run renders no more
			}
		}
		old, had := st.Rendered[n]
		if had && old.Instance == inst && old.Workload.Equal(rw) {
			continue
		}
		if had && old.Instance == inst && onlyPlacementChanged(old.Workload, rw) {
			// A placed workload whose instance count or spread changed
			// (issue 30, found by agent.TestSeams): the allocator lays
			// it out anew once the update is committed, adding or
			// removing instances on agents; the instances that stay are
			// not replaced.
			rd.put[n] = state.Rendered{Instance: inst, Workload: rw}
			continue
		}
		nr := state.Rendered{Instance: inst, Workload: rw}
		rd.put[n] = nr
		rd.added = append(rd.added, nr)
		rd.readded[inst] = true
		if had {
			rd.replaced = append(rd.replaced, Deletion{Instance: old.Instance})
		}
	}
	return rd, false
}

// onlyPlacementChanged reports whether two renderings of a placed
// workload differ only in the placement tags (grapnel.io/instances,
// grapnel.io/spread), which say where instances run, not what runs.
func onlyPlacementChanged(old, nw *state.Workload) bool {
	if !placement.IsPlaced(old) || !placement.IsPlaced(nw) {
		return false
	}
	strip := func(w *state.Workload) *state.Workload {
		c := w.Clone()
		delete(c.Tags, placement.TagInstances)
		delete(c.Tags, placement.TagSpread)
		return c
	}
	return strip(old).Equal(strip(nw))
}
