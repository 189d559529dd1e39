package rpc

import (
	"reflect"
	"testing"

	"google.golang.org/protobuf/proto"

	"github.com/grapnel-io/grapnel/rpc/ankbase"
	"github.com/grapnel-io/grapnel/state"
)

// Every execution state and substate maps to its wire enum and back, in
// the typed path and in the Tree path.
func TestExecutionStateTable(t *testing.T) {
	es := func(p *ankbase.ExecutionState) *ankbase.ExecutionState {
		info := "info"
		p.AdditionalInfo = &info
		return p
	}
	tests := []struct {
		st   state.ExecState
		sub  string
		wire *ankbase.ExecutionState
	}{
		{state.StateAgentDisconnected, "AgentDisconnected", es(&ankbase.ExecutionState{ExecutionStateEnum: &ankbase.ExecutionState_AgentDisconnected{AgentDisconnected: ankbase.AgentDisconnected_AGENT_DISCONNECTED}})},
		{state.StatePending, state.SubInitial, es(&ankbase.ExecutionState{ExecutionStateEnum: &ankbase.ExecutionState_Pending{Pending: ankbase.Pending_PENDING_INITIAL}})},
		{state.StatePending, state.SubWaitingToStart, es(&ankbase.ExecutionState{ExecutionStateEnum: &ankbase.ExecutionState_Pending{Pending: ankbase.Pending_PENDING_WAITING_TO_START}})},
		{state.StatePending, state.SubStarting, es(&ankbase.ExecutionState{ExecutionStateEnum: &ankbase.ExecutionState_Pending{Pending: ankbase.Pending_PENDING_STARTING}})},
		{state.StatePending, state.SubStartingFailed, es(&ankbase.ExecutionState{ExecutionStateEnum: &ankbase.ExecutionState_Pending{Pending: ankbase.Pending_PENDING_STARTING_FAILED}})},
		{state.StateRunning, state.SubOk, es(&ankbase.ExecutionState{ExecutionStateEnum: &ankbase.ExecutionState_Running{Running: ankbase.Running_RUNNING_OK}})},
		{state.StateStopping, state.SubStopping, es(&ankbase.ExecutionState{ExecutionStateEnum: &ankbase.ExecutionState_Stopping{Stopping: ankbase.Stopping_STOPPING}})},
		{state.StateStopping, state.SubWaitingToStop, es(&ankbase.ExecutionState{ExecutionStateEnum: &ankbase.ExecutionState_Stopping{Stopping: ankbase.Stopping_STOPPING_WAITING_TO_STOP}})},
		{state.StateStopping, state.SubRequestedAtRuntime, es(&ankbase.ExecutionState{ExecutionStateEnum: &ankbase.ExecutionState_Stopping{Stopping: ankbase.Stopping_STOPPING_REQUESTED_AT_RUNTIME}})},
		{state.StateStopping, state.SubDeleteFailed, es(&ankbase.ExecutionState{ExecutionStateEnum: &ankbase.ExecutionState_Stopping{Stopping: ankbase.Stopping_STOPPING_DELETE_FAILED}})},
		{state.StateSucceeded, state.SubOk, es(&ankbase.ExecutionState{ExecutionStateEnum: &ankbase.ExecutionState_Succeeded{Succeeded: ankbase.Succeeded_SUCCEEDED_OK}})},
		{state.StateFailed, state.SubExecFailed, es(&ankbase.ExecutionState{ExecutionStateEnum: &ankbase.ExecutionState_Failed{Failed: ankbase.Failed_FAILED_EXEC_FAILED}})},
		{state.StateFailed, state.SubUnknown, es(&ankbase.ExecutionState{ExecutionStateEnum: &ankbase.ExecutionState_Failed{Failed: ankbase.Failed_FAILED_UNKNOWN}})},
		{state.StateFailed, state.SubLost, es(&ankbase.ExecutionState{ExecutionStateEnum: &ankbase.ExecutionState_Failed{Failed: ankbase.Failed_FAILED_LOST}})},
		{state.StateNotScheduled, "NotScheduled", es(&ankbase.ExecutionState{ExecutionStateEnum: &ankbase.ExecutionState_NotScheduled{NotScheduled: ankbase.NotScheduled_NOT_SCHEDULED}})},
		{state.StateRemoved, "Removed", es(&ankbase.ExecutionState{ExecutionStateEnum: &ankbase.ExecutionState_Removed{Removed: ankbase.Removed_REMOVED}})},
	}
	covered := 0
	for _, tc := range tests {
		m := state.ExecutionState{State: tc.st, SubState: tc.sub, AdditionalInfo: "info"}
		t.Run(m.Short(), func(t *testing.T) {
			if err := m.Validate(); err != nil {
				t.Fatalf("table entry is not a model state: %v", err)
			}
			if got := ExecutionStateToProto(m); !proto.Equal(got, tc.wire) {
				t.Errorf("ToProto = %v, want %v", got, tc.wire)
			}
			got, err := ExecutionStateFromProto(tc.wire)
			if err != nil || got != m {
				t.Errorf("FromProto = %v, %v; want %v", got, err, m)
			}
			tree := execTree(tc.wire)
			if want := m.ToTree(); !reflect.DeepEqual(tree, want) {
				t.Errorf("tree = %v, want %v", tree, want)
			}
			back, err := execFromTree(tree, "s")
			if err != nil || !proto.Equal(back, tc.wire) {
				t.Errorf("FromTree = %v, %v; want %v", back, err, tc.wire)
			}
		})
		covered++
	}
	// The table covers every substate the model knows.
	total := 0
	for _, subs := range execCodes {
		total += len(subs)
	}
	if covered != total {
		t.Fatalf("table has %d entries, the mapping %d", covered, total)
	}
}

