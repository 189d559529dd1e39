package state

import (
	"fmt"
	"sort"
)

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

// Cycles returns every dependency cycle reachable from the given
// workloads (nil: all), each as the sorted names of a strongly connected
// component (Tarjan), the components sorted by their first name. Where
// FindCycle stops at the first cycle, this lists them all, for a
// dry-run that reports every reason an update would be rejected. Edges
// to workloads that are not in the map are ignored.
func Cycles(workloads map[string]*Workload, from []string) [][]string {
	index := map[string]int{}
	low := map[string]int{}
	onStack := map[string]bool{}
	var stack []string
	var out [][]string
	var visit func(n string)
	visit = func(n string) {
		index[n] = len(index)
		low[n] = index[n]
		stack = append(stack, n)
		onStack[n] = true
		selfLoop := false
		for _, dep := range SortedKeys(workloads[n].Dependencies) {
			if _, ok := workloads[dep]; !ok {
				continue
			}
			if dep == n {
				selfLoop = true
			}
			if _, seen := index[dep]; !seen {
				visit(dep)
				low[n] = min(low[n], low[dep])
			} else if onStack[dep] {
				low[n] = min(low[n], index[dep])
			}
		}
		if low[n] != index[n] {
			return
		}
		var comp []string
		for {
			m := stack[len(stack)-1]
			stack = stack[:len(stack)-1]
			onStack[m] = false
			comp = append(comp, m)
			if m == n {
				break
			}
		}
		if len(comp) > 1 || selfLoop {
			sort.Strings(comp)
			out = append(out, comp)
		}
	}
	if from == nil {
		from = SortedKeys(workloads)
	}
	for _, n := range from {
		if _, ok := workloads[n]; !ok {
			continue
		}
		if _, seen := index[n]; !seen {
			visit(n)
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i][0] < out[j][0] })
	return out
}
