package cluster

import (
	"github.com/hashicorp/raft"

	"github.com/grapnel-io/grapnel/internal/clock"
)

// Changes returns a channel signalled whenever the leader, the Raft
// configuration, gossip membership or (on the leader that raised it) the
// cluster version may have changed, and a cancel func.
// Signals are coalesced: read the current view after each one.
func (n *Node) Changes() (<-chan struct{}, func()) { return n.feed.Subscribe() }

// observeRaft turns Raft's observations into feed signals, starts and
// stops the reconciler as this node gains and loses leadership, and asks
// gossip to re-announce the leader this node sees. Observations may be
// dropped when the channel is full, so a ticker re-checks leadership too.
// It stops on Shutdown.
func (n *Node) observeRaft() {
	defer n.wg.Done()
	// The tick falls on the once-a-second slots (clock.NextSlot) that the
	// other periodic work shares, so an idle replica wakes once for all.
	clk := n.cfg.Clock
	every := n.timing.Autopilot.ReconcileInterval
	tick := clock.NewTimer(clk, clock.UntilSlot(clk.Now(), every))
	defer tick.Stop()
	var stopReconcile, stopPace chan struct{}
	defer func() {
		if stopReconcile != nil {
			close(stopReconcile)
		}
		if stopPace != nil {
			close(stopPace)
		}
	}()
	var paceErr string // the last failure logged, so a tick does not repeat it
	syncLeadership := func() {
		leading := n.raft.State() == raft.Leader
		if err := n.paceHeartbeats(leading); err != nil && err.Error() != paceErr {
			paceErr = err.Error()
			n.logger.Warn("could not pace Raft heartbeats", "error", err)
		} else if err == nil {
			paceErr = ""
		}
		switch {
		case leading && stopReconcile == nil && !n.stopping():
			stopReconcile = make(chan struct{})
			n.wg.Add(1)
			go n.reconcileLoop(stopReconcile)
		case !leading && stopReconcile != nil:
			close(stopReconcile)
			stopReconcile = nil
		}
		pacing := leading && !n.stopping() && n.hasPeers()
		switch {
		case pacing && stopPace == nil:
			stopPace = make(chan struct{})
			n.wg.Add(1)
			go n.paceLoop(stopPace)
		case !pacing && stopPace != nil:
			close(stopPace)
			stopPace = nil
		}
	}
	failed := n.storage.failedCh
	released := n.hold.Released()
	for {
		select {
		case <-n.hold.poke:
			n.checkHold()
		case <-released:
			released = nil
			syncLeadership()
		case <-failed:
			failed = nil
			n.onStorageFailed()
			syncLeadership()
		case o := <-n.obsCh:
			switch d := o.Data.(type) {
			case raft.LeaderObservation, raft.RaftState:
				n.fast.leaderChanged()
				n.noteLeader()
				syncLeadership()
				n.feed.Notify()
				if n.gossip != nil {
					n.gossip.announce()
				}
			case raft.PeerObservation:
				n.fast.leaderChanged()
				n.feed.Notify()
				n.triggerReconcile()
				syncLeadership()
			case raft.FailedHeartbeatObservation:
				n.logger.Debug("heartbeat to follower failing", "peer", d.PeerID, "last_contact", d.LastContact)
				n.triggerReconcile()
			case raft.ResumedHeartbeatObservation:
				n.triggerReconcile()
			}
		case <-tick.C:
			tick.Reset(clock.UntilSlot(clk.Now(), every))
			if n.reads != nil {
				n.reads.tick(n.raft.AppliedIndex())
			}
			n.checkHold()
			n.noteLeader()
			syncLeadership()
		case <-n.shutdownCh:
			return
		}
	}
}

// noteLeader records that another replica leads (FollowedLeader).
func (n *Node) noteLeader() {
	if _, id := n.raft.LeaderWithID(); id != "" && string(id) != n.cfg.ID {
		n.followed.Store(true)
		// Another replica led the new cluster first: it raised the
		// cluster version or found an older voter, and a later leader
		// must not raise it as for a new cluster (upgrade.go).
		n.fresh.Store(false)
	}
}

// FollowedLeader reports whether this node has seen another replica lead
// since it started. A leader that never did was elected by a cluster
// that started together (a power-on, or a restart of every replica) or
// is the only voter: whatever its store says of the agents dates from
// before that start, and nothing it heard since confirms it. A leader
// elected after following another took over a live cluster. It is
// recorded at every leadership observation and every tick, so a leader
// seen for less than a tick may be missed; that errs on the side of not
// trusting the store.
func (n *Node) FollowedLeader() bool { return n.followed.Load() }

// triggerReconcile wakes the leader's reconciler; signals coalesce.
func (n *Node) triggerReconcile() {
	select {
	case n.reconcileCh <- struct{}{}:
	default:
	}
}
