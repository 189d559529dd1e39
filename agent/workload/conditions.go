package workload

import "github.com/grapnel-io/grapnel/state"

// addConditionMet says whether one state fulfils an add condition.
//
// swdd~execution-states-of-workload-dependencies-fulfill-add-conditions~1
func addConditionMet(c state.AddCondition, s state.ExecutionState) bool {
	switch c {
	case state.AddCondRunning:
		return s.Is(state.StateRunning, state.SubOk)
	case state.AddCondSucceeded:
		return s.Is(state.StateSucceeded, state.SubOk)
	case state.AddCondFailed:
		return s.Is(state.StateFailed, state.SubExecFailed)
	}
	return false
}

// deleteConditionMet says whether one state of a dependent lets its
// dependency go. A dependent still waiting for its own dependencies has
// not started and holds nothing back.
//
// swdd~execution-states-of-workload-dependencies-fulfill-delete-conditions~1
func deleteConditionMet(c state.DeleteCondition, s state.ExecutionState) bool {
	if s.Is(state.StatePending, state.SubWaitingToStart) {
		return true
	}
	switch c {
	case state.DelCondRunning:
		return s.Is(state.StateRunning, state.SubOk)
	case state.DelCondNotPendingNorRunning:
		return s.IsNotPendingNorRunning()
	}
	return false
}

// statesOf lists the states of every known instance of a workload, on any
// agent.
func statesOf(view state.WorkloadStatesMap, workload string) []state.ExecutionState {
	var out []state.ExecutionState
	for _, wls := range view {
		for _, s := range wls[workload] {
			out = append(out, s)
		}
	}
	return out
}

// addConditionsMet: every dependency has at least one instance in the
// required state.
//
// swdd~workload-ready-to-create-on-fulfilled-dependencies~1
func addConditionsMet(view state.WorkloadStatesMap, deps map[string]state.AddCondition) bool {
	for name, c := range deps {
		ok := false
		for _, s := range statesOf(view, name) {
			if addConditionMet(c, s) {
				ok = true
				break
			}
		}
		if !ok {
			return false
		}
	}
	return true
}

// deleteConditionsMet: every known instance of every dependent is in a
// state that lets the dependency go.
//
// swdd~workload-ready-to-delete-on-fulfilled-dependencies~1
func deleteConditionsMet(view state.WorkloadStatesMap, conds map[string]state.DeleteCondition) bool {
	for name, c := range conds {
		for _, s := range statesOf(view, name) {
			if !deleteConditionMet(c, s) {
				return false
			}
		}
	}
	return true
}

// heldByStopping is the agent's hysteresis: once an instance is being
// stopped, a late poll that still sees it run or end must not undo that.
func heldByStopping(last, next state.ExecutionState) bool {
	if !last.Is(state.StateStopping, state.SubRequestedAtRuntime) && !last.Is(state.StateStopping, state.SubWaitingToStop) {
		return false
	}
	switch next.State {
	case state.StateRunning, state.StateSucceeded, state.StateFailed:
		return true
	}
	return false
}
