package server

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/grapnel-io/grapnel/cluster"
	"github.com/grapnel-io/grapnel/internal/changefeed"
	"github.com/grapnel-io/grapnel/internal/clock"
	"github.com/grapnel-io/grapnel/internal/errs"
)

// DefaultHoldTimeout is how long a request that arrives while no leader is
// known waits for one, as Nomad holds its RPCs (Consul holds 7 s). An
// election on the default timing takes well under a second, so a client
// that arrives during a failover is served instead of failed.
const DefaultHoldTimeout = 5 * time.Second

// errHoldExpired is what holdFor returns when the bound passes; callers
// turn it into an error that says what was missing.
var errHoldExpired = errors.New("hold expired")

// holdFor waits until ready reports true, re-evaluating it on every
// cluster change signal, and on every signal of terms (nil: none): a
// replica that leads in Raft but has not opened its term yet (its
// Barrier runs) sends none on the first, so a hold for the term needs
// the second. It held with a 1 ms poll for that moment before, which a
// replica's first answer after power-on waited in. It fails with
// errHoldExpired once clk says bound has passed, with the context's error
// when ctx ends first, and with errs.ErrShuttingDown when shutdown closes.
func holdFor(ctx context.Context, node *cluster.Node, clk clock.Clock, bound time.Duration, shutdown <-chan struct{}, terms *changefeed.Feed, ready func() bool) error {
	// Subscribe before the first look, so no change falls in between.
	changes, unsubscribe := node.Changes()
	defer unsubscribe()
	var opened <-chan struct{}
	if terms != nil {
		var unsubscribeTerms func()
		opened, unsubscribeTerms = terms.Subscribe()
		defer unsubscribeTerms()
	}
	expired := make(chan struct{})
	deadline := clk.AfterFunc(bound, func() { close(expired) })
	defer deadline.Stop()
	for {
		if ready() {
			return nil
		}
		select {
		case <-changes:
		case <-opened:
		case <-expired:
			return errHoldExpired
		case <-ctx.Done():
			return ctx.Err()
		case <-shutdown:
			return errs.ErrShuttingDown
		}
	}
}

// noLeader is the error for a hold that expired: errs.ErrNoLeader, saying
// what this replica knows.
func noLeader(node *cluster.Node, waited time.Duration) error {
	id, _, _ := node.LeaderInfo()
	switch {
	case id == "":
		return fmt.Errorf("%w: no replica is known to lead; waited %v", errs.ErrNoLeader, waited)
	case id == node.ID():
		return fmt.Errorf("%w: replica %s was elected but is not serving yet; waited %v", errs.ErrNoLeader, id, waited)
	}
	return fmt.Errorf("%w: the gRPC address of the leader %s is not known here yet; waited %v", errs.ErrNoLeader, id, waited)
}

// destination says where a stream goes: this replica's current term, or
// the leader elsewhere.
type destination struct {
	t        *term
	leaderID string
	addr     string
}

// findLeader returns where the leader serves, holding while none is
// known. A leader counts as known once this replica has opened its term,
// or once another replica leads and its gRPC address is known.
func (s *Server) findLeader(ctx context.Context) (destination, error) {
	if t := s.currentTerm(); t != nil {
		// The common case, without subscribing to the change feed.
		return destination{t: t}, nil
	}
	var d destination
	err := holdFor(ctx, s.node, s.clock(), s.holdTimeout(), s.shutdownCh, s.terms, func() bool {
		if t := s.currentTerm(); t != nil {
			d = destination{t: t}
			return true
		}
		id, _, addr := s.node.LeaderInfo()
		if id == "" || id == s.node.ID() || addr == "" {
			// No leader, this one before its term opens (Server.terms
			// signals it), or a leader whose address is not known yet.
			return false
		}
		d = destination{leaderID: id, addr: addr}
		return true
	})
	if errors.Is(err, errHoldExpired) {
		return d, noLeader(s.node, s.holdTimeout())
	}
	return d, err
}

// clock is Config.Clock, or the system clock.
func (s *Server) clock() clock.Clock {
	if s.cfg.Clock != nil {
		return s.cfg.Clock
	}
	return clock.Real()
}

func (s *Server) holdTimeout() time.Duration {
	if s.cfg.HoldTimeout > 0 {
		return s.cfg.HoldTimeout
	}
	return DefaultHoldTimeout
}
