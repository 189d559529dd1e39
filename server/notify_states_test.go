package server

import (
	"reflect"
	"testing"

	"github.com/grapnel-io/grapnel/state"
)

// Committed states become events as Ankaios reports them; an instance
// removed and started again gets one event per life, the second listing it
// as added.
func TestStateEvents(t *testing.T) {
	a := state.NewInstanceName("a", "agent_A", "1")
	b := state.NewInstanceName("b", "agent_A", "1")
	starting := state.ExecutionState{State: state.StatePending, SubState: state.SubStarting}
	stopping := state.ExecutionState{State: state.StateStopping, SubState: state.SubStopping}
	pa, pb := statePath(a), statePath(b)
	type ev struct{ added, updated, removed []string }
	for _, tc := range []struct {
		name  string
		all   []state.WorkloadState
		fresh []state.InstanceName
		want  []ev
	}{
		// swdd~server-sends-event-for-updated-workload-states~1
		{"update of a known instance", []state.WorkloadState{{Instance: a, State: state.RunningOk}}, nil,
			[]ev{{updated: []string{pa}}}},
		{"first state of an instance is added", []state.WorkloadState{{Instance: a, State: starting}, {Instance: b, State: state.RunningOk}}, []state.InstanceName{a},
			[]ev{{added: []string{pa}, updated: []string{pb}}}},
		// swdd~server-sends-event-for-removed-workload-states~1
		{"removed", []state.WorkloadState{{Instance: a, State: state.Removed}}, nil,
			[]ev{{removed: []string{pa}}}},
		{"removed then started again", []state.WorkloadState{{Instance: a, State: stopping}, {Instance: b, State: state.RunningOk},
			{Instance: a, State: state.Removed}, {Instance: a, State: starting}}, nil,
			[]ev{{updated: []string{pa, pb}}, {removed: []string{pa}}, {added: []string{pa}}}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var got []ev
			n := 0
			for _, e := range stateEvents(tc.all, tc.fresh) {
				got = append(got, ev{e.diff.Added, e.diff.Updated, e.diff.Removed})
				n += len(e.states)
			}
			if !reflect.DeepEqual(got, tc.want) || n != len(tc.all) {
				t.Fatalf("got %+v (%d states), want %+v", got, n, tc.want)
			}
		})
	}
}
