package client

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/status"

	"github.com/grapnel-io/grapnel/internal/clock"
	"github.com/grapnel-io/grapnel/internal/errs"
	"github.com/grapnel-io/grapnel/rpc"
	"github.com/grapnel-io/grapnel/rpc/grapnelpb"
	"github.com/grapnel-io/grapnel/rpc/wire"
)

// Resolver finds the leader of a Grapnel cluster and follows it. Given one
// or more replica addresses, it asks them all for their Cluster.Status,
// learns the replica set from the answers and takes the leader they name.
// A stream's heartbeat keeps it fresh: each Watch event updates the
// replica set and the leader. While no leader is known it retries with a
// jittered exponential backoff, bounded by the caller's context.
//
// A server without Grapnel's Cluster service (an upstream Ankaios server)
// is taken as its own leader, without a heartbeat.
//
// One gRPC connection per address is kept and shared by every call and
// stream; Close closes them. A Resolver is safe for concurrent use, and an
// agent keeps one for its whole life.
type Resolver struct {
	opts  Options
	creds credentials.TransportCredentials

	mu       sync.Mutex // guards the following fields
	conns    map[string]*grpc.ClientConn
	members  []string        // gRPC addresses learned from the newest status
	leaderID string          // "" while unknown
	leader   string          // the leader's gRPC address; "" while unknown
	legacy   map[string]bool // addresses without the Cluster service
	closed   bool

	// refusals holds Open back after a replica refused a stream.
	refusals refusalBackoff

	// retryDelay, when set, replaces the backoff between two rounds of
	// find; tests stretch it to show what wakes find before it.
	retryDelay func() time.Duration
}

// NewResolver checks the options and prepares the credentials; it does not
// connect yet.
func NewResolver(o Options) (*Resolver, error) {
	if len(o.Addrs) == 0 {
		return nil, fmt.Errorf("%w: no server address given", ErrNoServer)
	}
	creds, err := transportCredentials(o)
	if err != nil {
		return nil, err
	}
	clk := o.Clock
	if clk == nil {
		clk = clock.Real()
	}
	return &Resolver{opts: o, creds: creds, conns: map[string]*grpc.ClientConn{}, legacy: map[string]bool{},
		refusals: refusalBackoff{clock: clk}}, nil
}

// Refused says how long the next Open waits because a replica refused a
// stream, and how many refusals came in a row since one was accepted; 0
// and 0 when nothing holds it back.
func (r *Resolver) Refused() (time.Duration, int) {
	d, n, _ := r.refusals.pending()
	return d, n
}

// Leader returns the gRPC address of the leader: the one last learned, or,
// when none is known, the one the replicas name when asked, retrying with
// backoff until ctx ends.
func (r *Resolver) Leader(ctx context.Context) (string, error) {
	r.mu.Lock()
	addr, closed := r.leader, r.closed
	r.mu.Unlock()
	if closed {
		return "", ErrClosed
	}
	if addr != "" {
		return addr, nil
	}
	return r.find(ctx)
}

// LeaderID returns the id of the leader last learned; "" when none is
// known or the server does not tell (an upstream Ankaios server).
func (r *Resolver) LeaderID() string {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.leaderID
}

// Members returns every replica address known: the given ones, then the
// ones learned from the replicas.
func (r *Resolver) Members() []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.candidatesLocked()
}

// Forget drops addr as the leader after the caller found it broken, so
// that the next Leader asks around.
func (r *Resolver) Forget(addr string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.leader == addr {
		r.leader, r.leaderID = "", ""
	}
}

