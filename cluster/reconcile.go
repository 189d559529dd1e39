package cluster

import (
	"maps"
	"slices"
	"time"

	"github.com/hashicorp/raft"

	"github.com/grapnel-io/grapnel/internal/clock"
	"github.com/grapnel-io/grapnel/internal/gossipmeta"
	"github.com/grapnel-io/grapnel/state"
)

// reconciler is the leader's loop state for one leadership term.
type reconciler struct {
	n *Node
	// missingSince is when each configuration member unknown to gossip was
	// first noticed missing in this term.
	missingSince map[string]time.Time
	// warned keeps repeated refusals out of the log.
	warned map[string]string
	// removals are the new runs of removed replicas waiting for the
	// removal to commit (removalCommitted).
	removals map[string]removalWait
	// supported is when every voter was first seen to support
	// supportedTarget, a cluster version above the replicated one
	// (raiseClusterVersion).
	supported       time.Time
	supportedTarget uint32
}

// reconcileLoop runs while this node leads: on gossip and Raft events and
// every ReconcileInterval it judges every member's health, removes members
// that left or are dead, promotes healthy non-voters and adds new gossip
// members as non-voters. observeRaft starts it on gaining leadership and
// closes stop on losing it; Shutdown stops it too.
func (n *Node) reconcileLoop(stop <-chan struct{}) {
	defer n.wg.Done()
	n.health.reset()
	r := &reconciler{n: n, missingSince: map[string]time.Time{}, warned: map[string]string{}, removals: map[string]removalWait{}}
	// On the once-a-second slots, with the other periodic work.
	clk := n.cfg.Clock
	every := n.timing.Autopilot.ReconcileInterval
	tick := clock.NewTimer(clk, clock.UntilSlot(clk.Now(), every))
	defer tick.Stop()
	for {
		if n.IsLeader() {
			r.once()
		}
		select {
		case <-stop:
			return
		case <-n.shutdownCh:
			return
		case <-tick.C:
			tick.Reset(clock.UntilSlot(clk.Now(), every))
		case <-n.reconcileCh:
		}
	}
}

// changeTimeout bounds enqueuing one configuration change.
func (n *Node) changeTimeout() time.Duration {
	return max(5*time.Second, 10*n.timing.ElectionTimeout)
}

// once is one reconciliation pass.
func (r *reconciler) once() {
	n := r.n
	cfg, err := n.configuration()
	if err != nil {
		return
	}
	now := n.now()
	peers := n.peers.all()
	term, last := n.raft.CurrentTerm(), n.raft.LastIndex()
	ap := n.timing.Autopilot

	inConfig := map[string]raft.Server{}
	views := make([]serverView, 0, len(cfg.Servers))
	evals := map[string]peerHealth{}
	for _, s := range cfg.Servers {
		id := string(s.ID)
		inConfig[id] = s
		v := serverView{ID: id, Voter: s.Suffrage == raft.Voter}
		p, known := peers[id]
		switch {
		case n.gossip == nil:
			v.Status = StatusNone
		case known && p.GossipStatus != "" && p.GossipStatus != StatusNone:
			v.Status, v.Since = p.GossipStatus, p.StatusSince
			delete(r.missingSince, id)
		default:
			if _, ok := r.missingSince[id]; !ok {
				r.missingSince[id] = now
			}
			v.Status, v.Since = statusMissing, r.missingSince[id]
		}
		views = append(views, v)
		if id == n.cfg.ID {
			evals[id] = peerHealth{Healthy: true}
			continue
		}
		c, answered := n.contacts.get(id)
		alive := n.gossip == nil || v.Status == StatusAlive
		evals[id] = judge(ap, c, answered, alive, term, last, now)
	}
	health, changed := n.health.update(evals, now)
	if changed {
		n.feed.Notify()
	}
	r.recordCertificates(inConfig)
	r.raiseClusterVersion(cfg)
	if n.gossip == nil {
		// Without gossip nobody announces joins or deaths: membership is
		// the operator's (RemoveReplica) and health is only reported.
		return
	}

	remove, held := planRemovals(views, n.cfg.ID, ap, n.minQuorum(), now)
	for _, h := range held {
		r.warnOnce(h.ID, "keeping dead member: "+h.Reason)
	}
	for _, rm := range remove {
		n.logger.Info("removing member", "id", rm.ID, "reason", rm.Reason)
		if err := n.raft.RemoveServer(raft.ServerID(rm.ID), 0, n.changeTimeout()).Error(); err != nil {
			n.logger.Warn("remove member failed", "id", rm.ID, "error", err)
			return
		}
		delete(inConfig, rm.ID)
	}
	for _, id := range planPromotions(views, health, ap, now) {
		if _, ok := inConfig[id]; !ok {
			continue
		}
		n.logger.Info("promoting member to voter", "id", id, "healthy_for", now.Sub(health[id].StableSince))
		if err := n.raft.AddVoter(raft.ServerID(id), inConfig[id].Address, 0, n.changeTimeout()).Error(); err != nil {
			n.logger.Warn("promotion failed", "id", id, "error", err)
			return
		}
	}
	r.addMembers(peers, inConfig)
}

