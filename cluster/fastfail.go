package cluster

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"slices"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/hashicorp/raft"

	"github.com/grapnel-io/grapnel/internal/clock"
)

// Fast failover when the leader's process is gone (issue 32 point 5;
// docs/replication.md, "Timing").
//
// A follower checks every one to two heartbeat timeouts whether it heard
// the leader within one (hashicorp/raft runFollower), so noticing a dead
// leader takes 300 to 900 ms by default, most of a failover. Shorter
// timeouts would depose leaders that are merely slow. But when the
// leader's process dies (SIGKILL, a panic, the OOM killer) and its host
// lives, the host's kernel says so at once: every connection the leader
// held ends, and its Raft port refuses a new one (ECONNREFUSED). A leader
// that is frozen (SIGSTOP) or cut off gives neither: a stopped process's
// listener still accepts into its backlog, a cut link times out. So a
// refused dial to the leader, right after its connection to this replica
// ended, is proof that the leader's process is gone, which no timing is.
//
// Then one follower, the successor, stands for election at once: it
// sends itself the TimeoutNow a leader sends when it hands leadership
// over (through the way into Raft the transport's RPCs take, not the
// network). Raft makes the receiver a candidate that skips pre-vote and asks
// for votes with LeadershipTransfer set, which the other followers grant
// although they still know the old leader, if its log is as current as
// theirs (Raft's election safety is untouched: the vote checks the log as
// always). The successor is the next voter after the dead leader in id
// order, wrapping around: the configuration is replicated, so every
// follower that notices names the same one from what it holds, without a
// word between them, and exactly one stands; two would split the votes.
// The next one rather than the lowest, so that leaders that keep dying
// hand leadership round the voters instead of back and forth between two
// (each then restarting before its first snapshot, its log ever longer).
// Gossip's view of who is alive could name a better one but differs from
// member to member for seconds. A successor that is down too, or behind (refused
// by the others), or cannot stand (its storage failed, it holds its
// vote), leaves it to the normal timeouts, which run on unchanged.
//
// A leader that is stopped (SIGSTOP) or hung gives no such signal at
// once, but it cannot answer either. So the successor also looks at the
// leader whenever it has heard nothing from it for a heartbeat interval
// and a half (silentAfter), less than the heartbeat timeout after which
// Raft's own follower begins to doubt it: it dials the leader's Raft port
// and asks the process to answer (the TLS handshake, or one probe byte
// in the insecure mode). A port that takes the connection while the
// process behind it says nothing within the probe's bound means the host
// and the link are up and the process is not running: the successor
// stands as above. This saves Raft's slow path: the follower's check at
// a random one to two timeouts, then the other followers refusing their
// vote until their own timers fire, then a second election timeout. A
// leader that answers is merely not heard (a cut link one way, a slow
// network) and is left to the timeouts, and so is one whose host or link
// does not answer at all: a replica cut off from the leader alone must
// not depose it. Only the successor probes, once per silence.
//
// Config.DisableFastFailover turns it off, to compare.

// leaderProbeTimeout bounds the dial that asks whether the leader's Raft
// port still takes connections. A refusal comes back within a round trip;
// a stopped process's port accepts into its backlog and then says
// nothing, and so does a cut link, and neither must count.
const leaderProbeTimeout = 50 * time.Millisecond

// probeByte is what the insecure probe sends: no Raft RPC type (those
// are 0 to 4), so a replica answers it with the same byte and closes
// (acceptedConn), and one that does not know it closes on it, as
// hashicorp/raft does on any unknown type. Either way its process ran.
const probeByte = 0xf7

// errNoAnswer means the leader's Raft port took the connection and the
// process behind it did not answer within the probe's bound.
var errNoAnswer = errors.New("the leader's Raft port took the connection but its process did not answer")

// probeResult is what a probe of the leader's Raft port found.
type probeResult int

const (
	leaderAnswers probeResult = iota // its process answered
	leaderGone                       // the port refused: the process is gone
	leaderFrozen                     // the port took the connection, the process never answered
	leaderUnknown                    // no connection: a cut link, a host that is down, a timeout
)

// fastFailover notices that the leader's process is gone and lets the
// successor stand for election. It runs in one goroutine of the node
// (run), woken by the stream layer when an accepted connection ends.
type fastFailover struct {
	off  bool
	kick chan struct{}
	// changed is poked when the leader or the configuration changed,
	// so that the replica that became the successor starts watching.
	changed chan struct{}
	// watching says whether this replica watches the leader as its
	// successor; silence fires after silentAfter without a word from it.
	watching atomic.Bool
	silence  *clock.ChanTimer
	pushed   atomic.Int64 // when heard last pushed the timer back (Unix ns)
	// probes counts the dials to the leader's Raft port; refused those
	// it refused (the leader's process was gone); frozen those it took
	// while the process never answered; campaigns the elections this
	// replica started as the successor.
	probes, refused, frozen, campaigns atomic.Uint64
	// lastSilentProbe is when the successor last probed a silent leader
	// (owned by fastFailoverLoop).
	lastSilentProbe time.Time
}

