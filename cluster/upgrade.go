package cluster

import (
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"
	"time"

	"github.com/hashicorp/raft"

	"github.com/grapnel-io/grapnel/fsm"
	"github.com/grapnel-io/grapnel/internal/buildinfo"
	"github.com/grapnel-io/grapnel/internal/errs"
	"github.com/grapnel-io/grapnel/state"
)

// The cluster version (docs/upgrade.md). Each replica announces in gossip
// the newest cluster version its release supports; the replicated one
// (state.ClusterVersion) says which formats the cluster writes. While a
// voter announces less than this release supports, the leader writes only
// what the older release reads, so that any replica can go back to it on
// the same data. The leader raises the version once every voter supports
// it and the upgrade is finalized: by an operator (FinalizeUpgrade,
// `grapnel cluster upgrade finalize`), or when every voter has supported
// it for Config.UpgradeFinalizeAfter. Nothing is written to the log
// before that; the support is known from gossip only. A cluster this
// replica bootstrapped starts at the newest version its voters support:
// no older release wrote any of its data.

// ClusterVersion is the replicated cluster version.
func (n *Node) ClusterVersion() uint32 { return n.ledger.ClusterVersion() }

// supported is the newest cluster version this replica supports.
func (c Config) supported() uint32 {
	if c.SupportedClusterVersion == nil {
		return state.MaxClusterVersion
	}
	return min(*c.SupportedClusterVersion, state.MaxClusterVersion)
}

// allows reports whether the cluster version lets this replica write the
// formats of version v.
func (n *Node) allows(v uint32) bool { return n.ledger.ClusterVersion() >= v }

// upgradeTarget is the newest cluster version every voter of cfg supports,
// as gossip announces it (this replica: its own release), and the voters
// whose release supports less than this one's, with what they support.
// A voter gossip does not see alive counts as supporting nothing new: its
// release is unknown. older tells whether a voter seen alive runs a
// release that supports less.
func (n *Node) upgradeTarget(cfg raft.Configuration) (target uint32, behind []string, older bool) {
	own := n.cfg.supported()
	target = own
	peers := n.peers.all()
	for _, s := range cfg.Servers {
		if s.Suffrage != raft.Voter {
			continue
		}
		id := string(s.ID)
		v := own
		if id != n.cfg.ID {
			p, ok := peers[id]
			switch {
			case !ok || p.GossipStatus != StatusAlive:
				v = 0
				behind = append(behind, id+" (not seen alive: release unknown)")
			case p.ClusterVersion < own:
				v, older = p.ClusterVersion, true
				behind = append(behind, fmt.Sprintf("%s (release %s, supports cluster version %d)", id, orUnknown(p.Version), v))
			}
		}
		target = min(target, v)
	}
	if f := n.agentSupport.Load(); f != nil {
		var agents []string
		target, agents = capForAgents(n.ledger.ClusterVersion(), target, state.Features, (*f)())
		behind = append(behind, agents...)
	}
	slices.Sort(behind)
	return target, behind, older
}

// SetAgentSupport gives the node the newest cluster version each agent
// connected to this replica supports (the server's
// AgentClusterVersions; nil while it does not lead): a cluster version
// whose feature changes what agents are sent waits for them too.
func (n *Node) SetAgentSupport(f func() map[string]uint32) { n.agentSupport.Store(&f) }

// capForAgents lowers target to below the first cluster version after cur
// whose feature changes what agents are sent (state.Feature.Agents) and
// that a connected agent does not support, and names those agents.
// Versions whose features leave agents alone are not held by them.
func capForAgents(cur, target uint32, features []state.Feature, agents map[string]uint32) (uint32, []string) {
	for _, f := range features {
		if !f.Agents || f.Version <= cur || f.Version > target {
			continue
		}
		var behind []string
		for _, name := range slices.Sorted(maps.Keys(agents)) {
			if v := agents[name]; v < f.Version {
				behind = append(behind, fmt.Sprintf("agent %s (supports cluster version %d; %s needs %d)", name, v, f.Name, f.Version))
			}
		}
		if len(behind) > 0 {
			return f.Version - 1, behind
		}
	}
	return target, nil
}

func orUnknown(s string) string {
	if s == "" {
		return "unknown"
	}
	return s
}

// raiseClusterVersion raises the cluster version once every voter
// supports a newer one and the upgrade is finalized: an operator asked
// (finalizeAsked) or every voter has supported it for
// UpgradeFinalizeAfter (off when zero). The support is tracked from when
// this leader first saw it, in its memory only.
func (r *reconciler) raiseClusterVersion(cfg raft.Configuration) {
	n := r.n
	target, _, older := n.upgradeTarget(cfg)
	cur := n.ledger.ClusterVersion()
	if target <= cur {
		r.supported = time.Time{}
		if older && n.fresh.Load() {
			// An older release is among the voters: this is an upgrade
			// after all, which an operator finalizes. A voter gossip has
			// not seen yet only delays the raise.
			n.fresh.Store(false)
		}
		return
	}
	if n.fresh.Load() {
		// This replica bootstrapped a new cluster: nothing of an older
		// release is there to go back to.
		n.logger.Info("a new cluster starts at the newest cluster version its voters support", "version", target)
		if err := n.commitClusterVersion(target); err != nil {
			n.logger.Warn("raising the cluster version failed", "to", target, "error", err)
			return
		}
		n.fresh.Store(false)
		return
	}
	now := n.now()
	if r.supported.IsZero() || r.supportedTarget != target {
		r.supported, r.supportedTarget = now, target
	}
	after := n.cfg.UpgradeFinalizeAfter
	if after <= 0 || now.Sub(r.supported) < after {
		return
	}
	n.logger.Info("finalizing the upgrade: every voter has supported the cluster version for the time set", "from", cur, "to", target, "after", after)
	if err := n.commitClusterVersion(target); err != nil {
		n.logger.Warn("raising the cluster version failed", "to", target, "error", err)
	}
}

