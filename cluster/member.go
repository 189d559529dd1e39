package cluster

import (
	"sort"
	"sync"
	"time"

	"github.com/hashicorp/raft"

	"github.com/grapnel-io/grapnel/internal/gossipmeta"
)

// Member is one replica as this node sees it: Raft configuration, Raft
// statistics (on the leader) and gossip metadata merged.
type Member struct {
	ID            string
	RaftAddress   string
	GRPCAddress   string
	GossipAddress string
	// UIAddress is the member's dashboard address, empty when it serves
	// none or gossip has not told it yet.
	UIAddress string
	Version   string
	// Role is leader, follower, candidate, nonvoter, removed when only
	// gossip knows the member and it is a run an operator removed (it
	// stays out until restarted), or unknown when only gossip knows it.
	Role  string
	Voter bool
	// InConfig says the member is in the Raft configuration.
	InConfig bool
	Leader   bool
	// Healthy: in the configuration and alive in gossip (or no gossip),
	// and on the leader also in contact recently enough, in the leader's
	// term and not too far behind.
	Healthy bool
	// LastContact is how long ago the leader heard from the member; -1 when
	// unknown (not the leader's view, or never).
	LastContact time.Duration
	// TrailingLogs is how many entries the member is behind the leader, as
	// of its last answer (leader's view only).
	TrailingLogs uint64
	// GossipStatus is alive, dead, left, or none.
	GossipStatus string
	// LeaderSeen is the leader id the member's gossip metadata reports.
	LeaderSeen string
	// ClusterVersion is the newest cluster version the member's release
	// supports, as it announces it (0: a release that announces none).
	ClusterVersion uint32
	// StorageFailed is the member's storage fault in a few words, empty
	// while its storage works (StorageFaults); such a member is not
	// healthy.
	StorageFailed string
	// VoteHold says why the member holds its vote until it has caught up
	// (VoteHolds); empty when it votes.
	VoteHold string
}

// peerInfo is what this node knows about a replica outside Raft: its
// addresses and what gossip says. The local replica is always present.
type peerInfo struct {
	ID            string
	RaftAddress   string
	GRPCAddress   string
	GossipAddress string
	UIAddress     string
	Version       string
	Role          string
	GossipStatus  string
	// StatusSince is when GossipStatus last changed.
	StatusSince time.Time
	LeaderSeen  string
	Expect      int
	HasState    bool
	// Leaving: the member announced its leave; its death is a leave.
	Leaving bool
	// AgentGossipAddress is where the member serves the agents' pool.
	AgentGossipAddress string
	// Incarnation is the member's run (gossipmeta.Meta.Incarnation).
	Incarnation uint64
	// ClusterVersion is gossipmeta.Meta.ClusterVersion.
	ClusterVersion uint32
	// StorageFailed is gossipmeta.Meta.StorageFailed.
	StorageFailed string
	// VoteHold is gossipmeta.Meta.VoteHold.
	VoteHold string
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

// update edits the entry of id in place. A missing entry starts empty and
// is stored only if fn sets its ID.
func (t *peerTable) update(id string, fn func(p *peerInfo)) {
	t.mu.Lock()
	defer t.mu.Unlock()
	p := t.peers[id]
	fn(&p)
	if p.ID != "" {
		t.peers[p.ID] = p
	}
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
	cfg, err := n.configuration()
	if err != nil {
		return nil, err
	}
	_, leaderID := n.raft.LeaderWithID()
	peers := n.peers.all()
	isLeader := n.IsLeader()
	byID := map[string]*Member{}
	for _, s := range cfg.Servers {
		m := &Member{
			ID: string(s.ID), RaftAddress: string(s.Address), InConfig: true,
			Voter: s.Suffrage == raft.Voter, Leader: s.ID == leaderID,
			LastContact: -1, GossipStatus: StatusNone,
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
			if run, _, ok := n.ledger.RemovedRun(id); ok && p.Incarnation != 0 && p.Incarnation == run {
				m.Role = "removed"
			}
			byID[id] = m
		}
		m.GRPCAddress = p.GRPCAddress
		m.GossipAddress = p.GossipAddress
		m.UIAddress = p.UIAddress
		m.Version = p.Version
		m.LeaderSeen = p.LeaderSeen
		m.ClusterVersion = p.ClusterVersion
		if p.GossipStatus != "" {
			m.GossipStatus = p.GossipStatus
		}
	}
	for id, fault := range n.StorageFaults() {
		if m := byID[id]; m != nil {
			m.StorageFailed = fault
		}
	}
	for id, hold := range n.VoteHolds() {
		if m := byID[id]; m != nil {
			m.VoteHold = hold
		}
	}
	for _, m := range byID {
		m.Healthy = m.InConfig && (m.GossipStatus == StatusNone || m.GossipStatus == StatusAlive) && m.StorageFailed == ""
	}
	if isLeader {
		n.applyHealth(byID)
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
// or its gRPC address has not been learned yet. Raft names the leader and
// gossip metadata gives its gRPC address. A replica that Raft has not
// reached yet (a joiner not yet added) falls back to gossip alone: the one
// alive member that announces itself as the leader it sees.
func (n *Node) LeaderInfo() (id, raftAddr, grpcAddr string) {
	a, i := n.raft.LeaderWithID()
	id, raftAddr = string(i), string(a)
	if id == "" {
		return n.gossipLeader()
	}
	if p, ok := n.peers.get(id); ok {
		grpcAddr = p.GRPCAddress
	}
	return id, raftAddr, grpcAddr
}

// gossipLeader is the single alive server member that announces itself as
// leader; several (a stale announcement during a change) give none.
func (n *Node) gossipLeader() (id, raftAddr, grpcAddr string) {
	if n.gossip == nil {
		return "", "", ""
	}
	var found []peerInfo
	for _, p := range n.peers.all() {
		if p.ID != n.cfg.ID && p.GossipStatus == StatusAlive && p.LeaderSeen == p.ID {
			found = append(found, p)
		}
	}
	if len(found) != 1 {
		return "", "", ""
	}
	return found[0].ID, found[0].RaftAddress, found[0].GRPCAddress
}

// GRPCAddress is the gRPC address this replica advertises.
func (n *Node) GRPCAddress() string { return n.cfg.GRPCAddress }

// SetPeerAddresses records a replica's addresses without gossip, for
// clusters formed by hand and for tests; gossip overwrites it.
func (n *Node) SetPeerAddresses(id, raftAddr, grpcAddr string) {
	n.peers.update(id, func(p *peerInfo) {
		p.ID, p.RaftAddress, p.GRPCAddress = id, raftAddr, grpcAddr
		if p.Role == "" {
			p.Role = gossipmeta.RoleServer
		}
		if p.GossipStatus == "" {
			p.GossipStatus = StatusNone
		}
	})
	n.feed.Notify()
}