// newFastFailover's silence timer fires at once: the loop's first look
// decides whether to watch.
func newFastFailover(off bool, clk clock.Clock) *fastFailover {
	return &fastFailover{off: off, kick: make(chan struct{}, 1), changed: make(chan struct{}, 1), silence: clock.NewTimer(clk, 0)}
}

// leaderChanged tells the fast failover that the leader or the
// configuration changed.
func (f *fastFailover) leaderChanged() {
	select {
	case f.changed <- struct{}{}:
	default:
	}
}

// FastFailoverStats counts what the fast failover did on this replica.
type FastFailoverStats struct {
	// Probes: dials to the leader's Raft port, after a connection from
	// it ended or a heartbeat timeout without a word from it. Refused:
	// those the port refused, its process being gone. Frozen: those the
	// port took while the process did not answer (stopped or hung).
	Probes, Refused, Frozen uint64
	// Campaigns: elections this replica started at once as the dead
	// leader's successor.
	Campaigns uint64
}

// FastFailover says what the fast failover did on this replica so far.
func (n *Node) FastFailover() FastFailoverStats {
	f := n.fast
	// The outcomes first: a probe is counted before them.
	refused, frozen := f.refused.Load(), f.frozen.Load()
	return FastFailoverStats{Probes: f.probes.Load(), Refused: refused, Frozen: frozen, Campaigns: f.campaigns.Load()}
}

// connEnded is told by the stream layer that a connection this replica
// accepted ended from the far side, from replica peer when known (the
// TLS certificate names it; "" without TLS). Only the leader's matter.
func (n *Node) connEnded(peer string) {
	if n.fast.off || n.raft.State() != raft.Follower {
		return
	}
	if _, id := n.raft.LeaderWithID(); id == "" || (peer != "" && string(id) != peer) {
		return
	}
	select {
	case n.fast.kick <- struct{}{}:
	default:
	}
}

// fastFailoverLoop checks the leader whenever a connection from it ended
// or, on its successor, it was silent for silentAfter, until shutdown.
func (n *Node) fastFailoverLoop() {
	defer n.wg.Done()
	f := n.fast
	defer f.silence.Stop()
	for {
		select {
		case <-f.kick:
			n.checkLeader(false)
		case <-f.silence.C:
			n.watchLeader()
		case <-f.changed:
			n.watchLeader()
		case <-n.shutdownCh:
			return
		}
	}
}

// silentAfter is how long the successor lets the leader be silent
// before it probes it: one and a half heartbeat intervals (about 190 ms
// by default), so that the probe's answer (at most leaderProbeTimeout
// later) is in before Raft's own follower timer can fire, a heartbeat
// timeout after the last contact at the earliest, then at random. A
// successor whose own timer fired first is a candidate that asks for
// pre-votes, which the other followers refuse while they still know the
// leader: the slow path (370 to 500 ms in the freeze bench with the
// 200 ms timeout, where probing after 200 ms of silence took it once in
// eight). A heartbeat more than 60 ms late costs a probe of a leader that
// answers, nothing more.
func (t Timing) silentAfter() time.Duration {
	return max(t.HeartbeatTimeout/2, t.HeartbeatInterval*3/2)
}

// heard is told by the stream layer that bytes arrived on a connection
// a peer opened to this replica: on a follower, mostly the leader's
// heartbeats and entries. While this follower watches the leader, each
// pushes its silence timer back, so that the timer fires only after
// silentAfter without a word, and an idle follower pays no wake-up for
// the watch (a timer that looked 130 ms after each last contact cost
// each follower 0.35 % of a core at idle; one on the heartbeat slots
// 0.2 %).
//
// Under load the reads come thousands a second, and a reset allocates
// a timer: one within a sixteenth of silentAfter of the last is
// skipped, since a timer that fires that much early only looks, finds
// the leader heard, and waits again.
func (n *Node) heard() {
	f := n.fast
	if !f.watching.Load() {
		return
	}
	now := n.cfg.Clock.Now().UnixNano()
	after := n.timing.silentAfter()
	if last := f.pushed.Load(); now-last < int64(after/16) {
		return
	}
	f.pushed.Store(now)
	f.silence.Reset(after)
}

