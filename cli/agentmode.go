package cli

import (
	"context"
	"fmt"

	"github.com/grapnel-io/grapnel/rpc/grapnelpb"
	"github.com/grapnel-io/grapnel/state"
)

// SetAgentMode sets an agent's mode through the leader (`grapnel agent
// maintenance|disable|activate NAME`) and returns once it is committed.
// The placed workloads of a Disabled agent then move away; the leader
// refuses a Disabled that would leave a placed workload with fewer
// instances (no other agent has room), unless force is set.
func (c *Cluster) SetAgentMode(ctx context.Context, agent string, mode state.AgentMode, force bool) error {
	if !state.ValidName(agent) {
		return fmt.Errorf("%w: agent name %q uses only [a-zA-Z0-9_-]", ErrBadArgument, agent)
	}
	if _, err := c.Client.SetAgentMode(ctx, &grapnelpb.SetAgentModeRequest{Agent: agent, Mode: mode.String(), Force: force}); err != nil {
		return err
	}
	c.info("agent %s is %s", agent, mode)
	return nil
}
