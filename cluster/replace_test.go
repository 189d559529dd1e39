package cluster_test

import (
	"errors"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/grapnel-io/grapnel/cluster"
	"github.com/grapnel-io/grapnel/cluster/clustertest"
	"github.com/grapnel-io/grapnel/internal/errs"
)

// Issue 17 point 6, replace never sticks: a removal that meets a
// leadership change answers "outcome unknown"; removing again on the next
// leader is safe and idempotent; a fresh replica under the removed id (a
// wiped disk, same addresses) becomes a voter within seconds once the
// removal has committed, and the cluster settles with every replica a
// healthy voter.
func TestReplace_RemovalMeetsLeadershipChange(t *testing.T) {
	c := clustertest.New(t, 5, clustertest.InMemory())
	leader := c.WaitLeader(waitLong)
	old := c.Followers()[0].ID()
	applyAgents(t, c, "before", 3)

	// The replaced unit dies; the operator removes it, and leadership is
	// lost right after the removal is proposed: the leader is cut off from
	// every other replica, so the entry cannot commit under it.
	c.Stop(old)
	c.Isolate(leader.ID())
	_, err := leader.RemoveReplica(old, 10*time.Second)
	if !errors.Is(err, errs.ErrOutcomeUnknown) && !errors.Is(err, errs.ErrNotLeader) {
		t.Fatalf("removal on a leader that lost leadership: %v, want ErrOutcomeUnknown (or ErrNotLeader)", err)
	}
	t.Logf("first removal: %v", err)

	// The retry on the next leader removes it, or finds it removed.
	var next *cluster.Node
	c.WaitFor("a new leader among the majority", waitLong, func() bool {
		next = c.Leader()
		return next != nil && next.ID() != leader.ID()
	})
	var already bool
	if err := onLeader(c, func(l *cluster.Node) error {
		if l.ID() == leader.ID() {
			return errs.ErrNotLeader
		}
		var err error
		already, err = l.RemoveReplica(old, 5*time.Second)
		if errors.Is(err, errs.ErrOutcomeUnknown) {
			return errs.ErrNotLeader // retried, as the CLI does
		}
		return err
	}); err != nil {
		t.Fatalf("retrying the removal: %v", err)
	}
	t.Logf("retry: already removed %v", already)
	var again bool
	err = onLeader(c, func(l *cluster.Node) error {
		var err error
		again, err = l.RemoveReplica(old, 5*time.Second)
		return err
	})
	if err != nil || !again {
		t.Fatalf("removing again: already %v, %v; want already removed", again, err)
	}

	// The old leader comes back, and so does a fresh replica under the
	// removed id, with an empty data directory.
	c.Heal()
	c.Wipe(old)
	c.Restart(old)
	start := time.Now()
	waitVoter(c, old)
	t.Logf("fresh %s a voter %v after its start", old, time.Since(start).Round(time.Millisecond))
	waitSettled(t, c, 5)
	if r := c.Node(old).Refused(); r != "" {
		t.Logf("the fresh replica was told while the removal was pending: %s", r)
	}
	applyAgents(t, c, "after", 2)
	c.WaitConverged()
}

// A live replica an operator removed stays out while it keeps running,
// and is told so; the same id started again (a new run) is re-added at
// once, without waiting for gossip to see the old run die.
func TestReplace_RemovedRunStaysOutNewRunJoins(t *testing.T) {
	c := clustertest.New(t, 3, clustertest.InMemory())
	c.WaitLeader(waitLong)
	var removed string
	if err := onLeader(c, func(l *cluster.Node) error {
		removed = c.Followers()[0].ID()
		_, err := l.RemoveReplica(removed, 5*time.Second)
		return err
	}); err != nil {
		t.Fatalf("removing a live follower: %v", err)
	}
	c.WaitFor(removed+" told it is kept out", waitLong, func() bool { return c.Node(removed).Refused() != "" })
	t.Logf("told: %s", c.Node(removed).Refused())
	inConfig := func() bool {
		l := c.Leader()
		if l == nil {
			return false
		}
		voters, nonvoters := c.Configuration(l.ID())
		return slices.Contains(voters, removed) || slices.Contains(nonvoters, removed)
	}
	if inConfig() {
		t.Fatalf("%s is back in the configuration while the removed run runs", removed)
	}
	// cluster members shows it as removed, on every replica.
	for _, id := range c.Running() {
		if id == removed {
			continue
		}
		c.WaitFor(id+" lists "+removed+" as removed", waitLong, func() bool {
			ms, err := c.Node(id).Members()
			return err == nil && slices.ContainsFunc(ms, func(m cluster.Member) bool { return m.ID == removed && m.Role == "removed" })
		})
	}

	c.Stop(removed)
	c.Wipe(removed)
	c.Restart(removed)
	waitVoter(c, removed)
	waitSettled(t, c, 3)
}

