package cli

import (
	"github.com/grapnel-io/grapnel/state"
)

// Fields that `get state` and `get events` leave out when they are empty,
// as Ankaios' serializer does (skip_serializing_if on the ank_base
// messages): a workload's tags, dependencies, configs, files and
// controlInterfaceAccess (and inside it allowRules and denyRules), a
// state's configs, an agent's tags. Everything else is printed whenever it
// is set, empty or not: apiVersion, workloads, agents, status,
// additionalInfo, a rule's filterMasks and workloadNames, config values.
var (
	omittedWorkloadFields = []string{"tags", "dependencies", "configs", "files"}
	omittedAccessFields   = []string{"allowRules", "denyRules"}
)

// printedState returns a copy of a complete-state tree without the fields
// Ankaios does not print when they are empty. cs is not modified.
func printedState(cs state.Tree) state.Tree {
	if cs == nil {
		return nil
	}
	out, _ := state.CloneValue(cs).(state.Tree)
	for _, root := range []string{"desiredState", "effectiveState"} {
		st := node(out, root)
		if st == nil {
			continue
		}
		dropEmpty(st, "configs")
		for _, w := range node(st, "workloads") {
			wm, ok := w.(map[string]any)
			if !ok {
				continue
			}
			dropEmpty(wm, omittedWorkloadFields...)
			if cia, ok := wm["controlInterfaceAccess"].(map[string]any); ok {
				dropEmpty(cia, omittedAccessFields...)
				if len(cia) == 0 {
					delete(wm, "controlInterfaceAccess")
				}
			}
		}
	}
	for _, a := range node(out, "agents") {
		if am, ok := a.(map[string]any); ok {
			dropEmpty(am, "tags")
		}
	}
	return out
}

// dropEmpty deletes the keys of m whose values are empty maps or lists
// (or nil).
func dropEmpty(m map[string]any, keys ...string) {
	for _, k := range keys {
		v, ok := m[k]
		if ok && isEmpty(v) {
			delete(m, k)
		}
	}
}

func isEmpty(v any) bool {
	switch x := v.(type) {
	case nil:
		return true
	case map[string]any:
		return len(x) == 0
	case []any:
		return len(x) == 0
	case []string:
		return len(x) == 0
	case map[string]string:
		return len(x) == 0
	}
	return false
}
