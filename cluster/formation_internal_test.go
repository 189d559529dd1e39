package cluster

import (
	"errors"
	"github.com/grapnel-io/grapnel/state"
	"io"
	"strings"
	"testing"
	"time"

	"github.com/hashicorp/raft"

	"github.com/grapnel-io/grapnel/internal/gossipmeta"
)

func TestBootstrapSet(t *testing.T) {
	srv := func(id string, expect int, mod ...func(*peerInfo)) peerInfo {
		p := peerInfo{ID: id, Role: gossipmeta.RoleServer, RaftAddress: id + ":1", GossipStatus: StatusAlive, Expect: expect}
		for _, m := range mod {
			m(&p)
		}
		return p
	}
	table := func(ps ...peerInfo) map[string]peerInfo {
		m := map[string]peerInfo{}
		for _, p := range ps {
			m[p.ID] = p
		}
		return m
	}
	tests := []struct {
		name   string
		peers  map[string]peerInfo
		want   []string
		reason string
	}{
		{"all three", table(srv("c", 3), srv("a", 3), srv("b", 3)), []string{"a", "b", "c"}, ""},
		{"two of three", table(srv("a", 3), srv("b", 3)), nil, "waiting for 1 more replica (seen: a, b)"},
		{"dead one does not count", table(srv("a", 3), srv("b", 3), srv("c", 3, func(p *peerInfo) { p.GossipStatus = StatusDead })), nil, "waiting for 1 more replica (seen: a, b)"},
		{"agents do not count", table(srv("a", 3), srv("b", 3), srv("x", 0, func(p *peerInfo) { p.Role = "agent" })), nil, "waiting for 1 more replica (seen: a, b)"},
		{"conflicting expect", table(srv("a", 3), srv("b", 5), srv("c", 3)), nil, "bootstrap-expect 5"},
		{"peer with state", table(srv("a", 3), srv("b", 3, func(p *peerInfo) { p.HasState = true }), srv("c", 3)), nil, "already has Raft state"},
		{"peer sees a leader", table(srv("a", 3), srv("b", 3), srv("c", 3, func(p *peerInfo) { p.LeaderSeen = "z" })), nil, "already has Raft state"},
		{"self not alive yet", table(srv("b", 3), srv("c", 3), srv("d", 3)), nil, "not alive in gossip"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, reason := bootstrapSet(tt.peers, "a", 3)
			var ids []string
			for _, s := range got {
				if s.Suffrage != raft.Voter || string(s.Address) != string(s.ID)+":1" {
					t.Fatalf("server %+v", s)
				}
				ids = append(ids, string(s.ID))
			}
			if strings.Join(ids, ",") != strings.Join(tt.want, ",") {
				t.Fatalf("servers = %v, want %v", ids, tt.want)
			}
			if !strings.Contains(reason, tt.reason) {
				t.Fatalf("reason %q, want it to mention %q", reason, tt.reason)
			}
		})
	}
}

func TestJoinBackoff(t *testing.T) {
	lo, hi := 100*time.Millisecond, 5*time.Second
	tests := []struct {
		attempt int
		rnd     float64
		want    time.Duration
	}{
		{0, 0, 50 * time.Millisecond},
		{0, 1, 100 * time.Millisecond},
		{1, 1, 200 * time.Millisecond},
		{3, 0.5, 600 * time.Millisecond},
		{6, 1, 5 * time.Second},
		{60, 0, 2500 * time.Millisecond},
	}
	for _, tt := range tests {
		if got := joinBackoff(tt.attempt, lo, hi, func() float64 { return tt.rnd }); got != tt.want {
			t.Fatalf("attempt %d rnd %v: %v, want %v", tt.attempt, tt.rnd, got, tt.want)
		}
	}
}

