package cluster

import (
	"errors"
	"fmt"
	"sort"
	"strings"

	"github.com/hashicorp/raft"

	"github.com/grapnel-io/grapnel/internal/clock"
	"github.com/grapnel-io/grapnel/internal/gossipmeta"
)

// startFormation bootstraps, or starts the goroutines that bootstrap and
// join, as the configuration asks. A node whose Raft has state never
// bootstraps.
func (n *Node) startFormation() error {
	switch {
	case n.existing:
		n.logger.Info("raft has state; not bootstrapping")
	case n.cfg.bootstrapsSelf():
		if err := n.bootstrap([]raft.Server{{
			Suffrage: raft.Voter, ID: raft.ServerID(n.cfg.ID), Address: n.transport.LocalAddr(),
		}}); err != nil {
			return err
		}
	case n.cfg.BootstrapExpect > 1:
		n.wg.Add(1)
		go n.bootstrapLoop()
	}
	if !n.cfg.DeferSoloElection {
		n.electAloneNow()
	}
	if n.gossip != nil {
		if n.existing {
			n.wg.Add(1)
			go n.electEarly()
		}
		n.wg.Add(1)
		go n.joinLoop()
	}
	return nil
}

// bootstrap writes the initial configuration; a Raft that got state in the
// meantime refuses, which is fine.
func (n *Node) bootstrap(servers []raft.Server) error {
	err := n.raft.BootstrapCluster(raft.Configuration{Servers: servers}).Error()
	if err != nil && !errors.Is(err, raft.ErrCantBootstrap) {
		return fmt.Errorf("cluster: bootstrap: %w", err)
	}
	if err == nil {
		// A replica that bootstraps has lost nothing: it votes at once.
		if herr := n.hold.end(endBootstrapped); herr != nil {
			return fmt.Errorf("cluster: bootstrap: %w", herr)
		}
		// A new cluster has no data an older release wrote: it starts
		// at the newest cluster version its voters support (upgrade.go).
		n.fresh.Store(true)
		ids := make([]string, len(servers))
		for i, s := range servers {
			ids[i] = string(s.ID)
		}
		n.logger.Info("bootstrapped cluster", "voters", ids)
	}
	if n.gossip != nil {
		n.gossip.announce()
	}
	return nil
}

// bootstrapLoop waits, on gossip changes and every probe interval, until
// BootstrapExpect replicas can bootstrap together, or this node gets Raft
// state by being reached from an existing cluster. It stops then or on
// Shutdown.
func (n *Node) bootstrapLoop() {
	defer n.wg.Done()
	changes, cancel := n.feed.Subscribe()
	defer cancel()
	tick := clock.NewTicker(n.cfg.Clock, n.timing.Gossip.ProbeInterval)
	defer tick.Stop()
	lastReason := ""
	for {
		if n.hasState() {
			n.logger.Info("raft has state; bootstrap-expect not needed")
			return
		}
		// With TLS only members that proved a replica certificate count.
		servers, reason := bootstrapSet(n.admitted(n.peers.all()), n.cfg.ID, n.cfg.BootstrapExpect)
		if servers != nil {
			if err := n.bootstrap(servers); err != nil {
				n.logger.Error("bootstrap failed", "error", err)
			}
			return
		}
		if reason != lastReason {
			n.logger.Warn("not bootstrapping yet", "reason", reason)
			lastReason = reason
		}
		select {
		case <-changes:
		case <-tick.C:
		case <-n.shutdownCh:
			return
		}
	}
}

// bootstrapSet returns the configuration to bootstrap with: every alive
// server member (this one included), sorted by id, once at least expect of
// them announce the same expect and none has Raft state or sees a leader.
// Every replica computes it from the same gossip view, so racing replicas
// bootstrap identical configurations, which Raft merges into one cluster.
// Otherwise it returns nil and why it waits.
func bootstrapSet(peers map[string]peerInfo, self string, expect int) ([]raft.Server, string) {
	var alive []peerInfo
	if p, ok := peers[self]; !ok || p.GossipStatus != StatusAlive {
		return nil, "this replica is not alive in gossip yet"
	}
	for _, p := range peers {
		if p.Role != gossipmeta.RoleServer || p.GossipStatus != StatusAlive {
			continue
		}
		if p.Expect != expect {
			return nil, fmt.Sprintf("member %s announces bootstrap-expect %d, this replica %d", p.ID, p.Expect, expect)
		}
		if p.HasState || p.LeaderSeen != "" {
			return nil, fmt.Sprintf("member %s already has Raft state; waiting to be added to its cluster", p.ID)
		}
		alive = append(alive, p)
	}
	if len(alive) < expect {
		ids := make([]string, len(alive))
		for i, p := range alive {
			ids[i] = p.ID
		}
		sort.Strings(ids)
		more, word := expect-len(alive), "replicas"
		if more == 1 {
			word = "replica"
		}
		return nil, fmt.Sprintf("waiting for %d more %s (seen: %s)", more, word, strings.Join(ids, ", "))
	}
	sort.Slice(alive, func(i, j int) bool { return alive[i].ID < alive[j].ID })
	servers := make([]raft.Server, len(alive))
	for i, p := range alive {
		servers[i] = raft.Server{Suffrage: raft.Voter, ID: raft.ServerID(p.ID), Address: raft.ServerAddress(p.RaftAddress)}
	}
	return servers, ""
}

// Forming says whether this replica waits for the cluster to form (no
// Raft state, --bootstrap-expect N > 1): the server members alive in its
// gossip (itself included) and N; expect is 0 once it has state.
func (n *Node) Forming() (seen []string, expect int) {
	if n.cfg.BootstrapExpect <= 1 || n.hasState() {
		return nil, 0
	}
	for id, p := range n.admitted(n.peers.all()) {
		if p.Role == gossipmeta.RoleServer && p.GossipStatus == StatusAlive {
			seen = append(seen, id)
		}
	}
	sort.Strings(seen)
	if len(seen) == 0 {
		seen = []string{n.cfg.ID}
	}
	return seen, n.cfg.BootstrapExpect
}
