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

// termRecheck is how often a hold re-checks while this replica is the Raft
// leader but has not opened its term yet (the Barrier is still running).
// The term's opening is signalled (Server.terms), so a hold goes on at
// once; the re-check stays as a backstop. The moment lasts a few
// milliseconds per leadership change, and a replica's first answer after
// power-on waits in it, so the re-check is short (10 ms was a fifth of a
// single replica's start).
const termRecheck = time.Millisecond

// errHoldExpired is what holdFor returns when the bound passes; callers
// turn it into an error that says what was missing.
var errHoldExpired = errors.New("hold expired")

// holdFor waits until ready reports true, re-evaluating it on every
// cluster change signal, and on every signal of terms (nil: none).
// ready's second result asks for a re-check after termRecheck even
// without a signal. It fails with errHoldExpired once clk says bound has
// passed, with the context's error when ctx ends first, and with
// errs.ErrShuttingDown when shutdown closes.
func holdFor(ctx context.Context, node *cluster.Node, clk clock.Clock, bound time.Duration, shutdown <-chan struct{}, terms *changefeed.Feed, ready func() (ok, recheck bool)) error {
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
		ok, soon := ready()
		if ok {
			return nil
		}
		var recheck chan struct{}
		var recheckTimer clock.Timer
		if soon {
			// A poll, not a behaviour: on the real clock, so that a fake
			// one in tests cannot stall a stream behind the Barrier.
			ch := make(chan struct{})
			recheck, recheckTimer = ch, clock.Real().AfterFunc(termRecheck, func() { close(ch) })
		}
		var err error
		select {
		case <-changes:
		case <-opened:
		case <-recheck:
		case <-expired:
			err = errHoldExpired
		case <-ctx.Done():
			err = ctx.Err()
		case <-shutdown:
			err = errs.ErrShuttingDown
		}
		if recheckTimer != nil {
			recheckTimer.Stop()
		}
		if err != nil {
			return err
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
	err := holdFor(ctx, s.node, s.clock(), s.holdTimeout(), s.shutdownCh, s.terms, func() (bool, bool) {
		if t := s.currentTerm(); t != nil {
			d = destination{t: t}
			return true, false
		}
		id, _, addr := s.node.LeaderInfo()
		switch {
		case id == "":
			return false, false
		case id == s.node.ID():
			return false, true
		case addr == "":
			return false, false
		}
		d = destination{leaderID: id, addr: addr}
		return true, false
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
