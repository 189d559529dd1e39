package state

import "fmt"

// FindCycle looks for a cycle in the dependency graph of the workloads,
// starting only from the given workloads (pass nil to search all). A new
// cycle must pass through a workload whose dependencies changed, so the
// server only searches from those. It stops at the first cycle found and
// returns a workload on it, or "" when there is none. Edges to workloads
// that are not in the map are ignored.
//
// swdd~server-state-rejects-state-with-cyclic-dependencies~1
// swdd~cycle-detection-stops-on-the-first-cycle~1
// swdd~cycle-detection-ignores-non-existing-workloads~1
func FindCycle(workloads map[string]*Workload, from []string) string {
	const (
		unvisited = iota
		onStack
		done
	)
	mark := map[string]int{}
	var visit func(n string) string
	visit = func(n string) string {
		mark[n] = onStack
		w := workloads[n]
		for _, dep := range SortedKeys(w.Dependencies) {
			if _, ok := workloads[dep]; !ok {
				continue
			}
			switch mark[dep] {
			case onStack:
				return dep
			case unvisited:
				if c := visit(dep); c != "" {
					return c
				}
			}
		}
		mark[n] = done
		return ""
	}
	if from == nil {
		from = SortedKeys(workloads)
	}
	for _, n := range from {
		if _, ok := workloads[n]; !ok || mark[n] != unvisited {
			continue
		}
		if c := visit(n); c != "" {
			return c
		}
	}
	return ""
}

// CycleError is the rejection of a state whose dependencies form a cycle.
func CycleError(workload string) error {
	return &FieldError{Path: "desiredState.workloads." + workload + ".dependencies",
		Reason: fmt.Sprintf("workload dependency '%s' is part of a cycle.", workload)}
}