func TestExecutionStateFromProtoRejects(t *testing.T) {
	tests := []struct {
		name string
		p    *ankbase.ExecutionState
	}{
		{"nil", nil},
		{"unset oneof", &ankbase.ExecutionState{}},
		{"unknown pending", &ankbase.ExecutionState{ExecutionStateEnum: &ankbase.ExecutionState_Pending{Pending: 5}}},
		{"unknown failed", &ankbase.ExecutionState{ExecutionStateEnum: &ankbase.ExecutionState_Failed{Failed: 99}}},
		{"unknown running", &ankbase.ExecutionState{ExecutionStateEnum: &ankbase.ExecutionState_Running{Running: 1}}},
		{"negative removed", &ankbase.ExecutionState{ExecutionStateEnum: &ankbase.ExecutionState_Removed{Removed: -1}}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			_, err := ExecutionStateFromProto(tc.p)
			checkFieldErr(t, err, "executionState")
		})
	}
}

// An unknown substate number still shows in the Tree (as its number), so a
// read never fails because an agent is newer than the server.
func TestExecTreeOfUnknownSubstate(t *testing.T) {
	got := execTree(&ankbase.ExecutionState{ExecutionStateEnum: &ankbase.ExecutionState_Pending{Pending: 5}})
	want := map[string]any{"state": "Pending", "subState": "5"}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("got %v, want %v", got, want)
	}
}

func TestExecutionStateToProtoOfInvalidModel(t *testing.T) {
	// A substate foreign to the state falls back to the state's default.
	p := ExecutionStateToProto(state.ExecutionState{State: state.StatePending, SubState: "Ok"})
	if got, err := ExecutionStateFromProto(p); err != nil || got != state.PendingInitial {
		t.Fatalf("got %v, %v; want %v", got, err, state.PendingInitial)
	}
	// An unknown state leaves the oneof unset; the receiver rejects it.
	p = ExecutionStateToProto(state.ExecutionState{State: "Sleeping"})
	if p.ExecutionStateEnum != nil {
		t.Fatalf("oneof set for an unknown state: %v", p)
	}
}
