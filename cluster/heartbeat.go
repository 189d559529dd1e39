package cluster

import (
	"fmt"
	"time"

	"github.com/grapnel-io/grapnel/internal/clock"
)

// leaderHeartbeatTimeout is the Raft heartbeat timeout a leader runs
// with. hashicorp/raft derives the heartbeat period from the node's own
// HeartbeatTimeout (a heartbeat every timeout/10 to /5), the same value
// a follower uses to decide the leader is gone, so the two cannot be set
// apart in its configuration. The leader reloads a longer timeout while
// it leads and puts the configured one back when it stops leading;
// followers keep the configured timeout, so failures are detected as fast
// as before. With ten intervals, Raft's own heartbeats wait one to two
// intervals: they are the fallback of the pacer (paceLoop), which sends
// every follower's heartbeat once an interval, so Raft's own timers only
// fire when the pacer's heartbeat is late.
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
	case 2*t.HeartbeatInterval >= t.LeaderLeaseTimeout:
		return fmt.Errorf("%w: field Timing.HeartbeatInterval: %v is not shorter than half the leader lease timeout %v: the leader would step down after one late heartbeat", ErrConfig, t.HeartbeatInterval, t.LeaderLeaseTimeout)
	case t.StorageProbeMax < t.StorageProbeMin:
		return fmt.Errorf("%w: field Timing.StorageProbeMax: %v is shorter than StorageProbeMin %v", ErrConfig, t.StorageProbeMax, t.StorageProbeMin)
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
	switch {
	case n.storage.Fault() != nil:
		// It would only make the others vote in terms it cannot win.
		hb, el = storageFailedTimeout, storageFailedTimeout
	case n.hold.active():
		// It must not stand before its log has caught up (votehold.go).
		hb, el = storageFailedTimeout, storageFailedTimeout
	case leading:
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

// paceLoop is the leader's heartbeat clock: once every HeartbeatInterval
// it asks Raft to verify its leadership, which sends a heartbeat to every
// follower at once. hashicorp/raft heartbeats each follower from its own
// goroutine after a random one to two intervals, so an idle leader woke
// for every follower's heartbeat and again for every answer, each at its
// own moment: about 27 wake-ups a second with two followers. Sent
// together, the heartbeats cost one wake-up and their answers arrive
// close together; the gap between two heartbeats is one interval (125 ms
// by default) where Raft's timers gave a tenth to a fifth of the
// timeout. Raft's own timers stay as the fallback
// (leaderHeartbeatTimeout): if this loop or Raft's main loop, which
// dispatches the verification, is late, a follower still hears from the
// leader within two intervals. The answers also verify
// the leadership; nobody waits for that: a verification a follower
// refuses (it knows a newer term) makes Raft step down, as it should.
// It runs only while this node leads a cluster with other servers
// (syncLeadership), and stops with the leadership.
func (n *Node) paceLoop(stop <-chan struct{}) {
	defer n.wg.Done()
	n.pacing.Store(true)
	defer n.pacing.Store(false)
	pace(n.cfg.Clock, n.timing.HeartbeatInterval, func() { n.raft.VerifyLeader() }, stop, n.shutdownCh)
}

// pace calls beat at the start of every interval slot (clock.NextSlot)
// until stop or shutdown is closed. On slots the heartbeats fall on the
// same instants as the Watch heartbeats and the once-a-second timers.
func pace(clk clock.Clock, interval time.Duration, beat func(), stop, shutdown <-chan struct{}) {
	if clk == nil {
		clk = clock.Real()
	}
	t := clock.NewTimer(clk, clock.UntilSlot(clk.Now(), interval))
	defer t.Stop()
	for {
		select {
		case <-t.C:
			beat()
			t.Reset(clock.UntilSlot(clk.Now(), interval))
		case <-stop:
			return
		case <-shutdown:
			return
		}
	}
}

// hasPeers reports whether the latest Raft configuration names a server
// other than this node: a single voter has no one to heartbeat.
func (n *Node) hasPeers() bool {
	f := n.raft.GetConfiguration()
	if f.Error() != nil {
		return false
	}
	for _, s := range f.Configuration().Servers {
		if string(s.ID) != n.cfg.ID {
			return true
		}
	}
	return false
}

// PacingHeartbeats reports whether this node's heartbeat pacer runs: only
// on a leader with other servers to heartbeat.
func (n *Node) PacingHeartbeats() bool { return n.pacing.Load() }
