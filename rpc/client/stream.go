package client

import (
	"context"
	"errors"
	"fmt"
	"sync/atomic"
	"time"

	"github.com/grapnel-io/grapnel/internal/errs"
	"github.com/grapnel-io/grapnel/rpc"
	"github.com/grapnel-io/grapnel/rpc/grpcapi"
	"github.com/grapnel-io/grapnel/rpc/wire"
)

// maxRedirects bounds how often one Open follows a NotLeaderError before
// it backs off: replicas that name each other while leadership moves must
// not make it spin.
const maxRedirects = 3

// Stream is an Ankaios stream open to the leader, with the heartbeat
// attached: when the replica's Cluster.Watch falls silent for the heartbeat
// timeout, or names another leader, the stream is ended, and Recv and Send
// return an error that wraps ErrConnectionLost and ErrHeartbeatLost or
// ErrLeaderMoved. The caller sends the hello itself.
//
// As with any gRPC stream, one goroutine may Send while another Recvs.
type Stream struct {
	st      wire.Stream
	r       *Resolver
	kind    wire.Kind
	taken   bool // the server took the hello; only Recv, one goroutine, uses it
	addr    string
	replica string
	ctx     context.Context
	cancel  context.CancelCauseFunc
	// watched is closed when the heartbeat goroutine has ended (at once
	// when there is none).
	watched chan struct{}
	// term is the term the leader's last heartbeat gave; 0 before the
	// first. The lookout acts only on a newer one.
	term atomic.Uint64
}

// Open opens a stream of the given kind to the leader: it finds the leader,
// opens the stream there as a leader-aware client, follows a
// NotLeaderError to the leader it names at once, and backs off only while
// no leader is known. ctx bounds the opening only; the stream lives until
// Close, a broken connection, or a failed heartbeat.
//
// After a replica refused a stream of this Resolver (IsRefusal: when
// opening it, or later with the status that ended it), Open first waits
// out the refusal backoff, which grows with each refusal in a row and
// starts over once a stream is accepted: a caller that reconnects in a
// loop then tries about twice a minute instead of thousands of times a
// second. If ctx ends first, the error wraps ErrRejected and names the
// last refusal.
func (r *Resolver) Open(ctx context.Context, kind wire.Kind) (*Stream, error) {
	if err := r.refusals.wait(ctx); err != nil {
		d, n, last := r.refusals.pending()
		return nil, fmt.Errorf("%w: %d refusals in a row, the last: %v; next attempt in %v", ErrRejected, n, last, d.Round(time.Millisecond))
	}
	bo := leaderBackoff{clock: r.opts.timers()}
	hops := 0
	for {
		addr, err := r.Leader(ctx)
		if err != nil {
			return nil, err
		}
		s, err := r.openAt(ctx, addr, kind)
		if err == nil {
			return s, nil
		}
		if ctx.Err() != nil {
			return nil, fmt.Errorf("%w: %s: %v", ErrNoServer, addr, err)
		}
		var nl *errs.NotLeaderError
		if errors.As(err, &nl) && nl.LeaderAddress != "" && nl.LeaderAddress != addr && hops < maxRedirects {
			hops++
			r.redirect(nl.LeaderID, nl.LeaderAddress)
			continue
		}
		if errors.Is(err, ErrRejected) {
			r.refusals.refused(err)
			return nil, fmt.Errorf("%s: %w", addr, err)
		}
		r.Forget(addr)
		hops = 0
		if werr := bo.wait(ctx); werr != nil {
			return nil, fmt.Errorf("%w: %s: %v", ErrNoServer, addr, err)
		}
	}
}