// watchLeader decides, when the silence timer fired or the leader or
// the configuration changed, whether this replica watches the leader
// (it is a follower), probes a leader silent for silentAfter when it is
// the leader's successor (once per silence), and arms the timer for the
// next look.
func (n *Node) watchLeader() {
	f := n.fast
	_, leader := n.raft.LeaderWithID()
	// Every follower watches, and checkLeader lets only the successor
	// probe: a follower learns a new configuration from the log, with
	// no event to say it became the successor, and the watch costs no
	// wake-up while the leader speaks.
	watch := n.raft.State() == raft.Follower && leader != "" && string(leader) != n.cfg.ID
	f.watching.Store(watch)
	if !watch {
		f.silence.Stop()
		return
	}
	now := n.cfg.Clock.Now()
	after := n.timing.silentAfter()
	// Raft names the leader of its first AppendEntries (and tells the
	// observer) before it records the contact: a zero last contact is
	// one that is happening now.
	last := n.raft.LastContact()
	if last.IsZero() {
		last = now
	}
	quiet := now.Sub(last)
	if quiet < after {
		f.silence.Reset(after - quiet)
		return
	}
	// One probe per silence: a leader that answered is asked again once
	// it was heard since, or a heartbeat timeout later.
	again := last.After(f.lastSilentProbe) || now.Sub(f.lastSilentProbe) >= n.timing.HeartbeatTimeout
	if again && n.checkLeader(true) {
		f.lastSilentProbe = now
	}
	f.silence.Reset(n.timing.HeartbeatTimeout)
}

// checkLeader probes the leader this follower knows and, when its
// process is gone (or, with silent, stopped) and this replica is its
// successor, stands for election. silent says the leader said nothing
// for silentAfter; otherwise a connection from it ended. It says
// whether it probed.
func (n *Node) checkLeader(silent bool) bool {
	if n.raft.State() != raft.Follower {
		return false
	}
	addr, leader := n.raft.LeaderWithID()
	if leader == "" || string(leader) == n.cfg.ID {
		return false
	}
	term := n.raft.CurrentTerm()
	cfg, err := n.configuration()
	if err != nil {
		return false
	}
	succ := successor(cfg, leader)
	self := succ == raft.ServerID(n.cfg.ID)
	if silent && !self {
		return false // the successor looks; the others would only add probes
	}
	switch n.probeLeader(addr) {
	case leaderGone:
		n.logger.Info("the leader's Raft port refuses connections: its process is gone", "leader", leader, "term", term, "successor", succ)
	case leaderFrozen:
		if !silent {
			return true // it may yet speak: the heartbeat timeout decides
		}
		n.logger.Info("the leader said nothing for two heartbeats and its process does not answer: it is stopped or hung",
			"leader", leader, "term", term, "successor", succ)
	default:
		return true
	}
	if !self {
		return true // the successor stands; this replica grants its vote
	}
	// Stand only while nothing changed: still a follower of the
	// leader's term without a new leader.
	if n.storage.Fault() != nil || n.hold.active() || n.raft.State() != raft.Follower || n.raft.CurrentTerm() != term {
		return true
	}
	if _, id := n.raft.LeaderWithID(); id != "" && id != leader {
		return true
	}
	// A follower's pooled connections are those of its last election,
	// to peers that may have restarted since: a vote request on one of
	// them is lost (the kill bench saw it hang until the election timed
	// out), and this election, unlike a normal one, has no pre-vote
	// round to absorb that. Fresh ones cost a handshake each. CloseStreams
	// also ends the connections peers opened to this replica once each
	// has served its next RPC; those are the other followers' from their
	// last elections, which the same reasoning retires.
	n.transport.CloseStreams()
	if err := n.timeoutNowSelf(); err != nil {
		n.logger.Warn("could not stand for election after the leader's process died; the normal timeout will", "error", err)
		return true
	}
	n.fast.campaigns.Add(1)
	n.logger.Warn("standing for election at once: the leader's process is not running and this replica is its successor", "leader", leader, "term", term)
	return true
}

