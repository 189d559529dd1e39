package cluster_test

import (
	"errors"
	"io"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/hashicorp/memberlist"

	"github.com/grapnel-io/grapnel/cluster"
	"github.com/grapnel-io/grapnel/cluster/clustertest"
	"github.com/grapnel-io/grapnel/fsm"
	"github.com/grapnel-io/grapnel/internal/gossipmeta"
	"github.com/grapnel-io/grapnel/rpc"
	"github.com/grapnel-io/grapnel/rpc/rpctest"
)

var (
	keyA = []byte("aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa")
	keyB = []byte("bbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbb")
	keyC = []byte("cccccccccccccccccccccccccccccccc")
)

// Requirement (issue 17, point 2): with TLS on the Raft port gossip needs
// a key, and the agents' pool a key of its own.
func TestGossipKeyRules(t *testing.T) {
	ca := rpctest.NewCA(t)
	store, err := rpc.NewTLSStore(ca.Issue(t, "r", "ank-server"))
	if err != nil {
		t.Fatal(err)
	}
	base := func() cluster.Config {
		return cluster.Config{ID: "n1", DataDir: t.TempDir(), RaftAddress: "127.0.0.1:0", GossipAddress: "127.0.0.1:0",
			FSM: fsm.New(), RaftTLS: store, GossipKey: keyA}
	}
	for _, tc := range []struct {
		name, want string
		edit       func(*cluster.Config)
	}{
		{"TLS without a gossip key", "field GossipKey: required with RaftTLS", func(c *cluster.Config) { c.GossipKey = nil }},
		{"agents' pool without a key", "field AgentGossipKeys: required with RaftTLS", func(c *cluster.Config) { c.AgentGossipAddress = "127.0.0.1:0" }},
		{"agents' pool with the replicas' key", "agents must not hold the replicas' key", func(c *cluster.Config) {
			c.AgentGossipAddress, c.AgentGossipKeys = "127.0.0.1:0", [][]byte{keyB, keyA}
		}},
		{"agents' pool with a secondary replica key", "agents must not hold the replicas' key", func(c *cluster.Config) {
			c.GossipSecondaryKeys = [][]byte{keyC}
			c.AgentGossipAddress, c.AgentGossipKeys = "127.0.0.1:0", [][]byte{keyC}
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cfg := base()
			tc.edit(&cfg)
			n, err := cluster.NewNode(cfg)
			if err == nil {
				n.Shutdown()
				t.Fatal("started")
			}
			if !errors.Is(err, cluster.ErrConfig) || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("error %v, want %q", err, tc.want)
			}
		})
	}
}

// servers counts the members announcing role server, from memberlist's
// events (reading Members' Meta would race with memberlist).
type servers struct {
	mu  sync.Mutex
	ids map[string]bool
}

func (s *servers) note(n *memberlist.Node, up bool) {
	meta, err := gossipmeta.Decode(n.Meta)
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.ids == nil {
		s.ids = map[string]bool{}
	}
	s.ids[n.Name] = up && err == nil && meta.Role == gossipmeta.RoleServer
}
func (s *servers) NotifyJoin(n *memberlist.Node)   { s.note(n, true) }
func (s *servers) NotifyUpdate(n *memberlist.Node) { s.note(n, true) }
func (s *servers) NotifyLeave(n *memberlist.Node)  { s.note(n, false) }
func (s *servers) count() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	k := 0
	for _, up := range s.ids {
		if up {
			k++
		}
	}
	return k
}

// agentMember joins addr as an agent would, with key.
func agentMember(t *testing.T, addr string, key []byte) (*servers, error) {
	t.Helper()
	seen := &servers{}
	mc := memberlist.DefaultLANConfig()
	mc.Events = seen
	mc.Name, mc.BindAddr, mc.BindPort, mc.AdvertisePort = "agent:a1", "127.0.0.1", 0, 0
	mc.SecretKey, mc.LogOutput, mc.TCPTimeout = key, io.Discard, time.Second
	ml, err := memberlist.Create(mc)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ml.Shutdown() })
	_, err = ml.Join([]string{addr})
	return seen, err
}

// Requirement (issue 17, point 2): agents gossip in a pool of their own,
// with their own key: there they see the replicas' metadata; with it
// they cannot join the replicas' pool. Keys rotate through the keyring
// (install, use, remove) with the pool staying up.
func TestAgentPoolAndKeyRotation(t *testing.T) {
	ca := rpctest.NewCA(t)
	c := clustertest.New(t, 2, clustertest.WithRaftTLS(replicaCerts(t, ca)), clustertest.WithConfig(func(cfg *cluster.Config) {
		cfg.AgentGossipAddress, cfg.AgentGossipKeys = "127.0.0.1:0", [][]byte{keyB}
	}))
	c.WaitLeader(waitLong)
	n1 := c.Node("n1")

	if _, err := agentMember(t, n1.GossipAddress(), keyB); err == nil {
		t.Fatal("an agent with the agents' key joined the replicas' pool")
	}
	seen, err := agentMember(t, n1.AgentGossipAddress(), keyB)
	if err != nil {
		t.Fatalf("joining the agents' pool: %v", err)
	}
	c.WaitFor("the agent, joined to n1 only, sees both replicas announce role server", waitLong, func() bool { return seen.count() == 2 })
	for _, m := range mustMembers(t, n1) {
		if strings.HasPrefix(m.ID, "agent:") {
			t.Fatalf("the agent entered the replicas' view: %+v", m)
		}
	}

	// Rotation of the replicas' key: install, use, remove, on every
	// replica, each step everywhere before the next.
	for _, step := range [][][]byte{{clustertest.TestGossipKey, keyC}, {keyC, clustertest.TestGossipKey}, {keyC}} {
		for _, id := range c.IDs() {
			if err := c.Node(id).SetGossipKeys(step); err != nil {
				t.Fatal(err)
			}
		}
	}
	if r, a := n1.GossipKeyCounts(); r != 1 || a != 1 {
		t.Fatalf("keys after rotation: replicas %d, agents %d; want 1 and 1", r, a)
	}
	if err := n1.SetAgentGossipKeys([][]byte{keyC}); err == nil {
		t.Fatal("the agents' pool took the replicas' key")
	}
	// The pool works on the new key alone: a replica restarted with it
	// rejoins, one with the old key cannot.
	c.Stop("n2")
	c.WaitFor("n2 gone from n1's gossip", waitLong, func() bool { return status(t, n1, "n2") != cluster.StatusAlive })
	if _, err := agentMember(t, n1.GossipAddress(), clustertest.TestGossipKey); err == nil {
		t.Fatal("the removed key still joins the replicas' pool")
	}
	if _, err := agentMember(t, n1.GossipAddress(), keyC); err != nil {
		t.Fatalf("the new key does not join the replicas' pool: %v", err)
	}
}

func mustMembers(t *testing.T, n *cluster.Node) []cluster.Member {
	t.Helper()
	ms, err := n.Members()
	if err != nil {
		t.Fatal(err)
	}
	return ms
}

func status(t *testing.T, n *cluster.Node, id string) string {
	for _, m := range mustMembers(t, n) {
		if m.ID == id {
			return m.GossipStatus
		}
	}
	return ""
}
