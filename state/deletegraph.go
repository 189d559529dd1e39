package state

// DeleteGraph records, for each workload, the workloads that depend on it
// with ADD_COND_RUNNING and the condition they impose on its deletion:
// graph[dependency][dependent] = condition. An agent deleting the
// dependency waits until every dependent meets its condition.
type DeleteGraph map[string]map[string]DeleteCondition

// Insert adds the delete conditions a new workload imposes on its
// dependencies. Only ADD_COND_RUNNING needs one: a dependent waiting for
// SUCCEEDED or FAILED has already seen its dependency finish.
//
// swdd~server-state-stores-delete-condition~1
func (g DeleteGraph) Insert(name string, w *Workload) {
	for dep, cond := range w.Dependencies {
		if cond != AddCondRunning {
			continue
		}
		m := g[dep]
		if m == nil {
			m = map[string]DeleteCondition{}
			g[dep] = m
		}
		m[name] = DelCondNotPendingNorRunning
	}
}

// ConditionsFor returns the delete conditions to attach to the
// DeletedWorkload message of a workload (a copy; nil when there are none).
//
// swdd~server-state-adds-delete-conditions-to-deleted-workload~1
func (g DeleteGraph) ConditionsFor(name string) map[string]DeleteCondition {
	return cloneMap(g[name])
}

// RemoveWorkload drops every entry of a workload that is gone: as a
// dependency and as a dependent.
//
// swdd~server-removes-obsolete-delete-graph-entires~1
func (g DeleteGraph) RemoveWorkload(name string) {
	delete(g, name)
	for dep, m := range g {
		delete(m, name)
		if len(m) == 0 {
			delete(g, dep)
		}
	}
}

// RemoveDependent drops the conditions a workload imposed as a dependent,
// before its new spec inserts its current ones.
func (g DeleteGraph) RemoveDependent(name string) {
	for dep, m := range g {
		delete(m, name)
		if len(m) == 0 {
			delete(g, dep)
		}
	}
}

// Clone returns a deep copy.
func (g DeleteGraph) Clone() DeleteGraph {
	out := make(DeleteGraph, len(g))
	for k, v := range g {
		out[k] = cloneMap(v)
	}
	return out
}
