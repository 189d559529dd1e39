package cluster_test

import (
	"fmt"
	"os"
	"runtime"
	"testing"
	"time"

	"github.com/grapnel-io/grapnel/cluster"
	"github.com/grapnel-io/grapnel/cluster/clustertest"
	"github.com/grapnel-io/grapnel/fsm"
	"github.com/grapnel-io/grapnel/internal/testwait"
)

// Members merges the Raft configuration, gossip metadata and, on the
// leader, health; LeaderInfo on any replica gives the leader's gRPC
// address learned from gossip.
func TestMembers_MergeGossipRaftAndHealth(t *testing.T) {
	c := clustertest.New(t, 3, clustertest.InMemory())
	c.WaitFor("every member healthy with gossip data on the leader", waitLong, func() bool {
		leader := c.WaitLeader(waitLong)
		ms, err := leader.Members()
		if err != nil || len(ms) != 3 {
			return false
		}
		for _, m := range ms {
			r := c.Replica(m.ID)
			if !m.Healthy || !m.Voter || !m.InConfig || m.GossipStatus != cluster.StatusAlive ||
				m.GRPCAddress != r.GRPCAddress || m.GossipAddress != r.GossipAddress || m.RaftAddress != r.RaftAddress ||
				m.LeaderSeen != leader.ID() || m.Leader != (m.ID == leader.ID()) || m.LastContact < 0 {
				return false
			}
		}
		return true
	})
	for _, id := range c.Running() {
		n := c.Node(id)
		c.WaitFor(id+" knows the leader's gRPC address", waitLong, func() bool {
			lid, raftAddr, grpcAddr := n.LeaderInfo()
			l := c.Leader()
			return l != nil && lid == l.ID() && raftAddr == c.Replica(lid).RaftAddress && grpcAddr == c.Replica(lid).GRPCAddress
		})
		if n.IsLeader() {
			continue
		}
		ms, err := n.Members()
		if err != nil {
			t.Fatal(err)
		}
		for _, m := range ms {
			if m.ID != id && m.LastContact != -1 {
				t.Fatalf("follower %s reports last contact %v for %s; only the leader knows it", id, m.LastContact, m.ID)
			}
		}
	}

	victim := c.Followers()[0].ID()
	c.Stop(victim)
	c.WaitFor(victim+" unhealthy and dead on the leader", waitLong, func() bool {
		ms, err := c.WaitLeader(waitLong).Members()
		if err != nil {
			return false
		}
		for _, m := range ms {
			if m.ID == victim {
				return !m.Healthy && m.GossipStatus == cluster.StatusDead && m.InConfig
			}
		}
		return false
	})
}

// Without gossip, SetPeerAddresses tells a replica a peer's gRPC address.
func TestSetPeerAddresses_WithoutGossip(t *testing.T) {
	f := fsm.New()
	n, err := cluster.NewNode(cluster.Config{
		ID: "solo", DataDir: t.TempDir(), RaftAddress: "127.0.0.1:0", GRPCAddress: "127.0.0.1:1", FSM: f,
		Timing: clustertest.FastTiming(),
	})
	if err != nil {
		t.Fatal(err)
	}
	defer n.Shutdown()
	// Raft reports the leader's id a moment after its state turns leader.
	testwait.For(t, waitLong, func() bool { id, _, _ := n.LeaderInfo(); return n.IsLeader() && id != "" }, "the lone replica to bootstrap itself")
	if id, _, grpc := n.LeaderInfo(); id != "solo" || grpc != "127.0.0.1:1" {
		t.Fatalf("LeaderInfo = %s %s", id, grpc)
	}
	n.SetPeerAddresses("other", "127.0.0.1:2", "127.0.0.1:3")
	ms, err := n.Members()
	if err != nil {
		t.Fatal(err)
	}
	if len(ms) != 2 || ms[0].ID != "other" || ms[0].GRPCAddress != "127.0.0.1:3" || ms[0].InConfig || ms[0].GossipStatus != cluster.StatusNone {
		t.Fatalf("members = %+v", ms)
	}
}

// Shutdown stops every goroutine a node started: after a cluster has run,
// lost its leader and been shut down, the goroutine count returns to where
// it was.
func TestShutdown_StopsEveryGoroutine(t *testing.T) {
	if os.Getenv("CLUSTERTEST_LOG") != "" {
		t.Skip("logging keeps goroutines")
	}
	before := runtime.NumGoroutine()
	func() {
		c := clustertest.New(t, 3)
		c.WaitLeader(waitLong)
		applyAgents(t, c, "x", 3)
		c.Stop(c.WaitLeader(waitLong).ID())
		c.WaitLeader(waitLong)
		c.Shutdown()
	}()
	testwait.For(t, 10*time.Second, func() bool { return runtime.NumGoroutine() <= before },
		"the %d goroutines of before, %v", before, testwait.Lazy(func() string {
			buf := make([]byte, 1<<20)
			return fmt.Sprintf("%d after shutdown:\n%s", runtime.NumGoroutine(), buf[:runtime.Stack(buf, true)])
		}))
}
