package cluster

import (
	"fmt"
	"time"

	"github.com/hashicorp/raft"

	"github.com/grapnel-io/grapnel/internal/clock"
	"github.com/grapnel-io/grapnel/internal/errs"
)

// Leave takes this replica out of the cluster gracefully: a leader first
// hands leadership to the most up-to-date voter; then the replica
// broadcasts its leave in gossip and stops gossiping, and the leader
// removes it from the Raft configuration at once. Leave waits until this
// replica is out of the configuration, or until timeout. Raft keeps
// running: call Shutdown afterwards.
//
// Without gossip nobody would hear the leave, so a leader removes itself
// instead (Raft steps it down once that commits) and a follower cannot
// leave (remove it from the leader with RemoveReplica).
func (n *Node) Leave(timeout time.Duration) error {
	deadline := n.cfg.Clock.Now().Add(timeout)
	cfg, err := n.configuration()
	if err != nil {
		return err
	}
	self, others := inConfiguration(cfg, n.cfg.ID), len(cfg.Servers)-1
	if !self {
		others = len(cfg.Servers)
	}
	if self && others > 0 {
		if n.IsLeader() {
			if err := n.leaveLeadership(cfg, clock.Until(n.cfg.Clock, deadline)); err != nil {
				return err
			}
		} else if n.gossip == nil {
			return fmt.Errorf("%w: without gossip a follower cannot announce its leave; remove it on the leader", errs.ErrNotLeader)
		}
	}
	if n.gossip != nil {
		if err := n.gossip.leave(max(clock.Until(n.cfg.Clock, deadline), time.Millisecond)); err != nil {
			n.logger.Warn("leave broadcast not confirmed", "error", err)
		}
		n.feed.Notify()
	}
	if !self || others == 0 {
		return nil
	}
	return n.waitOutOfConfig(deadline)
}

// leaveLeadership hands leadership over before leaving; when that fails,
// or without gossip, the leader removes itself, which is equally safe:
// Raft steps it down once the smaller configuration commits.
func (n *Node) leaveLeadership(cfg raft.Configuration, timeout time.Duration) error {
	voters := 0
	for _, s := range cfg.Servers {
		if s.Suffrage == raft.Voter && string(s.ID) != n.cfg.ID {
			voters++
		}
	}
	if voters > 0 && n.gossip != nil {
		err := n.transfer("", n.raft.LeadershipTransfer)
		if err == nil {
			return nil
		}
		n.logger.Warn("leadership transfer before leave failed; removing self instead", "error", err)
	}
	if voters == 0 {
		return fmt.Errorf("%w: this replica is the only voter; its non-voters would be left without a cluster", errs.ErrQuorum)
	}
	return FoldRaftError(n.raft.RemoveServer(raft.ServerID(n.cfg.ID), 0, timeout).Error())
}

// waitOutOfConfig polls the local configuration, and wakes on changes,
// until this replica is no longer in it.
func (n *Node) waitOutOfConfig(deadline time.Time) error {
	changes, cancel := n.feed.Subscribe()
	defer cancel()
	tick := clock.NewTicker(n.cfg.Clock, 50*time.Millisecond)
	defer tick.Stop()
	timer := clock.NewTimer(n.cfg.Clock, clock.Until(n.cfg.Clock, deadline))
	defer timer.Stop()
	for {
		cfg, err := n.configuration()
		if err == nil && !inConfiguration(cfg, n.cfg.ID) {
			return nil
		}
		select {
		case <-changes:
		case <-tick.C:
		case <-timer.C:
			return ErrLeaveTimeout
		case <-n.shutdownCh:
			return raft.ErrRaftShutdown
		}
	}
}

func inConfiguration(cfg raft.Configuration, id string) bool {
	for _, s := range cfg.Servers {
		if string(s.ID) == id {
			return true
		}
	}
	return false
}
