package server

import (
	"context"
	"fmt"

	"github.com/grapnel-io/grapnel/internal/errs"
	"github.com/grapnel-io/grapnel/rpc/grpcapi"
)

// resyncCall is a drift repair request for one agent, handed to the
// leader loop (Cluster.ResyncAgent, `grapnel agent resync`); done gets
// the outcome.
type resyncCall struct {
	agent string
	done  chan error // capacity 1
}

// resyncAgent hands a drift repair request to the leader loop and waits
// for it to be queued on the agent's stream.
func (s *Server) resyncAgent(ctx context.Context, agent string) error {
	call := &resyncCall{agent: agent, done: make(chan error, 1)}
	return s.callLeaderLoop(ctx, call, call.done)
}

// callLeaderLoop hands msg to this replica's leader loop and waits until
// the loop answers on done (an operator action, once committed).
func (s *Server) callLeaderLoop(ctx context.Context, msg inMsg, done <-chan error) error {
	t := s.currentTerm()
	if t == nil {
		return fmt.Errorf("%w: replica %s has not opened its term yet", errs.ErrNoLeader, s.node.ID())
	}
	if !t.post(msg) {
		return fmt.Errorf("%w: replica %s stopped leading", errs.ErrLeaderChanged, s.node.ID())
	}
	select {
	case err := <-done:
		return err
	case <-ctx.Done():
		return ctx.Err()
	}
}

// resyncAgent relays a drift repair request on the agent's stream as an
// UpdateWorkload with no added and no deleted workloads: the Ankaios v1
// wire has no message for it, an Ankaios agent has nothing to do for an
// empty update, and a Grapnel agent takes it as the request (no update
// the leader dispatches is ever empty). The stream is the agent's own,
// authenticated as it is; it is sent only after the agent's ServerHello.
func (l *leader) resyncAgent(agent string) error {
	c := l.agentConn(agent)
	if c == nil {
		return fmt.Errorf("%w: agent %q has no stream open to the leader %s", errs.ErrAgentNotConnected, agent, l.s.node.ID())
	}
	if !c.send(&grpcapi.FromServer{FromServerEnum: &grpcapi.FromServer_UpdateWorkload{UpdateWorkload: &grpcapi.UpdateWorkload{}}}) {
		return fmt.Errorf("%w: the stream of agent %q closed", errs.ErrAgentNotConnected, agent)
	}
	l.s.log.Info("asked an agent for a drift repair round", "agent", agent)
	return nil
}
