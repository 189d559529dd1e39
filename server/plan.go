package server

import (
	"fmt"
	"reflect"
	"sort"

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
}

// plan validates, renders and diffs a new desired state against the
// store. Only workloads whose spec changed, or that reference a changed
// config item, are rendered and compared again; the others keep their
// rendering. The store is only read.
//
// swdd~server-state-triggers-configuration-rendering-of-workloads~1
// swdd~server-state-compares-rendered-workloads~1
// swdd~server-state-triggers-validation-of-workload-fields~1
// swdd~server-desired-state-field-conventions~1
func plan(r *render.Renderer, lim state.Limits, st *state.Store, next state.State, tags map[string]map[string]string, connected func(string) bool) (*updatePlan, error) {
	if _, err := state.CheckAPIVersion(next.APIVersion); err != nil {
		return nil, err
	}
	if err := next.CheckCounts(lim); err != nil {
		return nil, err
	}
	cur := st.Desired
	p := &updatePlan{}
	changed := state.State{APIVersion: next.APIVersion, Workloads: map[string]*state.Workload{}, Configs: map[string]any{}}
	var deletedWl []string
	for name, w := range next.Workloads {
		old, ok := cur.Workloads[name]
		if ok && (old == w || old.Equal(w)) {
			continue
		}
		changed.Workloads[name] = w
	}
	for name := range cur.Workloads {
		if _, ok := next.Workloads[name]; !ok {
			deletedWl = append(deletedWl, name)
		}
	}
	changedCfg := map[string]bool{}
	var deletedCfg []string
	for k, v := range next.Configs {
		if old, ok := cur.Configs[k]; !ok || !reflect.DeepEqual(old, v) {
			changed.Configs[k] = v
			changedCfg[k] = true
		}
	}
	for k := range cur.Configs {
		if _, ok := next.Configs[k]; !ok {
			deletedCfg = append(deletedCfg, k)
			changedCfg[k] = true
		}
	}
	// The limits first: their walk stops at the first one crossed, so a
	// hostile config costs no more than the limits allow.
	if err := changed.CheckLimits(lim); err != nil {
		return nil, err
	}
	if err := changed.Validate(); err != nil {
		return nil, err
	}
	if err := checkDesiredBytes(lim, st, changed, deletedWl, deletedCfg); err != nil {
		return nil, err
	}

	toRender := map[string]bool{}
	for n := range changed.Workloads {
		toRender[n] = true
	}
	if len(changedCfg) > 0 {
		for n, w := range next.Workloads {
			for _, key := range w.Configs {
				if changedCfg[key] {
					toRender[n] = true
					break
				}
			}
		}
	}
	putRendered := map[string]state.Rendered{}
	readded := map[state.InstanceName]bool{}
	rendered := 0 // bytes rendered from templates by this update
	for _, n := range sortedSet(toRender) {
		rw, inst, err := r.Workload(n, next.Workloads[n], next.Configs)
		if err != nil {
			return nil, err
		}
		if err := state.CheckAgentName("desiredState.workloads."+n+".agent", rw.Agent); err != nil {
			return nil, err
		}
		if len(next.Workloads[n].Configs) > 0 {
			if err := rw.CheckLimits("desiredState.workloads."+n, lim); err != nil {
				return nil, err
			}
			if rendered += rw.Size(); lim.MaxUpdateBytes > 0 && rendered > lim.MaxUpdateBytes {
				return nil, state.LimitError("desiredState.workloads."+n, "the size in bytes of what the update renders, up to this workload",
					"max_update_bytes", rendered, lim.MaxUpdateBytes)
			}
		}
		old, had := st.Rendered[n]
		if had && old.Instance == inst && old.Workload.Equal(rw) {
			continue
		}
		nr := state.Rendered{Instance: inst, Workload: rw}
		putRendered[n] = nr
		p.added = append(p.added, nr)
		readded[inst] = true
		if had {
			p.deleted = append(p.deleted, deletion{instance: old.Instance})
		}
	}
	sort.Strings(deletedWl)
	for _, n := range deletedWl {
		if old, had := st.Rendered[n]; had {
			p.deleted = append(p.deleted, deletion{instance: old.Instance})
		}
	}
	if err := checkAgentBytes(lim, st, putRendered, deletedWl); err != nil {
		return nil, err
	}
	if len(changed.Workloads) > 0 {
		if c := state.FindCycle(next.Workloads, state.SortedKeys(changed.Workloads)); c != "" {
			return nil, state.CycleError(c)
		}
	}

	u := &p.update
	if next.APIVersion != cur.APIVersion {
		u.APIVersion = next.APIVersion
	}
	if len(changed.Workloads) > 0 {
		u.PutWorkloads = changed.Workloads
	}
	u.DeleteWorkloads = deletedWl
	u.DeleteRendered = deletedWl
	if len(changed.Configs) > 0 {
		u.PutConfigs = changed.Configs
	}
	sort.Strings(deletedCfg)
	u.DeleteConfigs = deletedCfg
	if len(putRendered) > 0 {
		u.PutRendered = putRendered
	}
	for _, a := range p.added {
		initial := state.PendingInitial
		if a.Instance.AgentName == "" {
			initial = state.NotScheduled
		}
		u.SetStates = append(u.SetStates, state.WorkloadState{Instance: a.Instance, State: initial})
	}
	// swdd~server-handles-not-started-deleted-workloads~1
	for i, d := range p.deleted {
		if readded[d.instance] {
			continue
		}
		agent := d.instance.AgentName
		s, _ := st.States.Get(d.instance)
		if agent == "" || (s.IsPendingInitial() && (connected == nil || !connected(agent))) {
			p.deleted[i].serverHandled = true
			u.DeleteStates = append(u.DeleteStates, d.instance)
		}
	}
	for agent, t := range tags {
		a, ok := st.Agents[agent]
		if !ok || reflect.DeepEqual(normTags(a.Tags), normTags(t)) {
			continue
		}
		if u.AgentTags == nil {
			u.AgentTags = map[string]map[string]string{}
		}
		u.AgentTags[agent] = t
	}
	p.changedWl = append(state.SortedKeys(changed.Workloads), deletedWl...)
	sort.Strings(p.changedWl)
	p.changedCf = state.SortedKeys(changedCfg)
	p.changed = u.APIVersion != "" || len(p.changedWl) > 0 || len(p.changedCf) > 0 ||
		len(u.AgentTags) > 0 || len(putRendered) > 0
	return p, nil
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
