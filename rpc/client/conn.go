package client

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/credentials/insecure"

	"github.com/grapnel-io/grapnel/internal/clock"
	"github.com/grapnel-io/grapnel/internal/tlsreload"
	"github.com/grapnel-io/grapnel/rpc"
	"github.com/grapnel-io/grapnel/rpc/ankbase"
	"github.com/grapnel-io/grapnel/rpc/grpcapi"
	"github.com/grapnel-io/grapnel/rpc/wire"
)

// DefaultResponseTimeout is how long a request waits for its answer unless
// Options says otherwise; the ank CLI's default.
const DefaultResponseTimeout = 3 * time.Second

// Options says where and how to connect.
type Options struct {
	// Addrs are replica addresses host:port, tried in order until one
	// accepts the stream.
	Addrs []string
	// Insecure connects without TLS; otherwise TLS holds the PEM files for
	// mutual TLS.
	Insecure bool
	TLS      rpc.TLSFiles
	// Certs, when set, is used instead of TLS: certificates re-read when
	// their files change (a long-lived client such as the agent).
	Certs *tlsreload.Store
	// ResponseTimeout bounds the wait for the answer to a request, and the
	// time Dial takes to find the leader and open the stream there. Zero
	// means DefaultResponseTimeout.
	ResponseTimeout time.Duration
	// HeartbeatTimeout is how long the replica a stream is open to may
	// stay silent before it counts as dead and the stream ends. Zero means
	// DefaultHeartbeatTimeout; negative turns the heartbeat off.
	HeartbeatTimeout time.Duration
	// HeartbeatInterval is how often the replica is asked to send a
	// heartbeat. Zero means DefaultHeartbeatInterval.
	HeartbeatInterval time.Duration
	// Lookout makes every stream keep a slow watch at one other replica
	// (see lookout.go), which names the next leader as soon as it is
	// elected; the leader's heartbeat then defaults to
	// LookoutHeartbeatInterval and LookoutHeartbeatTimeout. For clients
	// that hold a stream for long, such as agents.
	Lookout bool
	// Commander makes Dial open a CommandConnection instead of a
	// CliConnection: a commander that gets only its own responses, not
	// the workload-state broadcasts every CLI stream receives.
	Commander bool
	// Clock drives the wait after a refusal (see Resolver.Open); nil is
	// the system clock.
	Clock clock.Clock
	// Timers drives the connection's own timers: the heartbeat and probe
	// timeouts, the response timeout, the backoff between rounds of
	// finding the leader and between attempts to open a stream, and the
	// waits on closing. Nil is the system clock. It is apart from Clock
	// so that a test that advances the refusal backoff by hand does not
	// also have to drive every heartbeat.
	Timers clock.Clock
	// Owner is the owner this client declares for intent locks on every
	// call and stream (wire.OwnerKey); a client certificate's name takes
	// precedence on the server. Empty declares none.
	Owner string
}

// timers is Timers, or the system clock.
func (o Options) timers() clock.Clock {
	if o.Timers != nil {
		return o.Timers
	}
	return clock.Real()
}

func (o Options) timeout() time.Duration {
	if o.ResponseTimeout > 0 {
		return o.ResponseTimeout
	}
	return DefaultResponseTimeout
}

func (o Options) heartbeatTimeout() time.Duration {
	switch {
	case o.HeartbeatTimeout != 0:
		return o.HeartbeatTimeout
	case o.Lookout:
		return LookoutHeartbeatTimeout
	}
	return DefaultHeartbeatTimeout
}

func (o Options) heartbeatInterval() time.Duration {
	switch {
	case o.HeartbeatInterval > 0:
		return o.HeartbeatInterval
	case o.Lookout:
		return LookoutHeartbeatInterval
	}
	return DefaultHeartbeatInterval
}

// probeTimeout bounds one Status query while looking for the leader: a
// replica that cannot answer within a heartbeat timeout is as good as
// dead. A lookout's longer heartbeat does not stretch it.
func (o Options) probeTimeout() time.Duration {
	t := o.HeartbeatTimeout
	if t == 0 {
		t = DefaultHeartbeatTimeout
	}
	if t > 0 {
		return min(t, o.timeout())
	}
	return o.timeout()
}

