package state

import "sort"

// Tree is the YAML/JSON view of (part of) a CompleteState: maps are
// map[string]any, sequences []any, scalars string, bool or int64. Field
// masks are paths through a Tree.
type Tree = map[string]any

// ToTree converts the complete state to its Tree view.
func (c *CompleteState) ToTree() Tree {
	return Tree{
		"desiredState":   c.DesiredState.ToTree(),
		"workloadStates": c.WorkloadStates.ToTree(),
		"agents":         c.Agents.ToTree(),
	}
}

// ToTree converts the desired state to its Tree view.
func (s State) ToTree() Tree {
	wls := make(map[string]any, len(s.Workloads))
	for name, w := range s.Workloads {
		wls[name] = w.ToTree()
	}
	cfgs := make(map[string]any, len(s.Configs))
	for k, v := range s.Configs {
		cfgs[k] = CloneValue(v)
	}
	return Tree{"apiVersion": s.APIVersion, "workloads": wls, "configs": cfgs}
}

// ToTree converts a workload to its Tree view; every field is present.
func (w *Workload) ToTree() Tree {
	deps := make(map[string]any, len(w.Dependencies))
	for k, v := range w.Dependencies {
		deps[k] = string(v)
	}
	files := make([]any, 0, len(w.Files))
	for _, f := range w.Files {
		key := "data"
		if f.Binary {
			key = "binaryData"
		}
		files = append(files, map[string]any{"mountPoint": f.MountPoint, key: f.Content})
	}
	rp := w.RestartPolicy
	if rp == "" {
		rp = RestartNever
	}
	return Tree{
		"agent":                  w.Agent,
		"tags":                   stringMapTree(w.Tags),
		"dependencies":           deps,
		"restartPolicy":          string(rp),
		"runtime":                w.Runtime,
		"runtimeConfig":          w.RuntimeConfig,
		"configs":                stringMapTree(w.Configs),
		"files":                  files,
		"controlInterfaceAccess": w.ControlInterfaceAccess.ToTree(),
	}
}

// ToTree converts access rules to their manifest form.
func (a ControlInterfaceAccess) ToTree() Tree {
	return Tree{"allowRules": rulesTree(a.AllowRules), "denyRules": rulesTree(a.DenyRules)}
}

func rulesTree(rs []AccessRule) []any {
	out := make([]any, 0, len(rs))
	for _, r := range rs {
		if r.IsLogRule {
			out = append(out, map[string]any{"type": "LogRule", "workloadNames": stringsTree(r.WorkloadNames)})
			continue
		}
		op := r.Operation
		if op == "" {
			op = RWNothing
		}
		out = append(out, map[string]any{"type": "StateRule", "operation": string(op), "filterMasks": stringsTree(r.FilterMasks)})
	}
	return out
}

// ToTree converts an execution state to {state, subState, additionalInfo}.
func (e ExecutionState) ToTree() Tree {
	return Tree{"state": string(e.State), "subState": e.SubState, "additionalInfo": e.AdditionalInfo}
}

// ToTree converts the workload states to agent → workload → id → state.
func (m WorkloadStatesMap) ToTree() Tree {
	out := make(Tree, len(m))
	for agent, wls := range m {
		tw := make(map[string]any, len(wls))
		for wl, ids := range wls {
			ti := make(map[string]any, len(ids))
			for id, s := range ids {
				ti[id] = s.ToTree()
			}
			tw[wl] = ti
		}
		out[agent] = tw
	}
	return out
}

// ToTree converts the agent map.
func (m AgentMap) ToTree() Tree {
	out := make(Tree, len(m))
	for name, a := range m {
		status := map[string]any{}
		if a.Status.CPUUsage != nil {
			status["cpuUsage"] = int64(*a.Status.CPUUsage)
		}
		if a.Status.FreeMemory != nil {
			status["freeMemory"] = int64(*a.Status.FreeMemory)
		}
		out[name] = map[string]any{"status": status, "tags": stringMapTree(a.Tags)}
	}
	return out
}

func stringMapTree(m map[string]string) map[string]any {
	out := make(map[string]any, len(m))
	for k, v := range m {
		out[k] = v
	}
	return out
}

func stringsTree(s []string) []any {
	out := make([]any, len(s))
	for i, v := range s {
		out[i] = v
	}
	return out
}

// CloneValue deep-copies a tree value.
func CloneValue(v any) any {
	switch x := v.(type) {
	case map[string]any:
		out := make(map[string]any, len(x))
		for k, e := range x {
			out[k] = CloneValue(e)
		}
		return out
	case []any:
		out := make([]any, len(x))
		for i, e := range x {
			out[i] = CloneValue(e)
		}
		return out
	default:
		return v
	}
}

// SortedKeys returns the keys of m in order, for deterministic iteration.
func SortedKeys[V any](m map[string]V) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}

func sortStates(s []WorkloadState) {
	sort.Slice(s, func(i, j int) bool {
		a, b := s[i].Instance, s[j].Instance
		if a.AgentName != b.AgentName {
			return a.AgentName < b.AgentName
		}
		if a.WorkloadName != b.WorkloadName {
			return a.WorkloadName < b.WorkloadName
		}
		return a.ID < b.ID
	})
}
