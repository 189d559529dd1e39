package cluster

import (
	"errors"
	"fmt"
	"io"
	"net"
	"sync"
	"sync/atomic"
	"time"

	"github.com/hashicorp/go-hclog"
	"github.com/hashicorp/raft"

	"github.com/grapnel-io/grapnel/internal/clock"
	"github.com/grapnel-io/grapnel/internal/connlimit"
)

// tcpStreamLayer is Raft's plain TCP stream layer over a listener we bind
// ourselves, so tests can wrap it (Config.RaftStreamLayer).
type tcpStreamLayer struct {
	ln        net.Listener
	advertise net.Addr
}

func (l *tcpStreamLayer) Accept() (net.Conn, error) { return l.ln.Accept() }
func (l *tcpStreamLayer) Close() error              { return l.ln.Close() }
func (l *tcpStreamLayer) Addr() net.Addr            { return l.advertise }

func (l *tcpStreamLayer) Dial(address raft.ServerAddress, timeout time.Duration) (net.Conn, error) {
	return net.DialTimeout("tcp", string(address), timeout)
}

// raftNet is the Raft transport and the layers under it that the node
// keeps.
type raftNet struct {
	nt    *raft.NetworkTransport
	layer *closingLayer
	// tls speaks mutual TLS on the port; nil in the insecure mode.
	tls *tlsLayer
	// conns caps the connections the port accepts.
	conns *connlimit.Listener
}

// newRaftTransport binds RaftAddress and builds the network transport,
// through cfg.RaftStreamLayer when set.
// With cfg.RaftTLS the layer speaks mutual TLS 1.3 (tlsLayer), returned
// so the node can hand it the Raft configuration. The port holds at most
// cfg.RaftConnLimits connections (internal/connlimit): a peer without a
// replica certificate holds one for at most raftHandshakeTimeout, and a
// flood of them from a few sources cannot take the descriptors Raft
// needs for its peers' connections and its log.
func newRaftTransport(cfg Config, logger hclog.Logger) (raftNet, error) {
	raw, err := net.Listen("tcp", cfg.RaftAddress)
	if err != nil {
		return raftNet{}, fmt.Errorf("cluster: field RaftAddress: listen on %s: %w", cfg.RaftAddress, err)
	}
	adv, ok := raw.Addr().(*net.TCPAddr)
	if !ok || adv.IP.IsUnspecified() {
		raw.Close()
		return raftNet{}, fmt.Errorf("cluster: field RaftAddress: %q is not advertisable; give the address peers reach this replica on", cfg.RaftAddress)
	}
	ln := connlimit.Wrap(raw, connlimit.Config{Name: "raft", Limits: cfg.RaftConnLimits, Logger: logger, Clock: cfg.Clock})
	var layer raft.StreamLayer = &tcpStreamLayer{ln: ln, advertise: adv}
	if cfg.RaftStreamLayer != nil {
		layer = cfg.RaftStreamLayer(ln, adv)
	}
	var tl *tlsLayer
	if cfg.RaftTLS != nil {
		tl = newTLSLayer(layer, cfg.RaftTLS, logger, cfg.Now)
		if l, ok := cfg.FSM.(RemovalLedger); ok {
			tl.revoked = l.RevokedCert
		}
		layer = tl
	}
	cl := newClosingLayer(layer)
	return raftNet{nt: raft.NewNetworkTransportWithConfig(&raft.NetworkTransportConfig{
		Stream: cl, MaxPool: raftPoolPerPeer, Timeout: 10 * time.Second, Logger: logger,
	}), layer: cl, tls: tl, conns: ln}, nil
}

// raftPoolPerPeer is how many idle outgoing connections the transport
// keeps to each peer. Each costs hashicorp/raft a 256 KiB write buffer
// here and a 256 KiB read buffer and a goroutine on the peer, for as
// long as it stays in the pool. One is all a steady cluster reuses: the
// leader's heartbeats to a follower take turns on one connection (its
// pipelined AppendEntries hold their own, outside the pool), and a
// candidate asks each peer for its pre-vote and then its vote one after
// the other. A second RPC to the same peer while one is under way (a
// vote while a slow pre-vote is still out; a snapshot install; an
// AppendEntries while the pipeline restarts) dials a connection, which
// is closed when it is done instead of being kept. With 3, the
// elections at a cluster's start left each replica holding up
// to 3 connections to every peer: about 3 MiB of buffers per replica that
// sat idle from then on.
const raftPoolPerPeer = 1

