package cluster

import (
	"errors"
	"fmt"
	"net"
	"strconv"
	"sync"
	"time"

	"github.com/hashicorp/memberlist"
	"github.com/hashicorp/raft"

	"github.com/grapnel-io/grapnel/internal/errs"
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
// The run of the replica that gossip sees alive is remembered, so the
// reconciler does not add that run straight back; a later run under the
// same id (a restart, or a fresh replica on a wiped disk) is re-added as
// soon as the removal has committed (refuseRemoved).
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
	var run uint64
	p, alive := n.peers.get(id)
	alive = alive && p.GossipStatus == StatusAlive
	if alive {
		run = p.Incarnation
		n.removed.add(id, removedRun{incarnation: run})
	}
	f := n.raft.RemoveServer(raft.ServerID(id), 0, timeout)
	err = f.Error()
	switch {
	case err == nil:
		if alive {
			n.removed.add(id, removedRun{incarnation: run, index: f.Index()})
		}
		return false, nil
	case errors.Is(err, raft.ErrLeadershipLost), errors.Is(err, raft.ErrRaftShutdown):
		return false, fmt.Errorf("%w: leadership was lost while removing %q; the removal may still commit: run the removal again (it is idempotent)", errs.ErrOutcomeUnknown, id)
	}
	return false, FoldRaftError(err)
}

// removedRun is an operator's removal of one run of a replica.
type removedRun struct {
	// incarnation is the run gossip saw alive when it was removed (0:
	// the replica announced none).
	incarnation uint64
	// index is the removal's Raft index, 0 until RemoveServer answered
	// (and for good when its outcome was unknown).
	index uint64
}

// removedSet remembers replicas an operator removed while gossip still saw
// them alive, with the run that was removed, so the reconciler does not
// add that run straight back. A later run is not held back, and gossip
// seeing the replica die or leave clears the record. It lives in the
// memory of the leader that removed the replica only.
type removedSet struct {
	mu  sync.Mutex
	ids map[string]removedRun
}

func newRemovedSet() *removedSet { return &removedSet{ids: map[string]removedRun{}} }

func (s *removedSet) add(id string, r removedRun) {
	s.mu.Lock()
	s.ids[id] = r
	s.mu.Unlock()
}

func (s *removedSet) get(id string) (removedRun, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	r, ok := s.ids[id]
	return r, ok
}

func (s *removedSet) forget(id string) {
	s.mu.Lock()
	delete(s.ids, id)
	s.mu.Unlock()
}

// refuseRemoved says whether the reconciler keeps the alive gossip server
// p, missing from the configuration, out because an operator removed it:
// the same run stays out; a later run waits only until the removal has
// committed (Raft would not take the next configuration change earlier
// anyway) and is then added, and its record dropped. A refused replica is
// told why, once per reason and term, so it does not loop silently.
func (r *reconciler) refuseRemoved(id string, p peerInfo) bool {
	n := r.n
	rec, ok := n.removed.get(id)
	if !ok {
		return false
	}
	sameRun := rec.incarnation == 0 || p.Incarnation == rec.incarnation
	switch {
	case sameRun:
		r.refuse(p, fmt.Sprintf("not re-adding replica %s: an operator removed this run of it (incarnation %d); "+
			"it joins again once restarted", id, rec.incarnation))
		return true
	case !n.removalCommitted(rec):
		r.refuse(p, fmt.Sprintf("not adding replica %s yet: the removal of its earlier run (incarnation %d) has not committed; "+
			"it is added once it has", id, rec.incarnation))
		return true
	}
	n.removed.forget(id)
	n.logger.Info("adding a new run of a removed replica", "id", id, "removed_incarnation", rec.incarnation,
		"incarnation", p.Incarnation, "removal_index", rec.index)
	return false
}

// removalCommitted says the removal rec has committed: its own index when
// RemoveServer answered; otherwise (still under way, or its outcome was
// unknown) the latest configuration's, which lacks the replica (or the
// reconciler would not ask) and so holds the removal.
func (n *Node) removalCommitted(rec removedRun) bool {
	if rec.index != 0 {
		return n.raft.AppliedIndex() >= rec.index
	}
	f := n.raft.GetConfiguration()
	return f.Error() == nil && n.raft.AppliedIndex() >= f.Index()
}

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
