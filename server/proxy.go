package server

import (
	"context"
	"errors"
	"fmt"

	"google.golang.org/grpc"

	"github.com/grapnel-io/grapnel/internal/errs"
	"github.com/grapnel-io/grapnel/rpc/proxy"
	"github.com/grapnel-io/grapnel/rpc/wire"
)

// elsewhere answers a stream that this replica cannot serve because the
// leader d is another replica: refused as notProxied says, or proxied to
// the leader.
func (s *Server) elsewhere(st toServerStream, kind wire.Kind, d destination) error {
	if err := s.notProxied(st.Context(), "stream", d); err != nil {
		return err
	}
	return s.proxyStream(st, kind, d)
}

// notProxied is the answer to a call (a stream, or a unary call of
// Grapnel's services) for the leader d that this replica does not
// forward, nil when it forwards it:
//   - a leader-aware client gets the NotLeaderError naming the leader
//     (FailedPrecondition), and goes there;
//   - a call another replica forwarded is not forwarded again (its proxy
//     believed this replica leads; it no longer does): Unavailable, and
//     the client calls again;
//   - any other client is proxied to the leader, when a proxy pool is
//     configured.
func (s *Server) notProxied(ctx context.Context, what string, d destination) error {
	switch {
	case wire.IsLeaderAware(ctx):
		return &errs.NotLeaderError{LeaderID: d.leaderID, LeaderAddress: d.addr}
	case wire.ForwardedBy(ctx) != "":
		return fmt.Errorf("%w; replica %s forwarded this %s here, but the leader is %s at %s",
			errs.ErrNotLeader, wire.ForwardedBy(ctx), what, d.leaderID, d.addr)
	case s.cfg.Proxy == nil:
		return fmt.Errorf("%w; the leader is %s at %s, and this replica does not proxy",
			errs.ErrNotLeader, d.leaderID, d.addr)
	}
	return nil
}

// leaderConn is the pooled connection to the leader d; connections to
// earlier leaders are closed, since they serve nothing any more.
func (s *Server) leaderConn(d destination) (*grpc.ClientConn, error) {
	cc, err := s.cfg.Proxy.Get(d.addr)
	if errors.Is(err, proxy.ErrPoolClosed) {
		return nil, fmt.Errorf("%w: %v", errs.ErrShuttingDown, err)
	}
	if err != nil {
		return nil, fmt.Errorf("%w; the leader is %s at %s, and this replica cannot reach it: %v",
			errs.ErrNotLeader, d.leaderID, d.addr, err)
	}
	s.cfg.Proxy.Retain(d.addr)
	return cc, nil
}

// proxyStream forwards the stream to the leader and copies messages both
// ways until either side ends. The leader's status reaches the client
// unchanged. If leadership moves away from d.leaderID the stream ends
// with errs.ErrLeaderChanged, and on shutdown with errs.ErrShuttingDown: the
// client reconnects as after a failover.
func (s *Server) proxyStream(st toServerStream, kind wire.Kind, d destination) error {
	cc, err := s.leaderConn(d)
	if err != nil {
		return err
	}
	ctx, cancel := context.WithCancelCause(st.Context())
	defer cancel(nil)
	watched := s.endOnLeaderChange(ctx, cancel, d.leaderID)
	defer func() {
		cancel(nil)
		<-watched
	}()

	s.log.Debug("proxying a stream to the leader", "leader", d.leaderID, "address", d.addr)
	err = proxy.Forward(ctx, st, func(ctx context.Context) (wire.Stream, error) {
		return kind.Open(s.outgoing(ctx), cc)
	})
	if cause := context.Cause(ctx); cause != nil && !errors.Is(cause, context.Canceled) {
		return cause
	}
	return err
}

// endOnLeaderChange cancels ctx with errs.ErrLeaderChanged once the leader
// is no longer leaderID, and with errs.ErrShuttingDown on shutdown. The
// returned channel closes when its goroutine, owned by the proxied stream,
// has ended; it ends with ctx.
func (s *Server) endOnLeaderChange(ctx context.Context, cancel context.CancelCauseFunc, leaderID string) <-chan struct{} {
	changes, unsubscribe := s.node.Changes()
	done := make(chan struct{})
	go func() {
		defer close(done)
		defer unsubscribe()
		for {
			select {
			case <-changes:
				if id, _, _ := s.node.LeaderInfo(); id != leaderID {
					cancel(fmt.Errorf("%w: %s leads no more; reconnect", errs.ErrLeaderChanged, leaderID))
					return
				}
			case <-s.shutdownCh:
				cancel(fmt.Errorf("%w: the replica that proxied this stream stops", errs.ErrShuttingDown))
				return
			case <-ctx.Done():
				return
			}
		}
	}()
	return done
}
