package cluster

import (
	"sort"
	"sync"
	"time"

	"github.com/hashicorp/raft"
)

// Member is one replica as this node sees it: Raft configuration, Raft
// statistics (on the leader) and gossip metadata merged.
type Member struct {
	ID            string
	RaftAddress   string
	GRPCAddress   string
	GossipAddress string
	Version       string
	// Role is leader, follower, candidate, nonvoter, or unknown when only
	// gossip knows the member.
	Role  string
	Voter bool
	// InConfig says the member is in the Raft configuration.
	InConfig bool
	Leader   bool
	// Healthy: alive in gossip (or no gossip), and on the leader, in
	// contact recently enough and not too far behind.
	Healthy bool
	// LastContact is how long ago the leader heard from the member; -1 when
	// unknown (not the leader's view, or never).
	LastContact time.Duration
	// GossipStatus is alive, suspect, dead, left, or none.
	GossipStatus string
	// LeaderSeen is the leader id the member's gossip metadata reports.
	LeaderSeen string
}

// peerInfo is what this node knows about a replica outside Raft: the gRPC
// address and what gossip says. The local replica is always present.
type peerInfo struct {
	ID            string
	RaftAddress   string
	GRPCAddress   string
	GossipAddress string
	Version       string
	Role          string
	GossipStatus  string
	LeaderSeen    string
}

// peerTable maps replica ids to peerInfo; gossip writes it, readers copy.
type peerTable struct {
	mu    sync.RWMutex
	peers map[string]peerInfo
}

func newPeerTable() *peerTable { return &peerTable{peers: map[string]peerInfo{}} }

func (t *peerTable) put(p peerInfo) {
	t.mu.Lock()
	t.peers[p.ID] = p
	t.mu.Unlock()
}

func (t *peerTable) get(id string) (peerInfo, bool) {
	t.mu.RLock()
	defer t.mu.RUnlock()
	p, ok := t.peers[id]
	return p, ok
}

func (t *peerTable) all() map[string]peerInfo {
	t.mu.RLock()
	defer t.mu.RUnlock()
	out := make(map[string]peerInfo, len(t.peers))
	for k, v := range t.peers {
		out[k] = v
	}
	return out
}

// Members lists every replica in the Raft configuration or in gossip,
// sorted by id.
func (n *Node) Members() ([]Member, error) {
	fut := n.raft.GetConfiguration()
	if err := fut.Error(); err != nil {
		return nil, err
	}
	_, leaderID := n.raft.LeaderWithID()
	peers := n.peers.all()
	isLeader := n.IsLeader()
	byID := map[string]*Member{}
	for _, s := range fut.Configuration().Servers {
		m := &Member{
			ID: string(s.ID), RaftAddress: string(s.Address), InConfig: true,
			Voter: s.Suffrage == raft.Voter, Leader: s.ID == leaderID,
			LastContact: -1, GossipStatus: "none", Healthy: true,
		}
		switch {
		case m.Leader:
			m.Role = "leader"
		case !m.Voter:
			m.Role = "nonvoter"
		default:
			m.Role = "follower"
		}
		if m.ID == n.cfg.ID {
			m.Role = localRole(n.raft.State(), m.Voter)
		}
		byID[m.ID] = m
	}
	for id, p := range peers {
		m := byID[id]
		if m == nil {
			m = &Member{ID: id, RaftAddress: p.RaftAddress, Role: "unknown", LastContact: -1}
			byID[id] = m
		}
		m.GRPCAddress = p.GRPCAddress
		m.GossipAddress = p.GossipAddress
		m.Version = p.Version
		m.LeaderSeen = p.LeaderSeen
		if p.GossipStatus != "" {
			m.GossipStatus = p.GossipStatus
		}
		m.Healthy = m.InConfig && (m.GossipStatus == "none" || m.GossipStatus == "alive")
	}
	if isLeader {
		n.health.apply(byID, n.cfg.ID)
	}
	out := make([]Member, 0, len(byID))
	for _, m := range byID {
		out = append(out, *m)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].ID < out[j].ID })
	return out, nil
}

func localRole(s raft.RaftState, voter bool) string {
	switch s {
	case raft.Leader:
		return "leader"
	case raft.Candidate:
		return "candidate"
	}
	if !voter {
		return "nonvoter"
	}
	return "follower"
}

// LeaderInfo returns the current leader's id, Raft address and gRPC
// address, as far as this node knows them; empty when no leader is known
// or its gRPC address has not been learned yet.
func (n *Node) LeaderInfo() (id, raftAddr, grpcAddr string) {
	a, i := n.raft.LeaderWithID()
	id, raftAddr = string(i), string(a)
	if id == "" {
		return "", "", ""
	}
	if p, ok := n.peers.get(id); ok {
		grpcAddr = p.GRPCAddress
	}
	return id, raftAddr, grpcAddr
}

// GRPCAddress is the gRPC address this replica advertises.
func (n *Node) GRPCAddress() string { return n.cfg.GRPCAddress }

// SetPeerAddresses records a replica's addresses without gossip, for
// clusters formed by hand and for tests; gossip overwrites it.
func (n *Node) SetPeerAddresses(id, raftAddr, grpcAddr string) {
	p, _ := n.peers.get(id)
	p.ID, p.RaftAddress, p.GRPCAddress = id, raftAddr, grpcAddr
	if p.GossipStatus == "" {
		p.GossipStatus = "none"
	}
	n.peers.put(p)
	n.feed.notify()
}