// commitClusterVersion commits the entry that raises the cluster version
// to v.
func (n *Node) commitClusterVersion(v uint32) error {
	entry, err := fsm.ClusterVersionEntry(v)
	if err != nil {
		return err
	}
	_, _, err = n.propose(entry, n.changeTimeout())
	if err == nil {
		// Applied here by now: the leader's watchers (the server's
		// problem detection writes what the new version allows) look
		// again, as nothing else of theirs need change meanwhile.
		n.feed.Notify()
	}
	if errors.Is(err, raft.ErrLeadershipLost) || errors.Is(err, raft.ErrRaftShutdown) {
		return fmt.Errorf("%w: leadership was lost while raising the cluster version to %d; ask again", errs.ErrOutcomeUnknown, v)
	}
	return FoldRaftError(err)
}

// FinalizeUpgrade raises the cluster version to the newest every voter
// supports, now (an operator's `grapnel cluster upgrade finalize`): from
// then on the new formats may be written, and no replica can go back to a
// release that does not support them. It refuses, naming them, while a
// voter runs a release that supports less than this one; at the newest
// version already it changes nothing.
func (n *Node) FinalizeUpgrade() (from, to uint32, err error) {
	if !n.IsLeader() {
		return 0, 0, errs.ErrNotLeader
	}
	cfg, err := n.configuration()
	if err != nil {
		return 0, 0, err
	}
	from = n.ledger.ClusterVersion()
	target, behind, _ := n.upgradeTarget(cfg)
	switch {
	case len(behind) > 0:
		return from, from, fmt.Errorf("%w: not every voter runs a release that supports cluster version %d: %s; upgrade them first",
			errs.ErrReleaseBehind, n.cfg.supported(), strings.Join(behind, ", "))
	case target <= from:
		return from, from, nil
	}
	if err := n.commitClusterVersion(target); err != nil {
		return from, from, err
	}
	n.logger.Info("the upgrade is finalized by an operator", "from", from, "to", target)
	return from, target, nil
}

// UpgradeStatus is what `grapnel cluster upgrade status` shows.
type UpgradeStatus struct {
	// ClusterVersion is the replicated one; Supported what this
	// replica's release supports; Target the newest every voter supports.
	ClusterVersion, Supported, Target uint32
	// Behind are the voters whose release supports less than this
	// replica's, with what they announce.
	Behind []string
	// FinalizeAfter is Config.UpgradeFinalizeAfter (0: only on an
	// operator's finalize).
	FinalizeAfter time.Duration
}

// RollbackPossible says a replica can still go back to a release that
// supports less than this one: the cluster version has not been raised to
// what only this release writes.
func (s UpgradeStatus) RollbackPossible() bool { return s.ClusterVersion < s.Supported }

// Upgrade reports the cluster version, what the voters support and who is
// behind, as this replica sees it.
func (n *Node) Upgrade() (UpgradeStatus, error) {
	cfg, err := n.configuration()
	if err != nil {
		return UpgradeStatus{}, err
	}
	target, behind, _ := n.upgradeTarget(cfg)
	return UpgradeStatus{ClusterVersion: n.ledger.ClusterVersion(), Supported: n.cfg.supported(), Target: target,
		Behind: behind, FinalizeAfter: n.cfg.UpgradeFinalizeAfter}, nil
}

// PeerClusterVersion is the newest cluster version replica id announces
// in gossip (0 for a release that announces none), and whether gossip
// knows id.
func (n *Node) PeerClusterVersion(id string) (uint32, bool) {
	if id == n.cfg.ID {
		return n.cfg.supported(), true
	}
	p, ok := n.peers.get(id)
	return p.ClusterVersion, ok
}

// checkDataFormat refuses a data directory written at a cluster version
// this build does not read (a newer release's, after an upgrade was
// finalized): its newest snapshot and the log entries after it say which
// version the cluster reached. Nothing is read further or written; the
// error names both versions, so that the replica is started with a
// release that reads them, rather than misread them.
func checkDataFormat(dir string, supported uint32, snaps raft.SnapshotStore, logs raft.LogStore) error {
	var v uint32
	var from uint64
	if metas, err := snaps.List(); err == nil && len(metas) > 0 {
		_, rc, err := snaps.Open(metas[0].ID)
		if err == nil {
			sv, err := fsm.ClusterVersionOf(rc)
			rc.Close()
			if err == nil {
				v, from = sv, metas[0].Index+1
			}
		}
	}
	first, err := logs.FirstIndex()
	if err != nil {
		return nil
	}
	last, err := logs.LastIndex()
	if err != nil {
		return nil
	}
	for i := max(first, from); i != 0 && i <= last; i++ {
		var l raft.Log
		if logs.GetLog(i, &l) != nil || l.Type != raft.LogCommand {
			continue
		}
		if ev, ok := fsm.EntryClusterVersion(l.Data); ok {
			v = max(v, ev)
		}
	}
	if v > supported {
		return fmt.Errorf("cluster: field DataDir: %s holds a cluster at cluster version %d, written by a newer release; this replica (release %s) reads cluster versions up to %d: "+
			"start a release that supports cluster version %d on it (the data is left as it is; docs/upgrade.md)",
			dir, v, buildinfo.Version, supported, v)
	}
	return nil
}