// closingLayer closes every accepted and every dialled connection when the
// layer closes, and lets Shutdown wait until the transport's goroutine
// serving each accepted one has returned. Closing the dialled ones ends
// RPCs this replica is waiting on: a heartbeat to a peer that stopped
// answering otherwise held Raft's shutdown until the I/O timeout. raft's NetworkTransport.Close only closes the listener:
// those goroutines would stay blocked on their read until the peer hangs
// up, which a live peer never does; and one may be handling a heartbeat,
// which hashicorp/raft processes right there, writing the term to the
// stable store: closing the store under it panics.
type closingLayer struct {
	raft.StreamLayer
	mu       sync.Mutex
	closed   bool
	conns    map[*acceptedConn]struct{}
	dialed   map[*dialedConn]struct{}
	handlers sync.WaitGroup
	// ended, when set, is told that an accepted connection ended from
	// the far side, and the replica id of that side when known
	// (fastfail.go).
	ended atomic.Pointer[func(peer string)]
	// heard, when set, is told that bytes arrived on an accepted
	// connection (fastfail.go).
	heard atomic.Pointer[func()]
}

func newClosingLayer(l raft.StreamLayer) *closingLayer {
	return &closingLayer{StreamLayer: l, conns: map[*acceptedConn]struct{}{}, dialed: map[*dialedConn]struct{}{}}
}

