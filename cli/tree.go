package cli

import (
	"strconv"

	"github.com/grapnel-io/grapnel/state"
)

// node walks nested maps of a Tree; a missing or non-map step gives nil.
func node(v any, keys ...string) map[string]any {
	for _, k := range keys {
		m, ok := v.(map[string]any)
		if !ok {
			return nil
		}
		v = m[k]
	}
	m, _ := v.(map[string]any)
	return m
}

// str reads a string field; anything else reads as "".
func str(m map[string]any, key string) string {
	s, _ := m[key].(string)
	return s
}

// num reads an integer field whatever integer type the tree holds.
func num(m map[string]any, key string) (uint64, bool) {
	switch x := m[key].(type) {
	case int64:
		if x >= 0 {
			return uint64(x), true
		}
	case int:
		if x >= 0 {
			return uint64(x), true
		}
	case uint64:
		return x, true
	case uint32:
		return uint64(x), true
	case float64:
		if x >= 0 {
			return uint64(x), true
		}
	case string:
		if n, err := strconv.ParseUint(x, 10, 64); err == nil {
			return n, true
		}
	}
	return 0, false
}

// execState reads {state, subState, additionalInfo}.
func execState(m map[string]any) state.ExecutionState {
	return state.ExecutionState{
		State:          state.ExecState(str(m, "state")),
		SubState:       str(m, "subState"),
		AdditionalInfo: str(m, "additionalInfo"),
	}
}

// workloadStates lists the instance states of a complete-state tree,
// sorted by agent, workload and id.
func workloadStates(cs state.Tree) []state.WorkloadState {
	m := state.WorkloadStatesMap{}
	for agent, wls := range node(cs, "workloadStates") {
		for wl, ids := range node(wls) {
			for id, e := range node(ids) {
				m.Set(state.InstanceName{WorkloadName: wl, AgentName: agent, ID: id}, execState(node(e)))
			}
		}
	}
	return m.All()
}

// connectedAgents lists the agents of a complete-state tree.
func connectedAgents(cs state.Tree) []string {
	return state.SortedKeys(node(cs, "agents"))
}
