package cluster

import (
	"fmt"
	"time"
)

// leaderHeartbeatTimeout is the Raft heartbeat timeout a leader runs
// with. hashicorp/raft derives the heartbeat period from the node's own
// HeartbeatTimeout (a heartbeat every timeout/10 to /5), the same value
// a follower uses to decide the leader is gone, so the two cannot be set
// apart in its configuration. The leader reloads a longer timeout while
// it leads, which spaces its heartbeats to Timing.HeartbeatInterval, and
// puts the configured one back when it stops leading; followers keep the
// configured timeout, so failures are detected as fast as before.
func (t Timing) leaderHeartbeatTimeout() time.Duration {
	return max(10*t.HeartbeatInterval, t.HeartbeatTimeout)
}

// check refuses a timing under which a leader would lose its lease, or a
// follower call an election, with no heartbeat lost.
func (t Timing) check() error {
	switch {
	case t.LeaderLeaseTimeout > t.HeartbeatTimeout:
		return fmt.Errorf("%w: field Timing.LeaderLeaseTimeout: %v exceeds the heartbeat timeout %v", ErrConfig, t.LeaderLeaseTimeout, t.HeartbeatTimeout)
	case t.HeartbeatInterval <= 0:
		return fmt.Errorf("%w: field Timing.HeartbeatInterval: %v must be positive", ErrConfig, t.HeartbeatInterval)
	case 3*t.HeartbeatInterval > t.LeaderLeaseTimeout:
		return fmt.Errorf("%w: field Timing.HeartbeatInterval: %v is longer than a third of the leader lease timeout %v: the leader would step down after one late heartbeat", ErrConfig, t.HeartbeatInterval, t.LeaderLeaseTimeout)
	}
	return nil
}

// paceHeartbeats gives Raft the heartbeat timeout of the role this node
// now has: the leader's while it leads, the configured one otherwise. The
// election timeout, which Raft wants at least as long and only a
// candidate uses, goes with it. It runs on observeRaft's goroutine, at
// every change of leadership and on its ticks.
func (n *Node) paceHeartbeats(leading bool) error {
	hb, el := n.timing.HeartbeatTimeout, n.timing.ElectionTimeout
	if leading {
		hb = n.timing.leaderHeartbeatTimeout()
		el = max(el, hb)
	}
	rc := n.raft.ReloadableConfig()
	if rc.HeartbeatTimeout == hb && rc.ElectionTimeout == el {
		return nil
	}
	rc.HeartbeatTimeout, rc.ElectionTimeout = hb, el
	if err := n.raft.ReloadConfig(rc); err != nil {
		return fmt.Errorf("pacing Raft heartbeats (leading: %t, heartbeat timeout %v): %w", leading, hb, err)
	}
	return nil
}
