package cluster_test

import (
	"sync/atomic"
	"testing"
	"time"

	"github.com/grapnel-io/grapnel/cluster"
	"github.com/grapnel-io/grapnel/cluster/clustertest"
	"github.com/grapnel-io/grapnel/fsm"
	"github.com/grapnel-io/grapnel/internal/testwait"
)

// A replica that is the only voter elects itself at once, on a fresh data
// directory and on one with state: with a 30 s heartbeat timeout it could
// not lead within the bound otherwise. The configured timing is back in
// place afterwards.
func TestSingleVoterElectsAtOnce(t *testing.T) {
	dir := t.TempDir()
	addr, err := clustertest.FreeAddr()
	if err != nil {
		t.Fatal(err)
	}
	timing := cluster.Timing{HeartbeatTimeout: 30 * time.Second, ElectionTimeout: 30 * time.Second,
		LeaderLeaseTimeout: 50 * time.Millisecond, CommitTimeout: 5 * time.Millisecond}
	for _, run := range []string{"empty data dir", "existing data"} {
		n, err := cluster.NewNode(cluster.Config{ID: "solo", DataDir: dir, RaftAddress: addr, FSM: fsm.New(),
			BootstrapSelf: true, Timing: timing})
		if err != nil {
			t.Fatal(err)
		}
		testwait.For(t, 10*time.Second, n.IsLeader, "%s: the only voter to lead", run)
		if got := n.Stats()["heartbeat_timeout"]; got != "" && got != timing.HeartbeatTimeout.String() {
			t.Errorf("%s: heartbeat timeout %s after the early election", run, got)
		}
		if err := n.Shutdown(); err != nil {
			t.Fatal(err)
		}
	}
}

// slowElections gives every replica started after it is called Raft
// timers so long that no election could happen within the tests' bounds
// but the early one.
func slowElections(slow *atomic.Bool) clustertest.Option {
	return clustertest.WithConfig(func(cfg *cluster.Config) {
		if slow.Load() {
			cfg.Timing.HeartbeatTimeout = time.Minute
			cfg.Timing.ElectionTimeout = time.Minute
		}
	})
}

// Replicas with state started together, as a vehicle's compute units at
// power-on, elect a leader as soon as a majority of them is up instead of
// after a heartbeat timeout: with one-minute timers none could lead
// within the bound otherwise. The state is kept, and the leader commits.
func TestWholeClusterRestart_ElectsEarly(t *testing.T) {
	var slow atomic.Bool
	c := clustertest.New(t, 3, slowElections(&slow), clustertest.InMemory())
	c.WaitLeader(waitLong)
	last := applyAgents(t, c, "a", 5)
	c.WaitApplied(last)
	before := c.Content("n1")
	for _, id := range c.IDs() {
		c.Stop(id)
	}
	slow.Store(true)
	c.RestartAll(c.IDs()...)
	leader := c.WaitLeader(waitLong)
	if err := leader.Barrier(waitLong); err != nil {
		t.Fatal(err)
	}
	c.WaitApplied(last)
	waitSameContent(t, c, before)
	c.WaitApplied(c.MustApply(agentCmd(t, "after-restart")))
}

// A replica that restarts into a cluster that has a leader does not stand
// early: the leader and its term stay.
func TestRestartedFollower_DoesNotDisruptTheLeader(t *testing.T) {
	var slow atomic.Bool
	c := clustertest.New(t, 3, slowElections(&slow), clustertest.InMemory())
	leader := c.WaitLeader(waitLong)
	c.WaitApplied(applyAgents(t, c, "a", 3))
	term := leader.Stats()["term"]
	var follower string
	for _, id := range c.IDs() {
		if id != leader.ID() {
			follower = id
			break
		}
	}
	c.Stop(follower)
	slow.Store(true)
	c.Restart(follower)
	n := c.Node(follower)
	c.WaitFor("the restarted follower to hear from the leader", waitLong, func() bool {
		_, id := n.Leader()
		return id == leader.ID()
	})
	c.WaitApplied(c.MustApply(agentCmd(t, "after-restart")))
	if !leader.IsLeader() || leader.Stats()["term"] != term {
		t.Fatalf("leadership changed: %s leads %v, term %s, was %s", leader.ID(), leader.IsLeader(), leader.Stats()["term"], term)
	}
}

// With DeferSoloElection the lone voter waits for ElectAloneNow, so that
// a server can watch leadership before there is any; then it elects
// itself at once (its 30 s timers would not within the bound).
func TestDeferredSoloElection(t *testing.T) {
	addr, err := clustertest.FreeAddr()
	if err != nil {
		t.Fatal(err)
	}
	timing := cluster.Timing{HeartbeatTimeout: 30 * time.Second, ElectionTimeout: 30 * time.Second,
		LeaderLeaseTimeout: 50 * time.Millisecond, CommitTimeout: 5 * time.Millisecond}
	n, err := cluster.NewNode(cluster.Config{ID: "solo", DataDir: t.TempDir(), RaftAddress: addr, FSM: fsm.New(),
		BootstrapSelf: true, Timing: timing, DeferSoloElection: true})
	if err != nil {
		t.Fatal(err)
	}
	defer n.Shutdown()
	// Without the deferral it would lead within milliseconds.
	holdsFor(t, 300*time.Millisecond, "no election before ElectAloneNow", func() bool { return !n.IsLeader() })
	n.ElectAloneNow()
	select {
	case leading := <-n.LeaderCh():
		if !leading {
			t.Fatal("LeaderCh reported a lost leadership first")
		}
	case <-time.After(10 * time.Second):
		t.Fatal("no leader within 10 s of ElectAloneNow")
	}
	// A second call, as leader, changes nothing.
	n.ElectAloneNow()
	if err := n.Barrier(10 * time.Second); err != nil || !n.IsLeader() {
		t.Fatalf("leader %v after a second ElectAloneNow (barrier: %v)", n.IsLeader(), err)
	}
}

// When the first in turn has the shorter log (it stopped before the
// others committed more), its early stand is refused and the next voter
// stands an election's length later, not after a quarter of the one-minute
// heartbeat timeout.
func TestWholeClusterRestart_BehindFirstVoter_NextStands(t *testing.T) {
	var slow atomic.Bool
	c := clustertest.New(t, 3, slowElections(&slow), clustertest.InMemory())
	c.WaitLeader(waitLong)
	c.WaitApplied(applyAgents(t, c, "a", 3))
	c.Stop("n1")
	c.WaitLeader(waitLong)
	last := c.MustApply(agentCmd(t, "without-n1"))
	c.WaitApplied(last) // on n2 and n3, the replicas running
	c.Stop("n2")
	c.Stop("n3")
	slow.Store(true)
	c.RestartAll(c.IDs()...)
	leader := c.WaitLeader(waitLong)
	if leader.ID() == "n1" {
		t.Fatalf("n1, whose log is behind, leads")
	}
	c.WaitApplied(c.MustApply(agentCmd(t, "after-restart")))
}
