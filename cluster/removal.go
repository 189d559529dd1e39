package cluster

import (
	"errors"
	"fmt"
	"net"
	"strconv"
	"time"

	"github.com/hashicorp/memberlist"
	"github.com/hashicorp/raft"

	"github.com/grapnel-io/grapnel/internal/errs"
	"github.com/grapnel-io/grapnel/state"
)

// RemoveReplica takes a replica out of the Raft configuration. Only the
// leader can; it refuses to remove itself (transfer leadership first, or
// let the replica leave) and refuses to remove a voter when the alive
// voters left would not be a majority.
//
// It is idempotent, so an operator may retry it blindly: an id that is not
// in the configuration answers already true and no error. When leadership
// is lost after the removal was proposed, the entry may still commit under
// the next leader: that answers errs.ErrOutcomeUnknown, and the retry on
// the next leader settles it either way.
//
// The run of the replica that gossip sees alive is recorded in the
// replicated state first (RemovalLedger), so that no leader adds that run
// straight back; a later run under the same id (a restart, or a fresh
// replica on a wiped disk) is added as soon as the removal has committed
// (refuseRemoved).
func (n *Node) RemoveReplica(id string, timeout time.Duration) (already bool, err error) {
	if !n.IsLeader() {
		return false, errs.ErrNotLeader
	}
	if id == n.cfg.ID {
		return false, fmt.Errorf("%w: the leader cannot remove itself; transfer leadership first", errs.ErrQuorum)
	}
	cfg, target, err := n.member(id)
	if errors.Is(err, errs.ErrUnknownReplica) {
		return true, nil
	}
	if err != nil {
		return false, err
	}
	if target.Suffrage == raft.Voter {
		voters, alive := 0, 0
		for _, s := range cfg.Servers {
			if s.Suffrage != raft.Voter || string(s.ID) == id {
				continue
			}
			voters++
			if n.seemsAlive(string(s.ID)) {
				alive++
			}
		}
		if alive*2 <= voters {
			return false, fmt.Errorf("%w: after removing %q only %d of %d voters would be alive", errs.ErrQuorum, id, alive, voters)
		}
	}
	// The record revokes the replica's certificates (with TLS) and keeps
	// the run gossip sees alive out.
	var run uint64
	if p, ok := n.peers.get(id); ok && p.GossipStatus == StatusAlive && p.Incarnation != 0 {
		run = p.Incarnation
	}
	// Revocations are written once the cluster version carries them;
	// before, the record is the previous release's (upgrade.go).
	var seen []state.ReplicaCert
	revoke := n.tls != nil && n.allows(state.ClusterVersionRevocation)
	if revoke {
		seen = n.tls.certsOf(id)
	}
	if run != 0 || revoke {
		if err := n.recordRemoval(id, run, false, seen, timeout); err != nil {
			return false, err
		}
	}
	err = n.raft.RemoveServer(raft.ServerID(id), 0, timeout).Error()
	if errors.Is(err, raft.ErrLeadershipLost) || errors.Is(err, raft.ErrRaftShutdown) {
		return false, fmt.Errorf("%w: leadership was lost while removing %q; the removal may still commit: run the removal again (it is idempotent)", errs.ErrOutcomeUnknown, id)
	}
	return false, FoldRaftError(err)
}

// RemovalLedger is the part of the state machine that keeps operators'
// removals of replica runs and the replicas' certificates (fsm.FSM
// implements it). The records are replicated, so that a leader elected
// after the removal keeps the removed run out, and every replica refuses
// the removed replica's certificates, as the one that removed it does.
type RemovalLedger interface {
	// RemovedRun is the recorded removal of replica id: the run's
	// incarnation and the index of the record.
	RemovedRun(id string) (incarnation, index uint64, ok bool)
	// RemovalEntry encodes the command that records the removal of run
	// incarnation of replica id (0: none known) and revokes its
	// certificates, those recorded and certs, at the leader's time nowMs;
	// or, with forget, drops the run's record.
	RemovalEntry(id string, incarnation uint64, forget bool, certs []state.ReplicaCert, nowMs int64) ([]byte, error)
	// RecordedCerts are the certificates recorded for replica id.
	RecordedCerts(id string) []state.ReplicaCert
	// CertificateEntry encodes the command that records certificate c of
	// replica id.
	CertificateEntry(id string, c state.ReplicaCert) ([]byte, error)
	// RevokedCert is the revocation of a certificate serial; it is read
	// at every Raft handshake and must not wait for the FSM's lock.
	RevokedCert(serial string) (state.RevokedCert, bool)
	// ClusterVersion is the replicated cluster version (upgrade.go),
	// read without the FSM's lock.
	ClusterVersion() uint32
}

func implementsLedger(f raft.FSM) bool {
	_, ok := f.(RemovalLedger)
	return ok
}

