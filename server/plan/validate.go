package plan

import (
	"fmt"
	"slices"

	"github.com/grapnel-io/grapnel/state"
)

// checks collects the reasons an update is rejected. A real update stops
// at the first, so that the error it answers is always the same one; a
// dry-run (all) goes on and lists every reason, each item's first.
type checks struct {
	all  bool
	errs []error
	// badWl and badCfg are the workloads and config items a dry-run found
	// invalid before rendering: they are not rendered, as a real update
	// would not have got that far with them.
	badWl, badCfg map[string]bool
}

// failed records err, if any, and reports whether planning stops there.
func (c *checks) failed(err error) bool {
	if err == nil {
		return false
	}
	c.errs = append(c.errs, err)
	return !c.all
}

// first is the first reason recorded, nil if none.
func (c *checks) first() error {
	if len(c.errs) == 0 {
		return nil
	}
	return c.errs[0]
}

// eachItem runs check on s. A dry-run runs it on each workload and
// config item of s alone, in the order check meets them on the whole
// (workloads, then config items, by name), so that its first rejection
// is the real update's and every item's problem is listed; the items
// rejected are marked bad.
func (c *checks) eachItem(s state.State, check func(state.State) error) bool {
	if !c.all {
		return c.failed(check(s))
	}
	for _, n := range state.SortedKeys(s.Workloads) {
		if err := check(state.State{APIVersion: s.APIVersion, Workloads: map[string]*state.Workload{n: s.Workloads[n]}}); err != nil {
			c.failed(err)
			c.badWl = setAdd(c.badWl, n)
		}
	}
	for _, k := range state.SortedKeys(s.Configs) {
		if err := check(state.State{APIVersion: s.APIVersion, Configs: map[string]any{k: s.Configs[k]}}); err != nil {
			c.failed(err)
			c.badCfg = setAdd(c.badCfg, k)
		}
	}
	return false
}

// skipRender reports whether a dry-run leaves a workload unrendered: it,
// or a config item it references, was rejected already.
func (c *checks) skipRender(name string, w *state.Workload) bool {
	if c.badWl[name] {
		return true
	}
	for _, key := range w.Configs {
		if c.badCfg[key] {
			return true
		}
	}
	return false
}

func setAdd(m map[string]bool, k string) map[string]bool {
	if m == nil {
		m = map[string]bool{}
	}
	m[k] = true
	return m
}

// checkNext checks what is cheap to check on the whole next state: its
// apiVersion and its counts.
func checkNext(c *checks, lim state.Limits, next state.State) bool {
	if _, err := state.CheckAPIVersion(next.APIVersion); c.failed(err) {
		return true
	}
	if !c.all {
		return c.failed(next.CheckCounts(lim))
	}
	c.failed(state.State{Workloads: next.Workloads}.CheckCounts(lim))
	c.failed(state.State{Configs: next.Configs}.CheckCounts(lim))
	return false
}

// checkChanged checks only what the update adds or changes, and the size
// the desired state will have. The limits first: their walk stops at the
// first one crossed, so a hostile config costs no more than the limits
// allow.
func checkChanged(c *checks, lim state.Limits, st *state.Store, d desiredDiff) bool {
	if c.eachItem(d.changed, func(s state.State) error { return s.CheckLimits(lim) }) {
		return true
	}
	if c.eachItem(d.changed, state.State.Validate) {
		return true
	}
	return c.failed(checkDesiredBytes(lim, st, d.changed, d.deletedWl, d.deletedCfg))
}

// checkCycles looks for a dependency cycle through the changed workloads
// only: the others were checked when they changed. A dry-run lists every
// cycle, the one a real update names first.
//
// swdd~server-state-rejects-state-with-cyclic-dependencies~1
func checkCycles(c *checks, next state.State, d desiredDiff) bool {
	if len(d.changed.Workloads) == 0 {
		return false
	}
	from := state.SortedKeys(d.changed.Workloads)
	first := state.FindCycle(next.Workloads, from)
	if first == "" {
		return false
	}
	if c.failed(state.CycleError(first)) {
		return true
	}
	for _, comp := range state.Cycles(next.Workloads, from) {
		if !slices.Contains(comp, first) {
			c.failed(state.CycleError(comp[0]))
		}
	}
	return false
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
func checkAgentBytes(c *checks, lim state.Limits, st *state.Store, put map[string]state.Rendered, deleted []string) bool {
	if lim.MaxAgentBytes <= 0 {
		return false
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
			err := state.LimitError("desiredState.workloads", fmt.Sprintf("the size in bytes of the workloads agent '%s' runs after the update", a),
				"max_agent_bytes", total, lim.MaxAgentBytes)
			if c.failed(err) {
				return true
			}
		}
	}
	return false
}