// Conn is one open CLI stream to the leader. Its methods are safe for
// concurrent use.
type Conn struct {
	stream  *Stream
	res     *Resolver // found the leader; reaches Grapnel's other services
	owned   *Resolver // closed with the Conn when Dial created it; guarded by mu
	clock   clock.Clock
	timeout time.Duration
	done    chan struct{} // closed when the receive goroutine has ended

	sendMu sync.Mutex // one sender at a time, as gRPC streams require

	mu      sync.Mutex // guards the following fields
	waiters map[string]*waiter
	subs    map[string]*queue[*ankbase.Response]
	states  *queue[[]*ankbase.WorkloadState]
	err     error // why the stream ended; nil while it is up
	closing bool
}

// Dial finds the leader among the replicas in o.Addrs, opens the CLI
// stream there and sends the CommanderHello. The stream has the heartbeat
// attached (see Stream). Finding the leader and opening the stream are
// bounded by ctx and by o's response timeout; the error names every
// address tried.
func Dial(ctx context.Context, o Options) (*Conn, error) {
	r, err := NewResolver(o)
	if err != nil {
		return nil, err
	}
	c, err := r.Dial(ctx)
	if err != nil {
		r.Close()
		return nil, err
	}
	c.owned = r
	return c, nil
}

// Dial opens a CLI connection (a commander one with Options.Commander) to
// the leader through r, which outlives it:
// a caller that reconnects after a broken stream keeps what r learned and
// goes straight to the new leader.
func (r *Resolver) Dial(ctx context.Context) (*Conn, error) {
	octx, cancel := context.WithTimeout(ctx, r.opts.timeout())
	defer cancel()
	kind := wire.KindCLI
	if r.opts.Commander {
		kind = wire.KindCommand
	}
	s, err := r.Open(octx, kind)
	if err != nil {
		if ctx.Err() != nil {
			return nil, ctx.Err()
		}
		return nil, err
	}
	c := &Conn{
		stream:  s,
		res:     r,
		clock:   r.opts.timers(),
		timeout: r.opts.timeout(),
		done:    make(chan struct{}),
		waiters: map[string]*waiter{},
		subs:    map[string]*queue[*ankbase.Response]{},
	}
	hello := &grpcapi.ToServer{ToServerEnum: &grpcapi.ToServer_CommanderHello{
		CommanderHello: &grpcapi.CommanderHello{ProtocolVersion: rpc.ProtocolVersion},
	}}
	if err := s.Send(hello); err != nil {
		// Send reports io.EOF when the server already ended the stream;
		// the reason comes with Recv.
		_, rerr := s.Recv()
		s.Close()
		err := dialError(rerr)
		if errors.Is(err, ErrRejected) {
			return nil, fmt.Errorf("%s: %w", s.Addr(), err)
		}
		return nil, fmt.Errorf("%w: %s (%v)", ErrNoServer, s.Addr(), err)
	}
	go c.receive()
	return c, nil
}

func transportCredentials(o Options) (credentials.TransportCredentials, error) {
	if o.Insecure {
		return insecure.NewCredentials(), nil
	}
	if o.Certs != nil {
		return credentials.NewTLS(rpc.ClientTLSConfigFrom(o.Certs, rpc.ServerName)), nil
	}
	cfg, err := rpc.ClientTLSConfig(o.TLS, rpc.ServerName)
	if err != nil {
		return nil, err
	}
	return credentials.NewTLS(cfg), nil
}

// Addr is the address the stream is open to.
func (c *Conn) Addr() string { return c.stream.Addr() }

// ReplicaID is the id of the replica the stream is open to; "" for an
// upstream server, which does not tell.
func (c *Conn) ReplicaID() string { return c.stream.ReplicaID() }

