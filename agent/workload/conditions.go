package workload

import (
	"strings"

	"github.com/grapnel-io/grapnel/state"
)

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

// describe is a state in the CLI's form: Pending(Starting).
func describe(s state.ExecutionState) string {
	if s.SubState == "" {
		return string(s.State)
	}
	return string(s.State) + "(" + s.SubState + ")"
}

// unmetAdd names the dependencies an instance still waits for, with what
// each is now, for Pending(WaitingToStart)'s additional info (issue 31
// point 4): "db: missing", "db: Pending(Starting)". Sorted by name.
func unmetAdd(view state.WorkloadStatesMap, deps map[string]state.AddCondition) string {
	var out []string
	for _, name := range state.SortedKeys(deps) {
		states := statesOf(view, name)
		if len(states) == 0 {
			out = append(out, name+": missing")
			continue
		}
		met := false
		for _, s := range states {
			met = met || addConditionMet(deps[name], s)
		}
		if !met {
			out = append(out, name+": "+describe(states[0]))
		}
	}
	return waitingFor(out)
}

// unmetDelete names the dependents that still hold an instance back, with
// what each is now, for Stopping(WaitingToStop)'s additional info:
// "api: Running(Ok)". Sorted by name.
func unmetDelete(view state.WorkloadStatesMap, conds map[string]state.DeleteCondition) string {
	var out []string
	for _, name := range state.SortedKeys(conds) {
		for _, s := range statesOf(view, name) {
			if !deleteConditionMet(conds[name], s) {
				out = append(out, name+": "+describe(s))
				break
			}
		}
	}
	return waitingFor(out)
}

// waitingFor joins what an instance waits for.
func waitingFor(items []string) string {
	if len(items) == 0 {
		return ""
	}
	return "waiting for " + strings.Join(items, ", ")
}
