package cluster_test

import (
	"slices"
	"testing"
	"time"

	"github.com/grapnel-io/grapnel/cluster"
	"github.com/grapnel-io/grapnel/cluster/clustertest"
)

// A fourth replica that joins is added as a non-voter, catches up, and is
// promoted to voter only after it stayed healthy for the stabilization
// time.
func TestJoin_NonVoterThenPromoted(t *testing.T) {
	c := clustertest.New(t, 3, clustertest.InMemory())
	leader := c.WaitLeader(waitLong)
	last := applyAgents(t, c, "pre", 5)
	stab := leader.Timing().Autopilot.ServerStabilizationTime

	id := c.Add()
	var addedAt, promotedAt time.Time
	c.WaitFor(id+" promoted to voter", waitLong, func() bool {
		voters, nonvoters := c.Configuration(c.WaitLeader(waitLong).ID())
		now := time.Now()
		if slices.Contains(nonvoters, id) && addedAt.IsZero() {
			addedAt = now
		}
		if slices.Contains(voters, id) {
			promotedAt = now
			return true
		}
		return false
	})
	if addedAt.IsZero() {
		t.Fatalf("%s became a voter without first being a non-voter", id)
	}
	if gap := promotedAt.Sub(addedAt); gap < stab-50*time.Millisecond {
		t.Fatalf("%s promoted %v after being added; stabilization time is %v", id, gap, stab)
	}
	c.WaitApplied(last)
	requireAgents(t, c, id, names("pre", 5)...)

	members, err := c.WaitLeader(waitLong).Members()
	if err != nil {
		t.Fatal(err)
	}
	i := slices.IndexFunc(members, func(m cluster.Member) bool { return m.ID == id })
	if i < 0 {
		t.Fatalf("%s missing from Members", id)
	}
	if m := members[i]; !m.Voter || m.GossipStatus != cluster.StatusAlive || m.GRPCAddress != c.Replica(id).GRPCAddress {
		t.Fatalf("member %+v", m)
	}
}

// A member dead in gossip is removed after DeadServerTimeout, but never
// when that would leave fewer voters than the minimum quorum (the
// bootstrap-expect of 3 here).
func TestDeadMember_RemovedAfterTimeout_NeverBelowMinQuorum(t *testing.T) {
	c := clustertest.New(t, 3, clustertest.InMemory())
	leader := c.WaitLeader(waitLong)
	dead := leader.Timing().Autopilot.DeadServerTimeout

	id := c.Add()
	c.WaitFor(id+" promoted", waitLong, func() bool {
		voters, _ := c.Configuration(c.WaitLeader(waitLong).ID())
		return slices.Contains(voters, id)
	})
	stopped := time.Now()
	c.Stop(id)
	c.WaitFor(id+" removed", waitLong, func() bool {
		voters, nonvoters := c.Configuration(c.WaitLeader(waitLong).ID())
		return !slices.Contains(voters, id) && !slices.Contains(nonvoters, id)
	})
	if gap := time.Since(stopped); gap < dead {
		t.Fatalf("%s removed %v after it died; DeadServerTimeout is %v", id, gap, dead)
	}

	victim := c.Followers()[0].ID()
	c.Stop(victim)
	leaderID := c.WaitLeader(waitLong).ID()
	c.WaitFor(victim+" dead in gossip", waitLong, func() bool {
		ms, err := c.Node(leaderID).Members()
		if err != nil {
			return false
		}
		i := slices.IndexFunc(ms, func(m cluster.Member) bool { return m.ID == victim })
		return i >= 0 && ms[i].GossipStatus == cluster.StatusDead
	})
	holdsFor(t, 2*dead+500*time.Millisecond, victim+" kept as the third voter", func() bool {
		voters, _ := c.Configuration(leaderID)
		return slices.Contains(voters, victim) && len(voters) == 3
	})
}