// Reconnect opens a new connection to the leader through the Resolver
// that found this one, after this one's stream ended (a leader change, a
// dead replica): it goes straight to a leader the heartbeat already
// named, or asks the replicas, every address given and learned, until
// one leads, bounded by ctx and the response timeout. The new Conn takes
// over the Resolver when this one owned it, so closing this one no
// longer closes the Resolver. What ran on this stream (subscriptions,
// log campaigns) does not carry over: the caller asks again.
func (c *Conn) Reconnect(ctx context.Context) (*Conn, error) {
	n, err := c.res.Dial(ctx)
	if err != nil {
		return nil, err
	}
	c.mu.Lock()
	n.owned, c.owned = c.owned, nil
	c.mu.Unlock()
	return n, nil
}

// Err says why the stream ended, or nil while it is up. Subscriptions see
// their channel closed when the stream ends; Err tells them why.
func (c *Conn) Err() error {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.err
}

// Done is closed when the stream has ended.
func (c *Conn) Done() <-chan struct{} { return c.done }

// Close sends Goodbye, so the server drops this connection's log campaigns
// and event subscriptions at once, and closes the stream.
func (c *Conn) Close() error {
	c.mu.Lock()
	if c.closing {
		c.mu.Unlock()
		<-c.done
		return nil
	}
	c.closing = true
	up := c.err == nil
	c.mu.Unlock()
	if up {
		bye := &grpcapi.ToServer{ToServerEnum: &grpcapi.ToServer_Goodbye{Goodbye: &grpcapi.Goodbye{}}}
		c.sendMu.Lock()
		_ = c.stream.Send(bye)
		_ = c.stream.CloseSend()
		c.sendMu.Unlock()
		// Give the server a moment to end the stream itself, so Goodbye
		// is read before the cancellation resets the stream.
		t := clock.NewTimer(c.clock, 200*time.Millisecond)
		select {
		case <-c.done:
		case <-t.C:
		}
		t.Stop()
	}
	c.stream.Close()
	<-c.done
	c.mu.Lock()
	for id, q := range c.subs {
		q.stop()
		delete(c.subs, id)
	}
	if c.states != nil {
		c.states.stop()
	}
	owned := c.owned
	c.mu.Unlock()
	if owned != nil {
		return owned.Close()
	}
	return nil
}

// receive is the only reader of the stream.
func (c *Conn) receive() {
	defer close(c.done)
	for {
		msg, err := c.stream.Recv()
		if err != nil {
			c.fail(err)
			return
		}
		switch m := msg.GetFromServerEnum().(type) {
		case *grpcapi.FromServer_Response:
			c.dispatch(m.Response)
		case *grpcapi.FromServer_UpdateWorkloadState:
			c.mu.Lock()
			q := c.states
			c.mu.Unlock()
			if q != nil {
				q.push(m.UpdateWorkloadState.GetWorkloadStates())
			}
		default:
			// LogsCancelRequest and friends are broadcast to every
			// connection; they concern agents, not a commander.
		}
	}
}

// fail records why the stream ended and wakes everyone waiting on it.
func (c *Conn) fail(err error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.closing {
		c.err = ErrClosed
	} else {
		c.err = streamError(err)
	}
	for id, w := range c.waiters {
		w.ch <- waitResult{err: c.err}
		delete(c.waiters, id)
	}
	for _, q := range c.subs {
		q.end()
	}
	if c.states != nil {
		c.states.end()
	}
}

func (c *Conn) dispatch(resp *ankbase.Response) {
	id := resp.GetRequestId()
	c.mu.Lock()
	defer c.mu.Unlock()
	if w, ok := c.waiters[id]; ok && w.accepts(resp) {
		delete(c.waiters, id)
		w.ch <- waitResult{resp: resp}
		return
	}
	if q, ok := c.subs[id]; ok {
		q.push(resp)
	}
	// Anything else answers a request nobody waits for any more (it timed
	// out); dropping it is right.
}

func (c *Conn) send(msg *grpcapi.ToServer) error {
	c.sendMu.Lock()
	err := c.stream.Send(msg)
	c.sendMu.Unlock()
	if err == nil {
		return nil
	}
	// io.EOF from Send means the stream is over; Recv has the reason.
	t := clock.NewTimer(c.clock, time.Second)
	defer t.Stop()
	select {
	case <-c.done:
		return c.Err()
	case <-t.C:
		return fmt.Errorf("%w: %v", ErrConnectionLost, err)
	}
}
