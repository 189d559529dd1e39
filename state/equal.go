package state

import (
	"maps"
	"slices"
)

// Equal reports whether w and o are the same workload as the manifest
// sees it: exactly when their ToTree forms are deeply equal (an empty
// restart policy is NEVER, an empty operation is Nothing, a nil map or list
// equals an empty one), without building the trees. The leader compares
// the changed workloads of every update.
func (w *Workload) Equal(o *Workload) bool {
	if w == nil || o == nil {
		return w == o
	}
	return w.Agent == o.Agent && w.Runtime == o.Runtime && w.RuntimeConfig == o.RuntimeConfig &&
		restartPolicy(w.RestartPolicy) == restartPolicy(o.RestartPolicy) &&
		maps.Equal(w.Tags, o.Tags) && maps.Equal(w.Dependencies, o.Dependencies) && maps.Equal(w.Configs, o.Configs) &&
		slices.Equal(w.Files, o.Files) &&
		slices.EqualFunc(w.ControlInterfaceAccess.AllowRules, o.ControlInterfaceAccess.AllowRules, sameRule) &&
		slices.EqualFunc(w.ControlInterfaceAccess.DenyRules, o.ControlInterfaceAccess.DenyRules, sameRule)
}

func restartPolicy(p RestartPolicy) RestartPolicy {
	if p == "" {
		return RestartNever
	}
	return p
}

// sameRule compares two access rules by the fields their kind uses.
func sameRule(a, b AccessRule) bool {
	if a.IsLogRule != b.IsLogRule {
		return false
	}
	if a.IsLogRule {
		return slices.Equal(a.WorkloadNames, b.WorkloadNames)
	}
	op := func(r ReadWrite) ReadWrite {
		if r == "" {
			return RWNothing
		}
		return r
	}
	return op(a.Operation) == op(b.Operation) && slices.Equal(a.FilterMasks, b.FilterMasks)
}