// recordCertificates records in the replicated state every certificate a
// member showed this leader (and the leader's own) that no entry records
// yet, so that any later leader can revoke it when an operator removes
// that member (RemoveReplica). It writes only when a member shows a new
// certificate: at formation, on a rotation, and for a new member.
func (r *reconciler) recordCertificates(inConfig map[string]raft.Server) {
	n := r.n
	if n.tls == nil || !n.allows(state.ClusterVersionRevocation) {
		return
	}
	for _, id := range slices.Sorted(maps.Keys(inConfig)) {
		seen := n.tls.certsOf(id)
		if id == n.cfg.ID {
			seen = append(seen, n.tls.own())
		}
		recorded := n.ledger.RecordedCerts(id)
		for _, c := range seen {
			if slices.ContainsFunc(recorded, func(h state.ReplicaCert) bool { return h.Serial == c.Serial }) {
				continue
			}
			if _, revoked := n.ledger.RevokedCert(c.Serial); revoked {
				continue
			}
			entry, err := n.ledger.CertificateEntry(id, c)
			if err == nil {
				_, _, err = n.propose(entry, n.changeTimeout())
			}
			if err != nil {
				n.logger.Warn("recording a replica's certificate failed", "id", id, "serial", c.Serial, "error", err)
				return
			}
			recorded = append(recorded, c)
		}
	}
}

// addMembers adds alive gossip servers missing from the configuration as
// non-voters, and updates the address of members that moved; with TLS on
// the Raft port only those that proved a replica certificate there.
func (r *reconciler) addMembers(peers map[string]peerInfo, inConfig map[string]raft.Server) {
	n := r.n
	for _, id := range slices.Sorted(maps.Keys(peers)) {
		p := peers[id]
		if id == n.cfg.ID || p.Role != gossipmeta.RoleServer || p.GossipStatus != StatusAlive || p.RaftAddress == "" {
			continue
		}
		addr := raft.ServerAddress(p.RaftAddress)
		s, ok := inConfig[id]
		switch {
		case ok && s.Address == addr:
			continue
		case n.tls != nil && !r.proven(id, p):
			// Moved or new: only once it proved a replica certificate at
			// the address it announces (admission.go).
			continue
		case ok:
			n.logger.Info("member moved", "id", id, "from", s.Address, "to", addr)
			var f raft.IndexFuture
			if s.Suffrage == raft.Voter {
				f = n.raft.AddVoter(s.ID, addr, 0, n.changeTimeout())
			} else {
				f = n.raft.AddNonvoter(s.ID, addr, 0, n.changeTimeout())
			}
			if err := f.Error(); err != nil {
				n.logger.Warn("address update failed", "id", id, "error", err)
				return
			}
			continue
		case r.refuseRemoved(id, p):
			continue
		case p.LeaderSeen != "" && p.LeaderSeen != n.cfg.ID && !inConfigID(inConfig, p.LeaderSeen):
			r.warnOnce(id, "member follows leader "+p.LeaderSeen+" of another cluster; not adding it")
			continue
		}
		n.logger.Info("adding member as non-voter", "id", id, "raft", addr)
		if err := n.raft.AddNonvoter(raft.ServerID(id), addr, 0, n.changeTimeout()).Error(); err != nil {
			n.logger.Warn("add member failed", "id", id, "error", err)
			return
		}
	}
}

// proven says candidate id proved its replica certificate at the Raft
// address it announces; a probe may start (admission.go).
func (r *reconciler) proven(id string, p peerInfo) bool {
	ok, err := r.n.prover.proven(id, p)
	if !ok {
		msg := "waiting for the candidate to prove a replica certificate on the Raft port"
		if err != nil {
			msg = "candidate did not prove a replica certificate; not admitting it: " + err.Error()
		}
		r.warnOnce(id, msg)
	}
	return ok
}

func (r *reconciler) warnOnce(id, msg string) {
	if r.warned[id] == msg {
		return
	}
	r.warned[id] = msg
	r.n.logger.Warn(msg, "id", id)
}

func inConfigID(cfg map[string]raft.Server, id string) bool {
	_, ok := cfg[id]
	return ok
}

// minQuorum is Autopilot.MinQuorum, or BootstrapExpect, or 1.
func (n *Node) minQuorum() int {
	switch {
	case n.timing.Autopilot.MinQuorum > 0:
		return n.timing.Autopilot.MinQuorum
	case n.cfg.BootstrapExpect > 0:
		return n.cfg.BootstrapExpect
	}
	return 1
}
