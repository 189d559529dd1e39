package server

import (
	"fmt"

	"github.com/grapnel-io/grapnel/state"
)

// checkNext checks what is cheap to check on the whole next state: its
// apiVersion and its counts.
func checkNext(lim state.Limits, next state.State) error {
	if _, err := state.CheckAPIVersion(next.APIVersion); err != nil {
		return err
	}
	return next.CheckCounts(lim)
}

// checkChanged checks only what the update adds or changes, and the size
// the desired state will have. The limits first: their walk stops at the
// first one crossed, so a hostile config costs no more than the limits
// allow.
func checkChanged(lim state.Limits, st *state.Store, d desiredDiff) error {
	if err := d.changed.CheckLimits(lim); err != nil {
		return err
	}
	if err := d.changed.Validate(); err != nil {
		return err
	}
	return checkDesiredBytes(lim, st, d.changed, d.deletedWl, d.deletedCfg)
}

// checkCycles looks for a dependency cycle through the changed workloads
// only: the others were checked when they changed.
func checkCycles(next state.State, d desiredDiff) error {
	if len(d.changed.Workloads) == 0 {
		return nil
	}
	if c := state.FindCycle(next.Workloads, state.SortedKeys(d.changed.Workloads)); c != "" {
		return state.CycleError(c)
	}
	return nil
}

// checkDesiredBytes checks the size the desired state will have: the
// store's, less what the update replaces or deletes, plus what it puts.
// Only an update that grows it past the limit is refused.
func checkDesiredBytes(lim state.Limits, st *state.Store, changed state.State, deletedWl, deletedCfg []string) error {
	if lim.MaxDesiredStateBytes <= 0 {
		return nil
	}
	cur := st.Desired
	total := st.DesiredBytes()
	for n, w := range changed.Workloads {
		total += w.Size() - cur.Workloads[n].Size()
	}
	for _, n := range deletedWl {
		total -= cur.Workloads[n].Size()
	}
	for k, v := range changed.Configs {
		total += state.ConfigSize(v)
		if old, ok := cur.Configs[k]; ok {
			total -= state.ConfigSize(old)
		}
	}
	for _, k := range deletedCfg {
		total -= state.ConfigSize(cur.Configs[k])
	}
	// An update that shrinks a state already over the limit (the limit
	// was lowered) goes through: it is the way back under it.
	if total > lim.MaxDesiredStateBytes && total > st.DesiredBytes() {
		return state.LimitError("desiredState", "the size in bytes of the desired state after the update",
			"max_desired_state_bytes", total, lim.MaxDesiredStateBytes)
	}
	return nil
}

// checkAgentBytes checks the size of each agent's rendered workloads
// after the update: an agent's ServerHello carries them all. Only an
// agent whose share grows is checked, so shrinking always works.
func checkAgentBytes(lim state.Limits, st *state.Store, put map[string]state.Rendered, deleted []string) error {
	if lim.MaxAgentBytes <= 0 {
		return nil
	}
	delta := map[string]int{}
	for n, rw := range put {
		delta[rw.Instance.AgentName] += rw.Workload.Size()
		if old, ok := st.Rendered[n]; ok {
			delta[old.Instance.AgentName] -= old.Workload.Size()
		}
	}
	for _, n := range deleted {
		if old, ok := st.Rendered[n]; ok {
			delta[old.Instance.AgentName] -= old.Workload.Size()
		}
	}
	for _, a := range state.SortedKeys(delta) {
		if a == "" || delta[a] <= 0 {
			continue
		}
		if total := st.AgentBytes(a) + delta[a]; total > lim.MaxAgentBytes {
			return state.LimitError("desiredState.workloads", fmt.Sprintf("the size in bytes of the workloads agent '%s' runs after the update", a),
				"max_agent_bytes", total, lim.MaxAgentBytes)
		}
	}
	return nil
}