// Close closes every connection, which ends the streams opened through the
// Resolver.
func (r *Resolver) Close() error {
	r.mu.Lock()
	r.closed = true
	conns := r.conns
	r.conns = map[string]*grpc.ClientConn{}
	r.mu.Unlock()
	var errs []error
	for _, cc := range conns {
		if err := cc.Close(); err != nil {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}

// conn returns the shared connection to addr.
func (r *Resolver) conn(addr string) (*grpc.ClientConn, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.closed {
		return nil, ErrClosed
	}
	if cc, ok := r.conns[addr]; ok {
		return cc, nil
	}
	// The keepalive, message limits and windows are the server's
	// (rpc/limits.go).
	opts := append([]grpc.DialOption{grpc.WithTransportCredentials(r.creds), grpc.WithKeepaliveParams(rpc.ClientKeepalive),
		rpc.ClientLimits(), rpc.Redial()}, rpc.ClientWindows()...)
	if o := r.opts.Owner; o != "" {
		opts = append(opts, ownerInterceptors(o)...)
	}
	cc, err := grpc.NewClient(addr, opts...)
	if err != nil {
		return nil, err
	}
	r.conns[addr] = cc
	return cc, nil
}

func (r *Resolver) isLegacy(addr string) bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.legacy[addr]
}

// redirect takes the leader a replica named in a NotLeaderError.
func (r *Resolver) redirect(id, addr string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.leaderID, r.leader = id, addr
}

// candidatesLocked lists the addresses to ask: the given ones first, in
// order, then the learned ones.
func (r *Resolver) candidatesLocked() []string {
	out := slices.Clone(r.opts.Addrs)
	for _, a := range r.members {
		if !slices.Contains(out, a) {
			out = append(out, a)
		}
	}
	return out
}

// observe learns from a status that the replica at from sent: the replica
// set, and the leader it names. A replica naming itself is reached at
// from, the address that just answered.
func (r *Resolver) observe(from string, st *grapnelpb.StatusResponse) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.observeMembersLocked(st)
	id, addr := leaderOf(from, st)
	switch {
	case addr != "":
		r.leaderID, r.leader = id, addr
	case r.leader == from || id == "":
		// The replica we followed leads no more, or nobody leads.
		r.leaderID, r.leader = "", ""
	}
}

// observeMembersLocked takes the replica set a status lists.
func (r *Resolver) observeMembersLocked(st *grapnelpb.StatusResponse) {
	var members []string
	for _, m := range st.GetMembers() {
		if a := m.GetGrpcAddress(); a != "" {
			members = append(members, a)
		}
	}
	if len(members) > 0 {
		r.members = members
	}
}

// leaderOf reads the leader's id and gRPC address from a status sent by the
// replica at from; the address is "" when not known.
func leaderOf(from string, st *grapnelpb.StatusResponse) (id, addr string) {
	id = st.GetLeaderId()
	switch {
	case id == "":
		return "", ""
	case id == st.GetReplicaId():
		return id, from
	case st.GetLeaderGrpcAddress() != "":
		return id, st.GetLeaderGrpcAddress()
	}
	for _, m := range st.GetMembers() {
		if m.GetId() == id {
			return id, m.GetGrpcAddress()
		}
	}
	return id, ""
}

// find asks the replicas until one names a leader, until ctx ends.
// Between two rounds it backs off, but a replica's Watch that names a
// leader ends the wait at once (see leaderWatch).
func (r *Resolver) find(ctx context.Context) (string, error) {
	var (
		bo   = leaderBackoff{clock: r.opts.timers()}
		last pollRound
	)
	w := r.newLeaderWatch(ctx)
	defer w.stop()
	for {
		addr, round := r.poll(ctx)
		if addr != "" {
			return addr, nil
		}
		// A round cut short by ctx says only "deadline exceeded"; a
		// replica that answered "no leader" earlier is the better reason.
		if round.noLeader || !last.noLeader {
			last = round
		}
		w.add(r.Members())
		d := bo.delay()
		if r.retryDelay != nil {
			d = r.retryDelay()
		}
		if err := w.wait(ctx, d); err != nil {
			return "", last.err()
		}
		if addr, id := w.leader(); addr != "" {
			r.redirect(id, addr)
			return addr, nil
		}
	}
}

// pollRound is what a round of asking found when no replica named a
// leader.
type pollRound struct {
	said     []string // one entry per address: address (what it said)
	noLeader bool     // some replica answered but knew no leader
}

// err says why no leader was found, naming every address asked.
func (p pollRound) err() error {
	if p.noLeader {
		return fmt.Errorf("%w: %w: asked %s", ErrNoServer, errs.ErrNoLeader, strings.Join(p.said, ", "))
	}
	return fmt.Errorf("%w: tried %s", ErrNoServer, strings.Join(p.said, ", "))
}

type statusAnswer struct {
	addr string
	st   *grapnelpb.StatusResponse
	err  error
}