// Configuration errors wrap ErrConfig and name the field.
func TestConfig_ErrorsNameTheField(t *testing.T) {
	base := func() Config {
		return Config{ID: "a", DataDir: t.TempDir(), RaftAddress: "127.0.0.1:0", FSM: nopFSM{}}
	}
	tests := []struct {
		name  string
		edit  func(*Config)
		field string
	}{
		{"no id", func(c *Config) { c.ID = "" }, "ID"},
		{"no data dir", func(c *Config) { c.DataDir = "" }, "DataDir"},
		{"no raft address", func(c *Config) { c.RaftAddress = "" }, "RaftAddress"},
		{"no fsm", func(c *Config) { c.FSM = nil }, "FSM"},
		{"fsm without a removal ledger", func(c *Config) { c.FSM = bareFSM{} }, "FSM"},
		{"negative expect", func(c *Config) { c.BootstrapExpect = -1 }, "BootstrapExpect"},
		{"expect without gossip", func(c *Config) { c.BootstrapExpect = 3 }, "BootstrapExpect"},
		{"self and expect", func(c *Config) { c.BootstrapSelf, c.BootstrapExpect, c.GossipAddress = true, 3, "127.0.0.1:0" }, "BootstrapSelf"},
		{"join without gossip", func(c *Config) { c.Join = []string{"x:1"} }, "Join"},
		{"bad key", func(c *Config) { c.GossipAddress, c.GossipKey = "127.0.0.1:0", []byte("short") }, "GossipKey"},
		{"bad gossip address", func(c *Config) { c.GossipAddress = "nope" }, "GossipAddress"},
		{"wildcard raft address", func(c *Config) { c.RaftAddress = "0.0.0.0:0" }, "RaftAddress"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			cfg := base()
			tt.edit(&cfg)
			n, err := NewNode(cfg)
			if err == nil {
				n.Shutdown()
				t.Fatal("NewNode accepted a bad configuration")
			}
			if !strings.Contains(err.Error(), "field "+tt.field) {
				t.Fatalf("err %q does not name field %s", err, tt.field)
			}
			if tt.field != "RaftAddress" && tt.field != "GossipAddress" && !errors.Is(err, ErrConfig) {
				t.Fatalf("err %v does not wrap ErrConfig", err)
			}
		})
	}
}

func TestTiming_Defaults(t *testing.T) {
	got := Timing{}.withDefaults()
	if got.Autopilot.LastContactThreshold != 300*time.Millisecond || got.Gossip.ProbeInterval != time.Second ||
		got.Autopilot.MaxTrailingLogs != 250 || got.HeartbeatTimeout != 300*time.Millisecond ||
		got.HeartbeatInterval != 125*time.Millisecond || got.check() != nil {
		t.Fatalf("defaults = %+v", got)
	}
	slow := Timing{HeartbeatTimeout: 900 * time.Millisecond}.withDefaults()
	if slow.Autopilot.LastContactThreshold != 900*time.Millisecond {
		t.Fatalf("threshold for a 900 ms heartbeat = %v, want 900ms", slow.Autopilot.LastContactThreshold)
	}
	if rd := RaftDefaultTiming().withDefaults(); rd.Autopilot.LastContactThreshold <= 900*time.Millisecond {
		t.Fatalf("raft default timing threshold %v not scaled", rd.Autopilot.LastContactThreshold)
	}
}

// A replica Raft has not reached yet learns the leader from gossip: the one
// alive member announcing itself as leader.
func TestGossipLeader(t *testing.T) {
	n := &Node{cfg: Config{ID: "me"}, peers: newPeerTable(), gossip: &gossip{}}
	n.peers.put(peerInfo{ID: "me", GossipStatus: StatusAlive})
	n.peers.put(peerInfo{ID: "a", GossipStatus: StatusAlive, LeaderSeen: "a", RaftAddress: "a:1", GRPCAddress: "a:2"})
	n.peers.put(peerInfo{ID: "b", GossipStatus: StatusAlive, LeaderSeen: "a"})
	if id, r, g := n.gossipLeader(); id != "a" || r != "a:1" || g != "a:2" {
		t.Fatalf("gossip leader = %s %s %s", id, r, g)
	}
	n.peers.put(peerInfo{ID: "c", GossipStatus: StatusAlive, LeaderSeen: "c"})
	if id, _, _ := n.gossipLeader(); id != "" {
		t.Fatalf("two members claim leadership, got %q", id)
	}
	n.peers.put(peerInfo{ID: "c", GossipStatus: StatusDead, LeaderSeen: "c"})
	if id, _, _ := n.gossipLeader(); id != "a" {
		t.Fatalf("dead claimant counted, got %q", id)
	}
}

type nopFSM struct{}

