package cli

import (
	"context"
	"fmt"

	"github.com/grapnel-io/grapnel/rpc/grapnelpb"
	"github.com/grapnel-io/grapnel/state"
)

// ResyncAgent asks an agent, through the leader, for a drift repair round
// now (`grapnel agent resync NAME`). It returns once the request is on
// the agent's stream; what the round repairs shows in the workload
// states, with reasons that start with "drift: ".
func (c *Cluster) ResyncAgent(ctx context.Context, agent string) error {
	if !state.ValidName(agent) {
		return fmt.Errorf("%w: agent name %q uses only [a-zA-Z0-9_-]", ErrBadArgument, agent)
	}
	if _, err := c.Client.ResyncAgent(ctx, &grapnelpb.ResyncAgentRequest{Agent: agent}); err != nil {
		return err
	}
	c.info("asked agent %s for a drift repair round", agent)
	return nil
}