// Dial dials through the wrapped layer and tracks the connection until it
// is closed.
func (l *closingLayer) Dial(address raft.ServerAddress, timeout time.Duration) (net.Conn, error) {
	c, err := l.StreamLayer.Dial(address, timeout)
	if err != nil {
		return nil, err
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.closed {
		c.Close()
		return nil, net.ErrClosed
	}
	dc := &dialedConn{Conn: c, layer: l}
	l.dialed[dc] = struct{}{}
	return dc, nil
}

func (l *closingLayer) Accept() (net.Conn, error) {
	c, err := l.StreamLayer.Accept()
	if err != nil {
		return nil, err
	}
	ac := &acceptedConn{Conn: c, layer: l}
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.closed {
		c.Close()
		return nil, net.ErrClosed
	}
	l.conns[ac] = struct{}{}
	l.handlers.Add(1)
	return ac, nil
}

func (l *closingLayer) Close() error {
	err := l.StreamLayer.Close()
	l.mu.Lock()
	l.closed = true
	conns := make([]net.Conn, 0, len(l.conns)+len(l.dialed))
	for c := range l.conns {
		conns = append(conns, c.Conn)
	}
	for c := range l.dialed {
		conns = append(conns, c.Conn)
	}
	l.mu.Unlock()
	for _, c := range conns {
		closeRaw(c)
	}
	return err
}

// closeRaw closes c's network connection. A TLS connection's own Close
// first writes a close_notify alert, which waits up to 5 s on a peer that
// stopped reading; shutting down must not. Its owner's later Close then
// fails at once.
func closeRaw(c net.Conn) {
	if t, ok := c.(interface{ NetConn() net.Conn }); ok {
		t.NetConn().Close()
		return
	}
	c.Close()
}

// wait blocks until every accepted connection has been closed by the
// goroutine serving it, that is until those goroutines are done with it.
func (l *closingLayer) wait() { l.handlers.Wait() }

// acceptedConn forgets itself in its layer when closed, tells the
// layer's ended when the far side ends it, and answers the fast
// failover's insecure probe.
type acceptedConn struct {
	net.Conn
	layer *closingLayer
	once  sync.Once
	gone  atomic.Bool
	read  bool // owned by the one goroutine that reads (the transport's)
}

func (c *acceptedConn) Read(b []byte) (int, error) {
	n, err := c.Conn.Read(b)
	if !c.read {
		c.read = true
		if n == 1 && b[0] == probeByte {
			// A follower asks whether this process runs (fastfail.go):
			// it does; the connection ends as an idle one would.
			_, _ = c.Conn.Write(b[:1])
			c.gone.Store(true)
			return 0, io.EOF
		}
	}
	if n > 0 {
		if f := c.layer.heard.Load(); f != nil {
			(*f)()
		}
	}
	if err != nil && peerClosed(err) && c.gone.CompareAndSwap(false, true) {
		if f := c.layer.ended.Load(); f != nil {
			(*f)(peerReplica(c.Conn))
		}
	}
	return n, err
}

func (c *acceptedConn) Close() error {
	err := c.Conn.Close()
	c.once.Do(func() {
		c.layer.mu.Lock()
		delete(c.layer.conns, c)
		c.layer.mu.Unlock()
		c.layer.handlers.Done()
	})
	return err
}

// dialedConn forgets itself in its layer when closed.
type dialedConn struct {
	net.Conn
	layer *closingLayer
}

func (c *dialedConn) Close() error {
	c.layer.mu.Lock()
	delete(c.layer.dialed, c)
	c.layer.mu.Unlock()
	return c.Conn.Close()
}

// contactTransport is the Raft transport with one addition: it records the
// answer to every AppendEntries RPC this replica sends. That is how the
// leader knows each follower's health, because hashicorp/raft v1.7.3 keeps
// its per-follower replication state private (Stats' last_contact is the
// follower's view of the leader, and FailedHeartbeatObservation only
// reports failures). The leader heartbeats every follower every
// HeartbeatTimeout/10–/5 through AppendEntries, and each answer carries the
// follower's term and last log index, so the record is at most one
// heartbeat old: the time of the last successful answer is the last
// contact, the leader's last index minus the answer's LastLog is how far
// the follower trails. Pipelined replication goes through
// AppendEntriesPipeline, untouched. Embedding keeps the optional
// interfaces (pre-vote, close) of the network transport.
type contactTransport struct {
	*raft.NetworkTransport
	contacts *contactTracker
	// stallLimit bounds one pipelined send; see watchedPipeline.
	stallLimit time.Duration
	clock      clock.Clock // runs the watchdog; nil is the system clock
	// checked, when set, is what Raft consumes instead of the network
	// transport's RPCs (see entryCheck).
	checked *entryCheck
	// storage, once it failed, stops this replica's own vote and pre-vote
	// requests: it cannot win an election (storage.go), so asking only
	// makes the others vote in a term nobody wins.
	storage *storageGuard
	// hold, while active, stops them too (votehold.go).
	hold *holdState
}

// errHolding is the error of this replica's own vote requests while it
// holds its vote.
var errHolding = errors.New("this replica holds its vote until its log has caught up")

// RequestVote asks target for its vote, unless this replica's storage
// failed.
func (t *contactTransport) RequestVote(id raft.ServerID, target raft.ServerAddress,
	args *raft.RequestVoteRequest, resp *raft.RequestVoteResponse) error {
	if err := t.storage.refusal("ask for a vote"); err != nil {
		return err
	}
	if t.hold.active() {
		return errHolding
	}
	return t.NetworkTransport.RequestVote(id, target, args, resp)
}

// RequestPreVote asks target for its pre-vote, unless this replica's
// storage failed.
func (t *contactTransport) RequestPreVote(id raft.ServerID, target raft.ServerAddress,
	args *raft.RequestPreVoteRequest, resp *raft.RequestPreVoteResponse) error {
	if err := t.storage.refusal("ask for a pre-vote"); err != nil {
		return err
	}
	if t.hold.active() {
		return errHolding
	}
	return t.NetworkTransport.RequestPreVote(id, target, args, resp)
}

// Consumer is the network transport's RPCs, through the entry check when
// there is one.
func (t *contactTransport) Consumer() <-chan raft.RPC {
	if t.checked != nil {
		return t.checked.out
	}
	return t.NetworkTransport.Consumer()
}

// AppendEntriesPipeline wraps raft's pipeline in a watchdog.
func (t *contactTransport) AppendEntriesPipeline(id raft.ServerID, target raft.ServerAddress) (raft.AppendPipeline, error) {
	p, err := t.NetworkTransport.AppendEntriesPipeline(id, target)
	if err != nil {
		return nil, err
	}
	return &watchedPipeline{AppendPipeline: p, limit: t.stallLimit, clock: t.clock}, nil
}

// watchedPipeline closes the pipeline when one send blocks longer than
// limit. hashicorp/raft v1.7.3 can deadlock there: with the default two
// RPCs in flight the pipeline's channels are unbuffered, and when the
// response decoder stops (a follower answered with a newer term or a log
// mismatch) one more send can park forever while the transport's decoder
// parks handing back the previous response; replication to that follower
// then stops for good and Raft's Shutdown hangs (the same analysis as
// grafana/pyroscope#5518, which disabled pipelining instead). Closing the
// pipeline fails the send, and Raft falls back to plain AppendEntries and
// pipelines again later. A healthy send waits at most one round trip plus
// the follower's disk write, far below the limit.
type watchedPipeline struct {
	raft.AppendPipeline
	limit time.Duration
	clock clock.Clock // nil is the system clock
}

func (p *watchedPipeline) AppendEntries(args *raft.AppendEntriesRequest, resp *raft.AppendEntriesResponse) (raft.AppendFuture, error) {
	clk := p.clock
	if clk == nil {
		clk = clock.Real()
	}
	watchdog := clk.AfterFunc(p.limit, func() { _ = p.AppendPipeline.Close() })
	defer watchdog.Stop()
	return p.AppendPipeline.AppendEntries(args, resp)
}

func (t *contactTransport) AppendEntries(id raft.ServerID, target raft.ServerAddress,
	args *raft.AppendEntriesRequest, resp *raft.AppendEntriesResponse) error {
	err := t.NetworkTransport.AppendEntries(id, target, args, resp)
	if err == nil {
		t.contacts.record(string(id), resp.Term, resp.LastLog)
	}
	return err
}

// contact is the latest successful AppendEntries answer from one peer.
type contact struct {
	At      time.Time
	Term    uint64
	LastLog uint64
}

// contactTracker holds the latest answer per peer.
type contactTracker struct {
	now   func() time.Time
	mu    sync.Mutex
	peers map[string]contact
}

func newContactTracker(now func() time.Time) *contactTracker {
	return &contactTracker{now: now, peers: map[string]contact{}}
}

func (c *contactTracker) record(id string, term, lastLog uint64) {
	at := c.now()
	c.mu.Lock()
	c.peers[id] = contact{At: at, Term: term, LastLog: lastLog}
	c.mu.Unlock()
}

func (c *contactTracker) get(id string) (contact, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	v, ok := c.peers[id]
	return v, ok
}