func (nopFSM) Apply(*raft.Log) any                 { return nil }
func (nopFSM) Snapshot() (raft.FSMSnapshot, error) { return nil, errors.New("none") }
func (nopFSM) Restore(r io.ReadCloser) error       { return r.Close() }
func (nopFSM) RemovedRun(string) (uint64, uint64, bool) {
	return 0, 0, false
}
func (nopFSM) RemovalEntry(string, uint64, bool, []state.ReplicaCert, int64) ([]byte, error) {
	return nil, errors.New("none")
}
func (nopFSM) RecordedCerts(string) []state.ReplicaCert { return nil }
func (nopFSM) CertificateEntry(string, state.ReplicaCert) ([]byte, error) {
	return nil, errors.New("none")
}
func (nopFSM) RevokedCert(string) (state.RevokedCert, bool) { return state.RevokedCert{}, false }
func (nopFSM) ClusterVersion() uint32                       { return 0 }

// bareFSM keeps no removals.
type bareFSM struct{}

func (bareFSM) Apply(*raft.Log) any                 { return nil }
func (bareFSM) Snapshot() (raft.FSMSnapshot, error) { return nil, errors.New("none") }
func (bareFSM) Restore(r io.ReadCloser) error       { return r.Close() }

func TestEarlyTurn(t *testing.T) {
	voters := func(ids ...string) raft.Configuration {
		var c raft.Configuration
		for _, id := range ids {
			c.Servers = append(c.Servers, raft.Server{Suffrage: raft.Voter, ID: raft.ServerID(id), Address: raft.ServerAddress(id + ":1")})
		}
		return c
	}
	alive := func(ids ...string) map[string]peerInfo {
		m := map[string]peerInfo{}
		for _, id := range ids {
			m[id] = peerInfo{ID: id, Role: gossipmeta.RoleServer, GossipStatus: StatusAlive}
		}
		return m
	}
	three := voters("n1", "n2", "n3")
	withNonvoter := voters("n1", "n2")
	withNonvoter.Servers = append(withNonvoter.Servers, raft.Server{Suffrage: raft.Nonvoter, ID: "n3", Address: "n3:1"})
	leaderSeen := alive("n1", "n2", "n3")
	p := leaderSeen["n3"]
	p.LeaderSeen = "n3"
	leaderSeen["n3"] = p
	dead := alive("n2", "n3")
	dead["n1"] = peerInfo{ID: "n1", Role: gossipmeta.RoleServer, GossipStatus: StatusDead}
	othersDead := map[string]peerInfo{
		"n2": {ID: "n2", Role: gossipmeta.RoleServer, GossipStatus: StatusDead},
		"n3": {ID: "n3", Role: gossipmeta.RoleServer, GossipStatus: StatusLeft},
	}
	agent := alive("n2")
	agent["n1"] = peerInfo{ID: "n1", Role: "agent", GossipStatus: StatusAlive}

	for _, tc := range []struct {
		name  string
		self  string
		cfg   raft.Configuration
		peers map[string]peerInfo
		turn  int
		ok    bool
	}{
		{"all up, first in line", "n1", three, alive("n1", "n2", "n3"), 0, true},
		{"all up, second", "n2", three, alive("n1", "n2", "n3"), 1, true},
		{"all up, third", "n3", three, alive("n1", "n2", "n3"), 2, true},
		{"first is down: second goes first", "n2", three, alive("n2", "n3"), 0, true},
		{"gossip view without itself yet", "n2", three, alive("n3"), 0, true},
		{"alone is no majority", "n1", three, alive("n1"), 0, false},
		{"dead and departed members do not count", "n1", three, othersDead, 0, false},
		{"dead members do not come first", "n3", three, dead, 1, true},
		{"a member sees a leader", "n1", three, leaderSeen, 0, false},
		{"a nonvoter never stands", "n3", withNonvoter, alive("n1", "n2", "n3"), 0, false},
		{"voters next to a nonvoter", "n2", withNonvoter, alive("n1", "n2", "n3"), 1, true},
		{"a single voter is electAloneNow's", "n1", voters("n1"), alive("n1"), 0, false},
		{"not in the configuration", "n4", three, alive("n1", "n2", "n3", "n4"), 0, false},
		{"an agent with a voter's name is not that voter", "n2", three, agent, 0, false},
		{"five voters, three up", "n4", voters("n1", "n2", "n3", "n4", "n5"), alive("n2", "n4", "n5"), 1, true},
		{"five voters, two up", "n4", voters("n1", "n2", "n3", "n4", "n5"), alive("n2", "n4"), 0, false},
	} {
		turn, ok := earlyTurn(tc.self, tc.cfg, tc.peers)
		if turn != tc.turn || ok != tc.ok {
			t.Errorf("%s: turn %d, %v; want %d, %v", tc.name, turn, ok, tc.turn, tc.ok)
		}
	}
}
