package cluster

import (
	"errors"
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
// leader takes 200 to 600 ms by default, most of a failover. Shorter
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
// Config.DisableFastFailover turns it off, to compare.

// leaderProbeTimeout bounds the dial that asks whether the leader's Raft
// port still takes connections. A refusal comes back within a round trip;
// a stopped process's port accepts into its backlog and then says
// nothing, and so does a cut link, and neither must count.
const leaderProbeTimeout = 50 * time.Millisecond

// fastFailover notices that the leader's process is gone and lets the
// successor stand for election. It runs in one goroutine of the node
// (run), woken by the stream layer when an accepted connection ends.
type fastFailover struct {
	off  bool
	kick chan struct{}
	// probes counts the dials to the leader's Raft port after its
	// connection ended; refused those it refused (the leader's process
	// was gone); campaigns the elections this replica started as the
	// successor.
	probes, refused, campaigns atomic.Uint64
}

func newFastFailover(off bool) *fastFailover {
	return &fastFailover{off: off, kick: make(chan struct{}, 1)}
}

// FastFailoverStats counts what the fast failover did on this replica.
type FastFailoverStats struct {
	// Probes: dials to the leader's Raft port after a connection from it
	// ended. Refused: those the port refused, its process being gone.
	Probes, Refused uint64
	// Campaigns: elections this replica started at once as the dead
	// leader's successor.
	Campaigns uint64
}

// FastFailover says what the fast failover did on this replica so far.
func (n *Node) FastFailover() FastFailoverStats {
	f := n.fast
	refused := f.refused.Load() // first: a probe is counted before its refusal
	return FastFailoverStats{Probes: f.probes.Load(), Refused: refused, Campaigns: f.campaigns.Load()}
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

// fastFailoverLoop checks the leader whenever a connection from it ended,
// until shutdown.
func (n *Node) fastFailoverLoop() {
	defer n.wg.Done()
	for {
		select {
		case <-n.fast.kick:
			n.checkLeaderGone()
		case <-n.shutdownCh:
			return
		}
	}
}

// checkLeaderGone probes the leader this follower knows and, when its
// process is gone and this replica is its successor, stands for election.
func (n *Node) checkLeaderGone() {
	if n.raft.State() != raft.Follower {
		return
	}
	addr, leader := n.raft.LeaderWithID()
	if leader == "" || string(leader) == n.cfg.ID {
		return
	}
	term := n.raft.CurrentTerm()
	if !n.leaderRefuses(addr) {
		return
	}
	cfg, err := n.configuration()
	if err != nil {
		return
	}
	succ := successor(cfg, leader)
	n.logger.Info("the leader's Raft port refuses connections: its process is gone", "leader", leader, "term", term, "successor", succ)
	if succ != raft.ServerID(n.cfg.ID) {
		return // the successor stands; this replica grants its vote
	}
	// Stand only while nothing changed: still a follower of the dead
	// leader's term without a new leader.
	if n.storage.Fault() != nil || n.hold.active() || n.raft.State() != raft.Follower || n.raft.CurrentTerm() != term {
		return
	}
	if _, id := n.raft.LeaderWithID(); id != "" && id != leader {
		return
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
		return
	}
	n.fast.campaigns.Add(1)
	n.logger.Info("standing for election at once: the leader's process is gone and this replica is its successor", "leader", leader, "term", term)
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

// leaderRefuses dials the leader's Raft port and says whether it refused
// the connection. A dial that was accepted and then reset (or ended)
// before the handshake completed met a process whose listener closed
// meanwhile, as a dying process's does: it asks again, at most twice.
func (n *Node) leaderRefuses(addr raft.ServerAddress) bool {
	n.fast.probes.Add(1)
	var err error
	for range 3 {
		err = n.dialLeader(addr)
		switch {
		case err == nil:
			return false
		case errors.Is(err, syscall.ECONNREFUSED):
			n.fast.refused.Add(1)
			return true
		case !peerClosed(err):
			n.logger.Debug("the leader's Raft port did not refuse a connection", "address", addr, "error", err)
			return false // it timed out or the link is cut: maybe slow, maybe cut off
		}
	}
	n.logger.Debug("the leader's Raft port kept resetting connections", "address", addr, "error", err)
	return false
}

// dialLeader connects to the leader's Raft port and closes the
// connection again, below the connection tracking. With TLS it completes
// the handshake without checking the peer or counting a failure
// (tlsLayer.probe): a live leader sees a replica come and go, nothing it
// logs or counts.
func (n *Node) dialLeader(addr raft.ServerAddress) error {
	if n.tls != nil {
		return n.tls.probe(addr, leaderProbeTimeout)
	}
	c, err := n.layer.StreamLayer.Dial(addr, leaderProbeTimeout)
	if err != nil {
		return err
	}
	return c.Close()
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
