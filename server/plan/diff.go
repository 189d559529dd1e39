package plan

import (
	"reflect"
	"sort"

	"github.com/grapnel-io/grapnel/state"
)

// desiredDiff is what a new desired state changes in the current one.
type desiredDiff struct {
	// changed holds the workloads and config items added or changed,
	// under the new apiVersion: only they are checked again.
	changed state.State
	// deletedWl and deletedCfg are the workloads and config keys the new
	// state drops, sorted.
	deletedWl, deletedCfg []string
	// changedCfg is every config key added, changed or deleted.
	changedCfg map[string]bool
}

// diffDesired compares the current desired state with the next one.
func diffDesired(cur, next state.State) desiredDiff {
	d := desiredDiff{
		changed:    state.State{APIVersion: next.APIVersion, Workloads: map[string]*state.Workload{}, Configs: map[string]any{}},
		changedCfg: map[string]bool{},
	}
	for name, w := range next.Workloads {
		old, ok := cur.Workloads[name]
		if ok && (old == w || old.Equal(w)) {
			continue
		}
		d.changed.Workloads[name] = w
	}
	for name := range cur.Workloads {
		if _, ok := next.Workloads[name]; !ok {
			d.deletedWl = append(d.deletedWl, name)
		}
	}
	for k, v := range next.Configs {
		if old, ok := cur.Configs[k]; !ok || !reflect.DeepEqual(old, v) {
			d.changed.Configs[k] = v
			d.changedCfg[k] = true
		}
	}
	for k := range cur.Configs {
		if _, ok := next.Configs[k]; !ok {
			d.deletedCfg = append(d.deletedCfg, k)
			d.changedCfg[k] = true
		}
	}
	sort.Strings(d.deletedWl)
	sort.Strings(d.deletedCfg)
	return d
}