// recordRemoval commits the ledger's command for replica id.
func (n *Node) recordRemoval(id string, incarnation uint64, forget bool, certs []state.ReplicaCert, timeout time.Duration) error {
	var nowMs int64
	if n.allows(state.ClusterVersionRevocation) {
		nowMs = n.now().UnixMilli()
	}
	entry, err := n.ledger.RemovalEntry(id, incarnation, forget, certs, nowMs)
	if err != nil {
		return err
	}
	_, _, err = n.propose(entry, timeout)
	if errors.Is(err, raft.ErrLeadershipLost) || errors.Is(err, raft.ErrRaftShutdown) {
		return fmt.Errorf("%w: leadership was lost while recording the removal of %q (or its end); the configuration is unchanged: run it again (it is idempotent)", errs.ErrOutcomeUnknown, id)
	}
	return FoldRaftError(err)
}

// refuseRemoved says whether the reconciler keeps the alive gossip server
// p, missing from the configuration, out because an operator removed it:
// the removed run stays out; a later run waits only until the removal has
// committed (Raft would not take the next configuration change earlier
// anyway) and is then added. A refused replica is told why, once per
// reason and term, so it does not loop silently.
func (r *reconciler) refuseRemoved(id string, p peerInfo) bool {
	n := r.n
	run, index, ok := n.ledger.RemovedRun(id)
	switch {
	case !ok:
		return false
	case p.Incarnation == run:
		r.refuse(p, fmt.Sprintf("leader %s does not re-add replica %s: an operator removed this run of it (incarnation %d); "+
			"it joins again once restarted", n.cfg.ID, id, run))
		return true
	case !r.removalCommitted(id, index):
		r.refuse(p, fmt.Sprintf("leader %s does not add replica %s yet: the removal of its earlier run (incarnation %d) has not committed; "+
			"it is added once it has", n.cfg.ID, id, run))
		return true
	}
	return false
}

// removalCommitted says the removal of id recorded at index rec has
// committed. The reconciler asks only while the latest configuration
// lacks id, and nothing but the removal can have taken id out after the
// record (it is recorded only while id is a member): so once everything
// that was in the log when the reconciler read that configuration is
// applied, the removal is. Raft does not tell the configuration's own
// index (GetConfiguration leaves it 0), so the log's last index when the
// wait began stands for it.
func (r *reconciler) removalCommitted(id string, rec uint64) bool {
	w, ok := r.removals[id]
	if !ok || w.rec != rec {
		w = removalWait{rec: rec, last: r.n.raft.LastIndex()}
		r.removals[id] = w
	}
	return r.n.raft.AppliedIndex() >= w.last
}

// removalWait is the log index a new run of a removed replica waits for.
type removalWait struct{ rec, last uint64 }

// refuse logs why p is kept out and tells p, both once per reason.
func (r *reconciler) refuse(p peerInfo, why string) {
	if r.warned[p.ID] == why {
		return
	}
	r.warnOnce(p.ID, why)
	if g := r.n.gossip; g != nil {
		g.sendNotice(p, msgRefused, why)
	}
}

// msgRefused is the first byte of the user message a leader sends a
// replica it keeps out of the configuration; the reason follows.
const msgRefused = 2

// sendNotice sends p a user message in the background (memberlist's TCP
// send can block for its timeout); a lost notice only loses a log line.
func (g *gossip) sendNotice(p peerInfo, kind byte, text string) {
	host, port, err := net.SplitHostPort(p.GossipAddress)
	pn, perr := strconv.ParseUint(port, 10, 16)
	if err != nil || perr != nil || net.ParseIP(host) == nil {
		return
	}
	node := &memberlist.Node{Name: p.ID, Addr: net.ParseIP(host), Port: uint16(pn)}
	msg := append([]byte{kind}, text...)
	g.n.wg.Add(1)
	go func() {
		defer g.n.wg.Done()
		if err := g.ml.SendReliable(node, msg); err != nil {
			g.logger.Debug("notice not delivered", "to", p.ID, "error", err)
		}
	}()
}

// refusedNotice logs a leader's refusal to add this replica, once per
// reason, and keeps it for Refused.
func (n *Node) refusedNotice(why string) {
	if prev, _ := n.refused.Swap(why).(string); prev == why {
		return
	}
	n.logger.Error("the leader keeps this replica out of the cluster", "reason", why)
}

// Refused is the last reason a leader gave for keeping this replica out of
// the Raft configuration, "" when none did.
func (n *Node) Refused() string {
	s, _ := n.refused.Load().(string)
	return s
}

// Incarnation is this run's number, announced in gossip: a random number
// drawn at start, so two runs under the same id differ.
func (n *Node) Incarnation() uint64 { return n.incarnation }