// poll asks every known replica at once and returns the leader: at once
// the first replica that says it leads itself, which is authoritative;
// otherwise, once every replica answered or timed out, the leader named
// in the highest term, unless that replica answered in this round that it
// does not lead. A follower names the leader it last heard of until it
// hears from a new one, so right after a leader is cut off the others may
// still name it; taking that at its word sent clients to the old leader,
// where they waited out their deadline (the chaos campaign's leader
// partition). An upstream server, which has no Cluster service, is its
// own leader. Otherwise it returns "" and what each replica said. Every
// query is bounded by the probe timeout, so a replica that swallows
// packets does not hold the round up for long.
func (r *Resolver) poll(ctx context.Context) (string, pollRound) {
	r.mu.Lock()
	addrs := r.candidatesLocked()
	r.mu.Unlock()
	ctx, cancel := context.WithCancel(ctx)
	var wg sync.WaitGroup
	defer func() {
		// End the queries still running once a leader is found, and wait
		// for them: poll owns its goroutines.
		cancel()
		wg.Wait()
	}()
	answers := make(chan statusAnswer, len(addrs))
	for _, addr := range addrs {
		wg.Add(1)
		go func() {
			defer wg.Done()
			cc, err := r.conn(addr)
			if err != nil {
				answers <- statusAnswer{addr: addr, err: err}
				return
			}
			qctx, qcancel := context.WithTimeout(ctx, r.opts.probeTimeout())
			defer qcancel()
			st, err := grapnelpb.NewClusterClient(cc).Status(qctx, &grapnelpb.StatusRequest{})
			answers <- statusAnswer{addr: addr, st: st, err: err}
		}()
	}
	var (
		round pollRound
		named struct {
			id, addr string
			term     uint64
		}
	)
	said := map[string]string{}
	legacy := map[string]bool{}
	notLeader := map[string]bool{} // replica ids that answered without leading
	take := func(id, addr string) (string, pollRound) {
		r.mu.Lock()
		r.leaderID, r.leader = id, addr
		r.mu.Unlock()
		return addr, pollRound{}
	}
	for range addrs {
		a := <-answers
		switch {
		case status.Code(a.err) == codes.Unimplemented:
			legacy[a.addr] = true
			said[a.addr] = "no cluster service"
		case a.err != nil:
			said[a.addr] = statusText(a.err)
		default:
			r.mu.Lock()
			r.observeMembersLocked(a.st)
			r.mu.Unlock()
			id, addr := leaderOf(a.addr, a.st)
			if id != "" && id == a.st.GetReplicaId() {
				return take(id, addr)
			}
			notLeader[a.st.GetReplicaId()] = true
			if addr == "" {
				said[a.addr] = "knows no leader"
				if n := a.st.GetFormingExpect(); n > 0 {
					said[a.addr] = fmt.Sprintf("the cluster is still forming (%d of %d replicas)", a.st.GetFormingSeen(), n)
				}
				round.noLeader = true
				continue
			}
			said[a.addr] = "names " + id
			if named.addr == "" || a.st.GetTerm() > named.term {
				named.id, named.addr, named.term = id, addr, a.st.GetTerm()
			}
		}
	}
	if named.addr != "" {
		if !notLeader[named.id] {
			return take(named.id, named.addr)
		}
		round.noLeader = true
	}
	// Only upstream servers answered: the first one given is the leader.
	for _, addr := range addrs {
		if legacy[addr] {
			r.mu.Lock()
			r.legacy[addr] = true
			r.leader, r.leaderID = addr, ""
			r.mu.Unlock()
			return addr, pollRound{}
		}
	}
	for _, addr := range addrs {
		round.said = append(round.said, fmt.Sprintf("%s (%s)", addr, said[addr]))
	}
	return "", round
}

// ownerInterceptors declare owner on every call and stream of a
// connection, so that updates over the Ankaios streams carry it too.
func ownerInterceptors(owner string) []grpc.DialOption {
	return []grpc.DialOption{
		grpc.WithChainUnaryInterceptor(func(ctx context.Context, method string, req, reply any, cc *grpc.ClientConn, invoker grpc.UnaryInvoker, opts ...grpc.CallOption) error {
			return invoker(wire.WithOwner(ctx, owner), method, req, reply, cc, opts...)
		}),
		grpc.WithChainStreamInterceptor(func(ctx context.Context, desc *grpc.StreamDesc, cc *grpc.ClientConn, method string, streamer grpc.Streamer, opts ...grpc.CallOption) (grpc.ClientStream, error) {
			return streamer(wire.WithOwner(ctx, owner), desc, cc, method, opts...)
		}),
	}
}