// openAt opens the stream at addr and waits until the replica accepts it
// (its response header) or refuses it (its status). An upstream server is
// not waited for: it sends no header before its first message.
func (r *Resolver) openAt(ctx context.Context, addr string, kind wire.Kind) (*Stream, error) {
	cc, err := r.conn(addr)
	if err != nil {
		return nil, err
	}
	sctx, cancel := context.WithCancelCause(context.Background())
	// Until the stream is accepted, ctx bounds it, and so does the probe
	// timeout: a replica that does not accept within it is as good as
	// dead. Without that bound an agent that took a leader named by a
	// stale follower waited on it for seconds while its packets were
	// dropped, and missed its reconnect grace (the chaos campaign's
	// one-way partition).
	stop := context.AfterFunc(ctx, func() { cancel(ctx.Err()) })
	notAccepted := fmt.Errorf("%w: %s did not accept the stream within %v", ErrConnectionLost, addr, r.opts.probeTimeout())
	accept := r.opts.timers().AfterFunc(r.opts.probeTimeout(), func() { cancel(notAccepted) })
	fail := func(err error) (*Stream, error) {
		accept.Stop()
		stop()
		cancel(nil)
		if ctx.Err() != nil {
			return nil, ctx.Err()
		}
		return nil, err
	}
	st, err := kind.Open(wire.WithLeaderAware(sctx), cc)
	if err != nil {
		return fail(openError(err))
	}
	legacy := r.isLegacy(addr)
	var replica string
	if !legacy {
		md, _ := st.Header()
		if md == nil {
			// Refused: the status comes with Recv.
			_, rerr := st.Recv()
			return fail(openError(rerr))
		}
		if v := md.Get(wire.ReplicaIDKey); len(v) > 0 {
			replica = v[0]
		}
	}
	if !accept.Stop() {
		stop()
		cancel(nil)
		return nil, notAccepted
	}
	if !stop() {
		cancel(nil)
		return nil, ctx.Err()
	}
	s := &Stream{st: st, r: r, kind: kind, addr: addr, replica: replica, ctx: sctx, cancel: cancel, watched: make(chan struct{})}
	if legacy || r.opts.heartbeatTimeout() <= 0 {
		close(s.watched)
	} else {
		go r.heartbeat(s, cc)
	}
	return s, nil
}

// openError classifies why a replica did not take a stream: a
// *errs.NotLeaderError to follow, a rejection to report, or a failure after
// which another attempt may succeed.
func openError(err error) error {
	var nl *errs.NotLeaderError
	if kind := rpc.FromStatus(err); errors.As(kind, &nl) {
		return nl
	}
	return dialError(err)
}

// Addr is the address the stream is open to.
func (s *Stream) Addr() string { return s.addr }

// ReplicaID is the id of the replica that accepted the stream; "" for an
// upstream server.
func (s *Stream) ReplicaID() string { return s.replica }

// Send sends one message.
func (s *Stream) Send(m *grpcapi.ToServer) error {
	if err := s.st.Send(m); err != nil {
		return s.why(err)
	}
	return nil
}

// Recv receives one message. After the heartbeat ended the stream, the
// error says so. A refusal status counts towards the Resolver's refusal
// backoff; the first message that shows the server took the hello (on an
// agent stream the ServerHello, which follows the other agents' states;
// on a CLI stream any) starts it over.
func (s *Stream) Recv() (*grpcapi.FromServer, error) {
	m, err := s.st.Recv()
	if err != nil {
		err = s.why(err)
		if IsRefusal(err) {
			s.r.refusals.refused(err)
		}
		return nil, err
	}
	if !s.taken && (s.kind != wire.KindAgent || m.GetServerHello() != nil) {
		s.taken = true
		s.r.refusals.accepted()
	}
	return m, nil
}

// CloseSend half-closes the stream: the server sees the end of what this
// side sends.
func (s *Stream) CloseSend() error { return s.st.CloseSend() }

// Done is closed once the stream is over on this side: closed, or ended
// by the heartbeat.
func (s *Stream) Done() <-chan struct{} { return s.ctx.Done() }

// Err says why the heartbeat ended the stream; nil otherwise.
func (s *Stream) Err() error {
	if c := context.Cause(s.ctx); errors.Is(c, ErrConnectionLost) {
		return c
	}
	return nil
}

// Close ends the stream and its heartbeat and waits for the heartbeat
// goroutine.
func (s *Stream) Close() {
	s.cancel(nil)
	<-s.watched
}

func (s *Stream) why(err error) error {
	if c := s.Err(); c != nil {
		return c
	}
	return err
}
