package agent

import (
	"bytes"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/grapnel-io/grapnel/cluster/clustertest"
	"github.com/grapnel-io/grapnel/internal/gossipmeta"
	"github.com/grapnel-io/grapnel/internal/testwait"
)

// fastGossip is the agent's timing in tests, at the pace of
// clustertest.FastTiming's gossip.
var fastGossip = gossipTiming{
	ProbeInterval: 150 * time.Millisecond, ProbeTimeout: 100 * time.Millisecond,
	SuspicionMult: 3, SuspicionMaxMult: 3,
	GossipInterval: 30 * time.Millisecond, PushPullInterval: time.Second,
	TCPTimeout: time.Second, Rejoin: 300 * time.Millisecond,
}

// viewRecorder keeps the newest view a gossip member handed over.
type viewRecorder struct {
	mu   sync.Mutex
	last gossipView
	n    int
}

func (r *viewRecorder) onChange(v gossipView) {
	r.mu.Lock()
	r.last, r.n = v, r.n+1
	r.mu.Unlock()
}

func (r *viewRecorder) get() gossipView {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.last
}

// wait polls the newest view until cond holds, failing after timeout.
func (r *viewRecorder) wait(t *testing.T, what string, timeout time.Duration, cond func(gossipView) bool) gossipView {
	t.Helper()
	var v gossipView
	testwait.For(t, timeout, func() bool { v = r.get(); return cond(v) },
		"gossip: %s (last view %v)", what, testwait.Lazy(func() string { return fmt.Sprintf("%+v", v) }))
	return v
}

// An agent that joins the replicas' gossip learns every replica's gRPC
// address and the leader; it hears of a new leader after the old one
// died, and of a replica added later. The replicas do not take it for
// one of them.
func TestGossipMemberFollowsTheReplicas(t *testing.T) {
	c := clustertest.New(t, 3)
	leader := c.WaitLeader(20 * time.Second).ID()
	var grpcAddrs []string
	for _, id := range c.IDs() {
		grpcAddrs = append(grpcAddrs, c.Replica(id).GRPCAddress)
	}
	slices.Sort(grpcAddrs)

	rec := &viewRecorder{}
	// One replica's address is enough to join.
	g, err := startGossip(gossipConfig{
		Agent: "agent_A", Bind: "127.0.0.1:0", Join: []string{c.Replica(c.IDs()[0]).GossipAddress},
		Timing: fastGossip, Logger: quiet, OnChange: rec.onChange,
	})
	if err != nil {
		t.Fatal(err)
	}
	defer g.Stop()
	rec.wait(t, "the three replicas and the leader "+leader, 10*time.Second, func(v gossipView) bool {
		return slices.Equal(v.Addrs, grpcAddrs) && v.LeaderID == leader && v.LeaderAddr == c.Replica(leader).GRPCAddress
	})

	// The agent is a gossip member of the replicas but never a replica:
	// give the leader's reconciler a few rounds to (wrongly) pick it up.
	if n := g.ml.NumMembers(); n != 4 {
		t.Fatalf("the agent's memberlist has %d members, want the 3 replicas and itself", n)
	}
	var ms string
	testwait.Holds(t, 5*clustertest.FastTiming().Autopilot.ReconcileInterval, func() bool {
		ms = membersOf(t, leader, c)
		return !strings.Contains(ms, "agent")
	}, "the agent left out of the leader's replicas (%s)", testwait.Lazy(func() string { return ms }))
	voters, nonvoters := c.Configuration(leader)
	if len(voters) != 3 || len(nonvoters) != 0 {
		t.Fatalf("configuration voters %v nonvoters %v: the agent must not enter Raft", voters, nonvoters)
	}

	c.Stop(leader)
	next := c.WaitLeader(20 * time.Second).ID()
	rec.wait(t, "the new leader "+next, 10*time.Second, func(v gossipView) bool {
		return v.LeaderID == next && v.LeaderAddr == c.Replica(next).GRPCAddress
	})

	added := c.Add()
	rec.wait(t, "the added replica "+added, 20*time.Second, func(v gossipView) bool {
		return slices.Contains(v.Addrs, c.Replica(added).GRPCAddress)
	})
}

// membersOf lists the member ids a replica reports.
func membersOf(t *testing.T, id string, c *clustertest.Cluster) string {
	t.Helper()
	ms, err := c.Node(id).Members()
	if err != nil {
		t.Fatal(err)
	}
	var ids []string
	for _, m := range ms {
		ids = append(ids, m.ID)
	}
	return strings.Join(ids, ",")
}

// The member joins again while it knows no alive replica, so an agent
// started before the replicas finds them.
func TestGossipMemberJoinsReplicasStartedLater(t *testing.T) {
	c := clustertest.New(t, 1)
	id := c.IDs()[0]
	gossipAddr := c.Replica(id).GossipAddress
	c.WaitLeader(20 * time.Second)
	c.Stop(id)

	rec := &viewRecorder{}
	g, err := startGossip(gossipConfig{
		Agent: "agent_B", Bind: "127.0.0.1:0", Join: []string{gossipAddr},
		Timing: fastGossip, Logger: quiet, OnChange: rec.onChange,
	})
	if err != nil {
		t.Fatal(err)
	}
	defer g.Stop()
	// Some failed joins first.
	testwait.Holds(t, 2*fastGossip.Rejoin, func() bool { return len(rec.get().Addrs) == 0 },
		"an empty view while no replica runs (%+v)", testwait.Lazy(func() string { return fmt.Sprintf("%+v", rec.get()) }))
	c.Restart(id)
	rec.wait(t, "the restarted replica as leader", 20*time.Second, func(v gossipView) bool {
		return v.LeaderID == id && slices.Equal(v.Addrs, []string{c.Replica(id).GRPCAddress})
	})
}

// Requirement (issue 17, point 2): the agent's gossip keys rotate on a
// hangup (SIGHUP) without a restart; a reload that fails keeps them.
func TestGossipKeysReloadOnHangup(t *testing.T) {
	keyA, keyB := []byte("aaaaaaaaaaaaaaaa"), []byte("bbbbbbbbbbbbbbbb")
	hup := make(chan struct{})
	var mu sync.Mutex
	next, failNext := gossipmeta.Keys{keyB, keyA}, false
	g, err := startGossip(gossipConfig{
		Agent: "agent_A", Bind: "127.0.0.1:0", Key: keyA, Timing: fastGossip, Logger: quiet,
		OnChange: func(gossipView) {}, Hangup: hup,
		LoadKeys: func() (gossipmeta.Keys, error) {
			mu.Lock()
			defer mu.Unlock()
			if failNext {
				return nil, errors.New("bad file")
			}
			return next, nil
		},
	})
	if err != nil {
		t.Fatal(err)
	}
	defer g.Stop()
	hup <- struct{}{}
	testwait.For(t, 5*time.Second, func() bool { return bytes.Equal(g.keyring.GetPrimaryKey(), keyB) }, "the new key is primary")
	mu.Lock()
	next = gossipmeta.Keys{keyB}
	mu.Unlock()
	hup <- struct{}{}
	testwait.For(t, 5*time.Second, func() bool { return len(g.keyring.GetKeys()) == 1 }, "the old key removed")
	mu.Lock()
	failNext = true
	mu.Unlock()
	hup <- struct{}{}
	hup <- struct{}{} // the loop took the failing reload and is back waiting
	if !bytes.Equal(g.keyring.GetPrimaryKey(), keyB) || len(g.keyring.GetKeys()) != 1 {
		t.Fatal("a failed reload changed the keys")
	}
}
