package plan

import (
	"fmt"

	"github.com/grapnel-io/grapnel/placement"
	"github.com/grapnel-io/grapnel/state"
)

// The update plan's part of placement (docs/placement.md). A placed
// workload names no agent: its rendering carries an instance without an
// agent, and its instances are that instance on each agent of the layout
// (state.Store.Placement), which the allocator decides after the update
// is committed (server/placement.go). An update that changes a placed
// workload's spec replaces its instances on the agents it runs on now.

// checkPlacement refuses a changed workload whose placement tags are
// bad, naming the tag.
func checkPlacement(c *checks, d desiredDiff) bool {
	for _, n := range state.SortedKeys(d.changed.Workloads) {
		if _, _, err := placement.RequestOf(n, d.changed.Workloads[n]); err != nil {
			if c.failed(fmt.Errorf("%w: %w", state.ErrInvalid, err)) {
				return true
			}
			c.badWl = setAdd(c.badWl, n)
		}
	}
	return false
}

// expandPlaced turns the renderings and deletions of placed workloads,
// which name no agent, into one per agent of the current layout; a placed
// workload not laid out yet has none, and nothing to delete. Pinned and unscheduled ones pass
// unchanged.
func expandPlaced(st *state.Store, rd *rendering, deleted []Deletion) []Deletion {
	var added []state.Rendered
	for _, a := range rd.added {
		if a.Instance.AgentName != "" || !placement.IsPlaced(a.Workload) {
			added = append(added, a)
			continue
		}
		delete(rd.readded, a.Instance)
		for _, in := range a.InstancesIn(st.Placement) {
			added = append(added, a.OnAgent(in.AgentName))
			rd.readded[in] = true
		}
	}
	rd.added = added
	var out []Deletion
	for _, d := range deleted {
		r, ok := st.Rendered[d.Instance.WorkloadName]
		if d.Instance.AgentName != "" || !ok || r.Instance != d.Instance || !placement.IsPlaced(r.Workload) {
			out = append(out, d)
			continue
		}
		for _, in := range r.InstancesIn(st.Placement) {
			out = append(out, Deletion{Instance: in})
		}
	}
	return out
}
