package state

import (
	"reflect"
	"testing"
)

func TestConflateKeepsLifeEnds(t *testing.T) {
	var (
		starting = ExecutionState{State: StatePending, SubState: SubStarting}
		running  = ExecutionState{State: StateRunning, SubState: SubOk}
		stopping = ExecutionState{State: StateStopping, SubState: SubStopping}
		removed  = ExecutionState{State: StateRemoved, SubState: string(StateRemoved)}
		failed   = ExecutionState{State: StateFailed, SubState: SubExecFailed}
	)
	for _, tc := range []struct {
		name string
		in   []ExecutionState
		max  int
		want []ExecutionState
	}{
		{"one life keeps the newest", []ExecutionState{starting, running, stopping}, 0, []ExecutionState{stopping}},
		{"a Removed stays ahead of the next life", []ExecutionState{stopping, removed, starting, running}, 0, []ExecutionState{removed, running}},
		{"an exit before a restart stays", []ExecutionState{running, failed, starting}, 0, []ExecutionState{failed, starting}},
		{"every ended life in order", []ExecutionState{removed, failed, removed, running}, 0, []ExecutionState{removed, failed, removed, running}},
		{"past the bound an exit goes before a Removed", []ExecutionState{removed, failed, removed, running}, 3, []ExecutionState{removed, removed, running}},
		{"past the bound the oldest Removed goes", []ExecutionState{removed, removed, removed, running}, 3, []ExecutionState{removed, removed, running}},
		{"the newest is never dropped", []ExecutionState{removed, removed, removed}, 2, []ExecutionState{removed, removed}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := ConflateAll(nil, tc.in, tc.max); !reflect.DeepEqual(got, tc.want) {
				t.Fatalf("got %v, want %v", got, tc.want)
			}
		})
	}
}
