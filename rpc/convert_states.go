package rpc

import (
	"fmt"

	"github.com/grapnel-io/grapnel/rpc/ankbase"
	"github.com/grapnel-io/grapnel/state"
)

// subCode pairs a substate of the model with its number in the wire enum.
type subCode struct {
	sub  string
	code int32
}

// execCodes lists, per state, the substates and their wire numbers. The
// first entry of each list has number 0, the proto3 default.
var execCodes = map[state.ExecState][]subCode{
	state.StateAgentDisconnected: {{string(state.StateAgentDisconnected), int32(ankbase.AgentDisconnected_AGENT_DISCONNECTED)}},
	state.StatePending: {
		{state.SubInitial, int32(ankbase.Pending_PENDING_INITIAL)},
		{state.SubWaitingToStart, int32(ankbase.Pending_PENDING_WAITING_TO_START)},
		{state.SubStarting, int32(ankbase.Pending_PENDING_STARTING)},
		{state.SubStartingFailed, int32(ankbase.Pending_PENDING_STARTING_FAILED)},
	},
	state.StateRunning: {{state.SubOk, int32(ankbase.Running_RUNNING_OK)}},
	state.StateStopping: {
		{state.SubStopping, int32(ankbase.Stopping_STOPPING)},
		{state.SubWaitingToStop, int32(ankbase.Stopping_STOPPING_WAITING_TO_STOP)},
		{state.SubRequestedAtRuntime, int32(ankbase.Stopping_STOPPING_REQUESTED_AT_RUNTIME)},
		{state.SubDeleteFailed, int32(ankbase.Stopping_STOPPING_DELETE_FAILED)},
	},
	state.StateSucceeded: {{state.SubOk, int32(ankbase.Succeeded_SUCCEEDED_OK)}},
	state.StateFailed: {
		{state.SubExecFailed, int32(ankbase.Failed_FAILED_EXEC_FAILED)},
		{state.SubUnknown, int32(ankbase.Failed_FAILED_UNKNOWN)},
		{state.SubLost, int32(ankbase.Failed_FAILED_LOST)},
	},
	state.StateNotScheduled: {{string(state.StateNotScheduled), int32(ankbase.NotScheduled_NOT_SCHEDULED)}},
	state.StateRemoved:      {{string(state.StateRemoved), int32(ankbase.Removed_REMOVED)}},
}

func subToCode(st state.ExecState, sub string) (int32, bool) {
	for _, c := range execCodes[st] {
		if c.sub == sub {
			return c.code, true
		}
	}
	return 0, false
}

func codeToSub(st state.ExecState, code int32) (string, bool) {
	for _, c := range execCodes[st] {
		if c.code == code {
			return c.sub, true
		}
	}
	return "", false
}

// setExecEnum fills the oneof of p. An unknown state leaves it unset, so
// the receiver rejects the message instead of reading a wrong state.
func setExecEnum(p *ankbase.ExecutionState, st state.ExecState, code int32) {
	switch st {
	case state.StateAgentDisconnected:
		p.ExecutionStateEnum = &ankbase.ExecutionState_AgentDisconnected{AgentDisconnected: ankbase.AgentDisconnected(code)}
	case state.StatePending:
		p.ExecutionStateEnum = &ankbase.ExecutionState_Pending{Pending: ankbase.Pending(code)}
	case state.StateRunning:
		p.ExecutionStateEnum = &ankbase.ExecutionState_Running{Running: ankbase.Running(code)}
	case state.StateStopping:
		p.ExecutionStateEnum = &ankbase.ExecutionState_Stopping{Stopping: ankbase.Stopping(code)}
	case state.StateSucceeded:
		p.ExecutionStateEnum = &ankbase.ExecutionState_Succeeded{Succeeded: ankbase.Succeeded(code)}
	case state.StateFailed:
		p.ExecutionStateEnum = &ankbase.ExecutionState_Failed{Failed: ankbase.Failed(code)}
	case state.StateNotScheduled:
		p.ExecutionStateEnum = &ankbase.ExecutionState_NotScheduled{NotScheduled: ankbase.NotScheduled(code)}
	case state.StateRemoved:
		p.ExecutionStateEnum = &ankbase.ExecutionState_Removed{Removed: ankbase.Removed(code)}
	}
}

// execEnum reads the oneof of p; ok is false when it is unset.
func execEnum(p *ankbase.ExecutionState) (st state.ExecState, code int32, ok bool) {
	switch x := p.GetExecutionStateEnum().(type) {
	case *ankbase.ExecutionState_AgentDisconnected:
		return state.StateAgentDisconnected, int32(x.AgentDisconnected), true
	case *ankbase.ExecutionState_Pending:
		return state.StatePending, int32(x.Pending), true
	case *ankbase.ExecutionState_Running:
		return state.StateRunning, int32(x.Running), true
	case *ankbase.ExecutionState_Stopping:
		return state.StateStopping, int32(x.Stopping), true
	case *ankbase.ExecutionState_Succeeded:
		return state.StateSucceeded, int32(x.Succeeded), true
	case *ankbase.ExecutionState_Failed:
		return state.StateFailed, int32(x.Failed), true
	case *ankbase.ExecutionState_NotScheduled:
		return state.StateNotScheduled, int32(x.NotScheduled), true
	case *ankbase.ExecutionState_Removed:
		return state.StateRemoved, int32(x.Removed), true
	}
	return "", 0, false
}

