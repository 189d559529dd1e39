package server

import (
	"context"
	"fmt"

	"github.com/grapnel-io/grapnel/rpc/grapnelpb"
	"github.com/grapnel-io/grapnel/state"
)

// SetAgentMode sets an agent's mode (leader only; `grapnel agent
// maintenance|disable|activate NAME`). The agent need not be connected:
// one may be put in maintenance before it reboots.
func (c *clusterService) SetAgentMode(ctx context.Context, req *grapnelpb.SetAgentModeRequest) (*grapnelpb.SetAgentModeResponse, error) {
	if !state.ValidName(req.GetAgent()) {
		return nil, fmt.Errorf("%w: agent %q: name the agent ([a-zA-Z0-9_-])", state.ErrInvalid, req.GetAgent())
	}
	mode, err := state.ParseAgentMode(req.GetMode())
	if err != nil {
		return nil, fmt.Errorf("%w: mode: %w", state.ErrInvalid, err)
	}
	if err := c.requireLeader(ctx); err != nil {
		return nil, err
	}
	if err := c.setMode(ctx, req.GetAgent(), mode, "grapnel agent "+req.GetMode(), req.GetForce()); err != nil {
		return nil, err
	}
	return &grapnelpb.SetAgentModeResponse{}, nil
}

// Placement tells the modes, the layout and the last allocation's
// shortfalls (leader only: the shortfalls live in its memory).
func (c *clusterService) Placement(ctx context.Context, _ *grapnelpb.PlacementRequest) (*grapnelpb.PlacementResponse, error) {
	if err := c.requireLeader(ctx); err != nil {
		return nil, err
	}
	return c.placement(), nil
}

// placementView reads the modes and the layout as committed and the
// leader's last shortfalls.
func (s *Server) placementView() *grapnelpb.PlacementResponse {
	resp := &grapnelpb.PlacementResponse{}
	s.fsm.Read(func(st *state.Store, _ uint64) {
		for _, a := range state.SortedKeys(st.Modes) {
			resp.Modes = append(resp.Modes, &grapnelpb.AgentModeEntry{Agent: a, Mode: st.Modes[a].String()})
		}
		for _, w := range state.SortedKeys(st.Placement) {
			resp.Placed = append(resp.Placed, &grapnelpb.PlacedWorkload{Workload: w, Agents: append([]string(nil), st.Placement[w]...)})
		}
	})
	for _, u := range s.Unsatisfied() {
		resp.Unsatisfied = append(resp.Unsatisfied, &grapnelpb.PlacementShortfall{Workload: u.Workload,
			Wanted: uint32(u.Wanted), Placed: uint32(u.Placed), Reason: string(u.Reason)})
	}
	return resp
}
