package cluster

import (
	"bytes"
	"errors"
	"fmt"
	"log"
	"net"
	"strconv"

	"github.com/hashicorp/memberlist"

	"github.com/grapnel-io/grapnel/internal/gossipmeta"
	"github.com/grapnel-io/grapnel/internal/gossipnet"
)

// newKeyring is memberlist's keyring of keys, the first the primary; nil
// when keys holds no key (gossip in the clear).
func newKeyring(keys [][]byte) (*memberlist.Keyring, error) {
	var ks [][]byte
	for _, k := range keys {
		if len(k) > 0 {
			ks = append(ks, k)
		}
	}
	if len(ks) == 0 {
		return nil, nil
	}
	return memberlist.NewKeyring(ks, ks[0])
}

// SetGossipKeys replaces the keys of the replicas' gossip pool, the first
// the primary (docs/security.md, "Gossip keys"): new keys are installed,
// then the primary switched, then keys no longer listed removed.
func (n *Node) SetGossipKeys(keys [][]byte) error {
	if n.gossip == nil {
		return errors.New("cluster: no gossip")
	}
	if err := gossipmeta.Rotate(n.gossip.keyring, keys); err != nil {
		return fmt.Errorf("cluster: replicas' gossip keys: %w", err)
	}
	return nil
}

// SetAgentGossipKeys is SetGossipKeys for the agents' pool; the keys must
// not be the replicas'.
func (n *Node) SetAgentGossipKeys(keys [][]byte) error {
	if n.gossip == nil || n.gossip.agents == nil {
		return errors.New("cluster: no agents' gossip pool")
	}
	for _, k := range keys {
		for _, r := range n.gossip.keyring.GetKeys() {
			if bytes.Equal(k, r) {
				return errors.New("cluster: agents' gossip keys: shares a key with the replicas' gossip")
			}
		}
	}
	if err := gossipmeta.Rotate(n.gossip.agentKeyring, keys); err != nil {
		return fmt.Errorf("cluster: agents' gossip keys: %w", err)
	}
	return nil
}

// GossipKeyCounts says how many keys each pool holds (0 for a pool in
// the clear or absent), for status and tests.
func (n *Node) GossipKeyCounts() (replicas, agents int) {
	if n.gossip == nil {
		return 0, 0
	}
	if n.gossip.keyring != nil {
		replicas = len(n.gossip.keyring.GetKeys())
	}
	if n.gossip.agentKeyring != nil {
		agents = len(n.gossip.agentKeyring.GetKeys())
	}
	return replicas, agents
}

// AgentGossipAddress is the address of the agents' pool; empty without one.
func (n *Node) AgentGossipAddress() string {
	if n.gossip == nil || n.gossip.agents == nil {
		return ""
	}
	// The address kept at start: memberlist rewrites its local node
	// under its own lock whenever the metadata changes.
	return n.gossip.agentAddress
}

// startAgentPool runs the agents' memberlist: the same metadata as in the
// replicas' pool, its own address and key, no events.
func (g *gossip) startAgentPool(stdlog *log.Logger) error {
	cfg := g.n.cfg
	host, portStr, err := net.SplitHostPort(cfg.AgentGossipAddress)
	if err != nil {
		return fmt.Errorf("%w: field AgentGossipAddress: %v", ErrConfig, err)
	}
	port, err := strconv.Atoi(portStr)
	if err != nil || port < 0 || port > 65535 {
		return fmt.Errorf("%w: field AgentGossipAddress: bad port %q", ErrConfig, portStr)
	}
	nt, err := gossipnet.Listen(gossipnet.Config{Host: host, Port: port, Logger: stdlog, Labels: poolLabels("agents"), Clock: g.n.cfg.Clock})
	if err != nil {
		return fmt.Errorf("cluster: field AgentGossipAddress: %w", err)
	}
	mc := g.memberlistConfig(nt, stdlog)
	mc.MetricLabels = poolLabels("agents")
	mc.Delegate = agentPoolDelegate{g}
	mc.Events = nil
	if g.agentKeyring, err = newKeyring(cfg.AgentGossipKeys); err != nil {
		_ = nt.Shutdown()
		return fmt.Errorf("%w: field AgentGossipKeys: %v", ErrConfig, err)
	}
	mc.Keyring = g.agentKeyring
	ml, err := memberlist.Create(mc)
	if err != nil {
		_ = nt.Shutdown()
		return fmt.Errorf("cluster: start the agents' gossip pool: %w", err)
	}
	g.agents = ml
	g.agentAddress = ml.LocalNode().Address()
	return nil
}

// agentPoolDelegate announces the replica's metadata in the agents' pool
// and takes nothing from it: what agents say there never reaches the
// replica's peer table.
type agentPoolDelegate struct{ g *gossip }

func (d agentPoolDelegate) NodeMeta(limit int) []byte                { return d.g.NodeMeta(limit) }
func (agentPoolDelegate) NotifyMsg([]byte)                           {}
func (agentPoolDelegate) GetBroadcasts(overhead, limit int) [][]byte { return nil }
func (agentPoolDelegate) LocalState(join bool) []byte                { return nil }
func (agentPoolDelegate) MergeRemoteState(buf []byte, join bool)     {}

// joinAgentPools joins the agents' pools of alive replicas this
// replica's agents' pool does not hold yet, so agents that join any
// replica see every replica. Memory only while nothing is missing.
func (g *gossip) joinAgentPools() {
	if g.agents == nil || g.stopped.Load() || g.left.Load() {
		return
	}
	have := map[string]bool{}
	for _, m := range g.agents.Members() {
		have[m.Name] = true // Name never changes; Meta is not read (memberlist rewrites it unlocked)
	}
	var join []string
	for id, p := range g.n.peers.all() {
		if id != g.n.cfg.ID && !have[id] && p.Role == gossipmeta.RoleServer && p.GossipStatus == StatusAlive && p.AgentGossipAddress != "" {
			join = append(join, p.AgentGossipAddress)
		}
	}
	if len(join) == 0 {
		return
	}
	if _, err := g.agents.Join(join); err != nil {
		g.logger.Debug("joining the other replicas' agents' pools", "error", err)
	}
}