// The removal of a live run is in the replicated state, not only in the
// memory of the leader that made it: after leadership moves to another
// replica, the new leader keeps the removed run out too (and says so,
// naming itself), while a new run of it joins.
func TestReplace_RemovedRunStaysOutUnderTheNextLeader(t *testing.T) {
	c := clustertest.New(t, 3, clustertest.InMemory())
	first := c.WaitLeader(waitLong)
	removed := c.Followers()[0].ID()
	if _, err := first.RemoveReplica(removed, 5*time.Second); err != nil {
		t.Fatalf("removing a live follower: %v", err)
	}
	c.WaitFor(removed+" told it is kept out", waitLong, func() bool {
		return strings.Contains(c.Node(removed).Refused(), "leader "+first.ID()+" ")
	})
	// Every replica holds the record.
	run := c.Node(removed).Incarnation()
	for _, id := range c.Running() {
		if id == removed {
			continue
		}
		c.WaitFor(id+" holds the removal", waitLong, func() bool {
			inc, _, ok := c.FSM(id).RemovedRun(removed)
			return ok && inc == run
		})
	}

	var other string
	for _, id := range c.Running() {
		if id != removed && id != first.ID() {
			other = id
		}
	}
	if err := first.TransferLeadership(other); err != nil {
		t.Fatalf("moving leadership to %s: %v", other, err)
	}
	c.WaitFor("the next leader refuses the removed run", waitLong, func() bool {
		return strings.Contains(c.Node(removed).Refused(), "leader "+other+" ")
	})
	t.Logf("told: %s", c.Node(removed).Refused())
	voters, nonvoters := c.Configuration(other)
	if slices.Contains(voters, removed) || slices.Contains(nonvoters, removed) {
		t.Fatalf("the next leader re-added the removed run of %s", removed)
	}

	c.Stop(removed)
	c.Restart(removed)
	waitVoter(c, removed)
	waitSettled(t, c, 3)
}

// An operator's add takes a removal back: the removed run, still
// running, is added again at once and its record is gone on every
// replica.
func TestReplace_OperatorAddTakesTheRemovalBack(t *testing.T) {
	c := clustertest.New(t, 3, clustertest.InMemory())
	leader := c.WaitLeader(waitLong)
	removed := c.Followers()[0].ID()
	if _, err := leader.RemoveReplica(removed, 5*time.Second); err != nil {
		t.Fatalf("removing a live follower: %v", err)
	}
	c.WaitFor(removed+" told it is kept out", waitLong, func() bool { return c.Node(removed).Refused() != "" })
	if err := leader.AddReplica(removed, c.Replica(removed).RaftAddress, 5*time.Second); err != nil {
		t.Fatalf("the operator adds %s back: %v", removed, err)
	}
	for _, id := range c.Running() {
		c.WaitFor(id+" dropped the removal", waitLong, func() bool {
			_, _, ok := c.FSM(id).RemovedRun(removed)
			return !ok
		})
	}
	waitSettled(t, c, 3)
}

// waitVoter waits until the leader's configuration has id as a voter.
func waitVoter(c *clustertest.Cluster, id string) {
	c.WaitFor(id+" a voter", waitLong, func() bool {
		l := c.Leader()
		if l == nil {
			return false
		}
		voters, _ := c.Configuration(l.ID())
		return slices.Contains(voters, id)
	})
}

// waitSettled waits for one leader and n voters that all see it and are
// healthy.
func waitSettled(t *testing.T, c *clustertest.Cluster, n int) {
	t.Helper()
	c.WaitFor("the cluster settled", waitLong, func() bool {
		l := c.Leader()
		if l == nil {
			return false
		}
		ms, err := l.Members()
		if err != nil {
			return false
		}
		healthy := 0
		for _, m := range ms {
			if m.InConfig && m.Voter && m.Healthy {
				healthy++
			}
		}
		if healthy != n {
			return false
		}
		for _, id := range c.Running() {
			if lid, _, _ := c.Node(id).LeaderInfo(); lid != l.ID() {
				return false
			}
		}
		return true
	})
}
