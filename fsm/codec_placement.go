package fsm

import (
	"fmt"

	"google.golang.org/protobuf/proto"

	"github.com/grapnel-io/grapnel/fsm/fsmpb"
	"github.com/grapnel-io/grapnel/state"
)

// The bodies of SetAgentModeType and PlacementType (docs/placement.md).

func (r *SetAgentModeRequest) message() (proto.Message, error) {
	if !r.Mode.Valid() {
		return nil, fmt.Errorf("agent %q: unknown mode %d", r.Agent, r.Mode)
	}
	return &fsmpb.SetAgentMode{Agent: r.Agent, Mode: r.Mode.String(), History: historyToProto(r.History)}, nil
}

func agentModeFromProto(m *fsmpb.SetAgentMode) (*SetAgentModeRequest, error) {
	mode, err := state.ParseAgentMode(m.Mode)
	if err != nil {
		return nil, err
	}
	return &SetAgentModeRequest{Agent: m.Agent, Mode: mode, History: historyFromProto(m.History)}, nil
}

func (r *PlacementRequest) message() (proto.Message, error) {
	u := &r.Update
	m := &fsmpb.Placement{History: historyToProto(r.History)}
	for _, w := range state.SortedKeys(u.Layout) {
		m.Layout = append(m.Layout, &fsmpb.PlacedWorkload{Workload: w, Agents: u.Layout[w]})
	}
	for _, ws := range u.SetStates {
		m.SetStates = append(m.SetStates, workloadStateToProto(ws))
	}
	for _, in := range u.DeleteStates {
		m.DeleteStates = append(m.DeleteStates, instanceToProto(in))
	}
	return m, nil
}

func placementFromProto(m *fsmpb.Placement) (*PlacementRequest, error) {
	r := &PlacementRequest{History: historyFromProto(m.History)}
	u := &r.Update
	if len(m.Layout) > 0 {
		u.Layout = make(map[string][]string, len(m.Layout))
		for _, p := range m.Layout {
			u.Layout[p.Workload] = nilIfEmpty(p.Agents)
		}
	}
	for _, p := range m.SetStates {
		u.SetStates = append(u.SetStates, workloadStateFromProto(p))
	}
	for _, p := range m.DeleteStates {
		u.DeleteStates = append(u.DeleteStates, instanceFromProto(p))
	}
	return r, nil
}