// ExecutionStateToProto converts an execution state. The additional info
// is always set, as upstream does. A substate that does not belong to the
// state is sent as the state's default substate; an unknown state leaves
// the oneof unset (the model validates both before they get here).
func ExecutionStateToProto(e state.ExecutionState) *ankbase.ExecutionState {
	info := e.AdditionalInfo
	p := &ankbase.ExecutionState{AdditionalInfo: &info}
	code, _ := subToCode(e.State, e.SubState)
	setExecEnum(p, e.State, code)
	return p
}

// ExecutionStateFromProto converts an execution state received on the
// wire. An unset oneof or a substate number unknown to this version is an
// error.
func ExecutionStateFromProto(p *ankbase.ExecutionState) (state.ExecutionState, error) {
	return execFromProto(p, "executionState")
}

func execFromProto(p *ankbase.ExecutionState, path string) (state.ExecutionState, error) {
	if p == nil {
		return state.ExecutionState{}, fieldErr(path, "missing execution state")
	}
	st, code, ok := execEnum(p)
	if !ok {
		return state.ExecutionState{}, fieldErr(path, "execution state has no state set")
	}
	sub, ok := codeToSub(st, code)
	if !ok {
		return state.ExecutionState{}, fieldErr(path, "unknown %s substate %d", st, code)
	}
	return state.ExecutionState{State: st, SubState: sub, AdditionalInfo: p.GetAdditionalInfo()}, nil
}

// InstanceNameToProto converts an instance name.
func InstanceNameToProto(n state.InstanceName) *ankbase.WorkloadInstanceName {
	return &ankbase.WorkloadInstanceName{WorkloadName: n.WorkloadName, AgentName: n.AgentName, Id: n.ID}
}

// InstanceNameFromProto converts an instance name; nil gives the zero name.
func InstanceNameFromProto(p *ankbase.WorkloadInstanceName) state.InstanceName {
	return state.InstanceName{WorkloadName: p.GetWorkloadName(), AgentName: p.GetAgentName(), ID: p.GetId()}
}

// WorkloadStatesToProto converts a list of state reports.
func WorkloadStatesToProto(ws []state.WorkloadState) []*ankbase.WorkloadState {
	out := make([]*ankbase.WorkloadState, len(ws))
	for i, w := range ws {
		out[i] = &ankbase.WorkloadState{InstanceName: InstanceNameToProto(w.Instance), ExecutionState: ExecutionStateToProto(w.State)}
	}
	return out
}

// WorkloadStatesFromProto converts state reports from an agent. Every entry
// needs an instance name and a valid execution state; the error names the
// first entry that has not.
func WorkloadStatesFromProto(ps []*ankbase.WorkloadState) ([]state.WorkloadState, error) {
	out := make([]state.WorkloadState, 0, len(ps))
	for i, p := range ps {
		path := fmt.Sprintf("workloadStates.%d", i)
		if p.GetInstanceName() == nil {
			return nil, fieldErr(path+".instanceName", "missing instance name")
		}
		e, err := execFromProto(p.GetExecutionState(), path+".executionState")
		if err != nil {
			return nil, err
		}
		out = append(out, state.WorkloadState{Instance: InstanceNameFromProto(p.GetInstanceName()), State: e})
	}
	return out, nil
}

// WorkloadStatesMapToProto converts the workload states map.
func WorkloadStatesMapToProto(m state.WorkloadStatesMap) *ankbase.WorkloadStatesMap {
	out := &ankbase.WorkloadStatesMap{AgentStateMap: make(map[string]*ankbase.ExecutionsStatesOfWorkload, len(m))}
	for agent, wls := range m {
		pw := &ankbase.ExecutionsStatesOfWorkload{WlNameStateMap: make(map[string]*ankbase.ExecutionsStatesForId, len(wls))}
		for wl, ids := range wls {
			pi := &ankbase.ExecutionsStatesForId{IdStateMap: make(map[string]*ankbase.ExecutionState, len(ids))}
			for id, e := range ids {
				pi.IdStateMap[id] = ExecutionStateToProto(e)
			}
			pw.WlNameStateMap[wl] = pi
		}
		out.AgentStateMap[agent] = pw
	}
	return out
}

// AgentMapToProto converts the agent map. Status and tags are always set;
// a load value not yet reported stays unset.
func AgentMapToProto(m state.AgentMap) *ankbase.AgentMap {
	out := &ankbase.AgentMap{Agents: make(map[string]*ankbase.AgentAttributes, len(m))}
	for name, a := range m {
		pa := &ankbase.AgentAttributes{Status: &ankbase.AgentStatus{}, Tags: &ankbase.Tags{Tags: map[string]string{}}}
		if a != nil {
			if a.Status.CPUUsage != nil {
				pa.Status.CpuUsage = &ankbase.CpuUsage{CpuUsage: *a.Status.CPUUsage}
			}
			if a.Status.FreeMemory != nil {
				pa.Status.FreeMemory = &ankbase.FreeMemory{FreeMemory: *a.Status.FreeMemory}
			}
			for k, v := range a.Tags {
				pa.Tags.Tags[k] = v
			}
		}
		out.Agents[name] = pa
	}
	return out
}

// fieldErr builds a state.FieldError, so that conversion errors are
// state.ErrInvalid and become InvalidArgument.
func fieldErr(path, format string, args ...any) error {
	return &state.FieldError{Path: path, Reason: fmt.Sprintf(format, args...)}
}