// timeoutNowSelf hands Raft the TimeoutNow a leader sends to the
// follower it hands leadership to, as if it came from the network, and
// waits for Raft to take it: no connection to itself, no handshake, no
// pooled connection kept for the next time.
func (n *Node) timeoutNowSelf() error {
	self := n.transport.LocalAddr()
	resp := make(chan raft.RPCResponse, 1)
	rpc := raft.RPC{Command: &raft.TimeoutNowRequest{RPCHeader: raft.RPCHeader{
		ProtocolVersion: raft.ProtocolVersionMax, ID: []byte(n.cfg.ID), Addr: []byte(self),
	}}, RespChan: resp}
	// Raft takes an RPC within one turn of its loop; a loop stuck for a
	// heartbeat timeout has bigger problems, and the timeouts take over.
	timer := clock.NewTimer(n.cfg.Clock, n.timing.HeartbeatTimeout)
	defer timer.Stop()
	select {
	case n.entries.own <- rpc:
	case <-timer.C:
		return errors.New("raft did not take the TimeoutNow request within a heartbeat timeout")
	case <-n.shutdownCh:
		return raft.ErrRaftShutdown
	}
	select {
	case r := <-resp:
		return r.Error
	case <-timer.C:
		return errors.New("raft did not answer the TimeoutNow request within a heartbeat timeout")
	case <-n.shutdownCh:
		return raft.ErrRaftShutdown
	}
}

// probeLeader dials the leader's Raft port and asks its process to
// answer. A dial that was accepted and then reset (or ended) before the
// process answered met a process whose listener closed meanwhile, as a
// dying process's does: it asks again, at most twice.
func (n *Node) probeLeader(addr raft.ServerAddress) probeResult {
	n.fast.probes.Add(1)
	var err error
	for range 3 {
		err = n.dialLeader(addr)
		switch {
		case err == nil:
			return leaderAnswers
		case errors.Is(err, syscall.ECONNREFUSED):
			n.fast.refused.Add(1)
			return leaderGone
		case errors.Is(err, errNoAnswer):
			n.fast.frozen.Add(1)
			return leaderFrozen
		case !peerClosed(err):
			n.logger.Debug("the leader's Raft port could not be reached", "address", addr, "error", err)
			return leaderUnknown // it timed out or the link is cut: maybe slow, maybe cut off
		}
	}
	n.logger.Debug("the leader's Raft port kept resetting connections", "address", addr, "error", err)
	return leaderUnknown
}

// dialLeader connects to the leader's Raft port, asks its process to
// answer and closes the connection again, below the connection
// tracking: errNoAnswer when the port took the connection and the
// process said nothing within leaderProbeTimeout. With TLS the answer
// is the handshake, completed without checking the peer or counting a
// failure (tlsLayer.probe): a live leader sees a replica come and go,
// nothing it logs or counts. Without, it is the probe byte.
func (n *Node) dialLeader(addr raft.ServerAddress) error {
	if n.tls != nil {
		return n.tls.probe(addr, leaderProbeTimeout)
	}
	c, err := n.layer.StreamLayer.Dial(addr, leaderProbeTimeout)
	if err != nil {
		return err
	}
	defer c.Close()
	if err := c.SetDeadline(n.cfg.Clock.Now().Add(leaderProbeTimeout)); err != nil {
		return err
	}
	if _, err := c.Write([]byte{probeByte}); err != nil {
		return noAnswer(err)
	}
	var b [1]byte
	if _, err := c.Read(b[:]); err != nil && !errors.Is(err, io.EOF) {
		return noAnswer(err)
	}
	return nil
}

// noAnswer wraps a timeout of a probe whose connection was taken in
// errNoAnswer, and returns other errors as they are.
func noAnswer(err error) error {
	var ne net.Error
	if errors.As(err, &ne) && ne.Timeout() || errors.Is(err, context.DeadlineExceeded) {
		return fmt.Errorf("%w: %w", errNoAnswer, err)
	}
	return err
}

// successor is the voter that stands for election when leader's process
// is gone: the next voter after leader in id order, wrapping around (see
// the top of this file for why), or "" when there is none.
func successor(cfg raft.Configuration, leader raft.ServerID) raft.ServerID {
	var ids []raft.ServerID
	for _, s := range cfg.Servers {
		if s.Suffrage == raft.Voter && s.ID != leader {
			ids = append(ids, s.ID)
		}
	}
	if len(ids) == 0 {
		return ""
	}
	slices.Sort(ids)
	for _, id := range ids {
		if id > leader {
			return id
		}
	}
	return ids[0]
}

// peerClosed says whether a read error means the far side closed the
// connection (an end of stream or a reset), not this side.
func peerClosed(err error) bool {
	return errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) || errors.Is(err, syscall.ECONNRESET)
}

// peerReplica is the replica id the certificate of an accepted TLS
// connection names, "" when unknown (no TLS, no handshake yet).
func peerReplica(c net.Conn) string {
	t, ok := c.(*acceptedTLS)
	if !ok {
		return ""
	}
	chains := t.ConnectionState().VerifiedChains
	if len(chains) == 0 {
		return ""
	}
	id, err := replicaID(chains)
	if err != nil {
		return ""
	}
	return id
}
