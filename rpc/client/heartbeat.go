package client

import (
	"fmt"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/grapnel-io/grapnel/internal/clock"
	"github.com/grapnel-io/grapnel/rpc/grapnelpb"
)

// Heartbeat defaults: the replica sends a Watch event at least every
// DefaultHeartbeatInterval, and one that sent nothing for
// DefaultHeartbeatTimeout (four intervals) counts as dead. HTTP/2
// keepalive cannot do this within a second: its pings are limited to one
// every few seconds by the server's enforcement policy.
const (
	DefaultHeartbeatInterval = 250 * time.Millisecond
	DefaultHeartbeatTimeout  = time.Second
)

// heartbeat runs Cluster.Watch on the replica a stream is open to, for as
// long as the stream lives. Every event feeds the Resolver. It ends the
// stream when nothing arrived for the heartbeat timeout, when the watch
// breaks, or when an event names another leader. It is owned by the
// Stream, ends with it, and closes s.watched when done.
func (r *Resolver) heartbeat(s *Stream, cc *grpc.ClientConn) {
	defer close(s.watched)
	timeout := r.opts.heartbeatTimeout()
	lost := func(format string, args ...any) {
		r.Forget(s.addr)
		s.cancel(fmt.Errorf("%w: %w: %s", ErrConnectionLost, ErrHeartbeatLost, fmt.Sprintf(format, args...)))
	}
	arm := func() clock.Timer {
		return r.opts.timers().AfterFunc(timeout, func() { lost("no heartbeat from %s for %v", s.addr, timeout) })
	}
	timer := arm()
	defer func() { timer.Stop() }()
	if r.opts.Lookout {
		done := make(chan struct{})
		go func() {
			defer close(done)
			r.lookout(s)
		}()
		// The lookout ends with the stream; s.watched closes after it.
		defer func() { <-done }()
	}
	w, err := grapnelpb.NewClusterClient(cc).Watch(s.ctx, &grapnelpb.WatchRequest{
		HeartbeatMs: uint32(r.opts.heartbeatInterval().Milliseconds()),
	})
	if err != nil {
		if s.ctx.Err() == nil {
			lost("the heartbeat from %s did not start: %s", s.addr, statusText(err))
		}
		return
	}
	for {
		ev, err := w.Recv()
		if err != nil {
			switch {
			case s.ctx.Err() != nil:
			case status.Code(err) == codes.Unimplemented:
				// No heartbeat to be had; HTTP/2 keepalive must do.
				timer.Stop()
			default:
				lost("the heartbeat from %s ended: %s", s.addr, statusText(err))
			}
			return
		}
		timer.Stop()
		timer = arm()
		st := ev.GetStatus()
		s.term.Store(st.GetTerm())
		r.observe(s.addr, st)
		if st.GetLeaderId() != st.GetReplicaId() {
			next := "no replica leads now"
			if st.GetLeaderId() != "" {
				next = "the leader is now " + st.GetLeaderId()
			}
			s.cancel(fmt.Errorf("%w: %w: %s at %s leads no more; %s", ErrConnectionLost, ErrLeaderMoved, st.GetReplicaId(), s.addr, next))
			return
		}
	}
}
