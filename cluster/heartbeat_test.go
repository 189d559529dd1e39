package cluster_test

import (
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/grapnel-io/grapnel/cluster"
	"github.com/grapnel-io/grapnel/cluster/clustertest"
	"github.com/grapnel-io/grapnel/fsm"
)

// Only the leader spaces its heartbeats: it runs with a heartbeat timeout
// of ten intervals, every follower with the configured one, and a leader
// that loses its place goes back to the configured timeout, so it detects
// the next leader's failure as fast as any follower.
func TestOnlyTheLeaderSpacesItsHeartbeats(t *testing.T) {
	timing := clustertest.FastTiming()
	timing.HeartbeatInterval = 50 * time.Millisecond
	c := clustertest.New(t, 3, clustertest.WithTiming(timing), clustertest.InMemory())
	const leaderTimeout = 500 * time.Millisecond // 10 × HeartbeatInterval

	paced := func(n *cluster.Node, want time.Duration) func() bool {
		return func() bool {
			rc := n.Raft().ReloadableConfig()
			return rc.HeartbeatTimeout == want && rc.ElectionTimeout >= want
		}
	}
	old := c.WaitLeader(waitLong)
	c.WaitFor("the leader to space its heartbeats", waitLong, paced(old, leaderTimeout))
	c.WaitFor("the leader's heartbeat pacer", waitLong, old.PacingHeartbeats)
	// A replica that saw another bootstrap first holds its vote, and does
	// not stand, until it has caught up (votehold.go).
	for _, f := range c.Followers() {
		c.WaitFor("follower "+f.ID()+" to vote and run with the configured heartbeat timeout", waitLong, func() bool {
			return f.VoteHold() == "" && f.Raft().ReloadableConfig().HeartbeatTimeout == timing.HeartbeatTimeout
		})
		if f.PacingHeartbeats() {
			t.Fatalf("follower %s paces heartbeats", f.ID())
		}
	}

	c.Isolate(old.ID())
	var next *cluster.Node
	c.WaitFor("a new leader", waitLong, func() bool {
		for _, id := range c.Running() {
			if n := c.Node(id); id != old.ID() && n.IsLeader() {
				next = n
				return true
			}
		}
		return false
	})
	c.WaitFor("the new leader to space its heartbeats", waitLong, paced(next, leaderTimeout))
	c.Heal()
	c.WaitFor("the old leader to take the follower's timeout again", waitLong, func() bool {
		rc := old.Raft().ReloadableConfig()
		return !old.IsLeader() && rc.HeartbeatTimeout == timing.HeartbeatTimeout && rc.ElectionTimeout == timing.ElectionTimeout
	})
	c.WaitFor("the old leader's pacer to stop", waitLong, func() bool { return !old.PacingHeartbeats() })
	// The old leader rejoins with a term of its own and may unseat next
	// for an election: whoever leads once it settles paces.
	c.WaitFor("the leader after the heal to pace its heartbeats", waitLong, func() bool {
		for _, id := range c.Running() {
			if n := c.Node(id); n.IsLeader() {
				return n.PacingHeartbeats() && paced(n, leaderTimeout)()
			}
		}
		return false
	})
}

// A single voter has no one to heartbeat, so it runs no pacer: an idle
// single replica does not wake for nothing.
func TestSingleVoterDoesNotPace(t *testing.T) {
	c := clustertest.New(t, 1, clustertest.InMemory())
	n := c.WaitLeader(waitLong)
	holdsFor(t, 300*time.Millisecond, "no pacer on a single voter", func() bool { return !n.PacingHeartbeats() })
}

// A heartbeat interval under which the leader would lose its lease after
// one late heartbeat is refused when the node is created.
func TestHeartbeatIntervalChecked(t *testing.T) {
	tests := []struct {
		name     string
		interval time.Duration
		lease    time.Duration
		want     string
	}{
		{"half the lease", 75 * time.Millisecond, 150 * time.Millisecond, "half the leader lease timeout"},
		{"negative", -time.Millisecond, 150 * time.Millisecond, "must be positive"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			addr, err := clustertest.FreeAddr()
			if err != nil {
				t.Fatal(err)
			}
			timing := cluster.Timing{HeartbeatTimeout: 300 * time.Millisecond, ElectionTimeout: 300 * time.Millisecond,
				LeaderLeaseTimeout: tt.lease, HeartbeatInterval: tt.interval}
			n, err := cluster.NewNode(cluster.Config{ID: "solo", DataDir: t.TempDir(), RaftAddress: addr, FSM: fsm.New(),
				BootstrapSelf: true, Timing: timing})
			if err == nil {
				n.Shutdown()
				t.Fatalf("NewNode accepted heartbeat interval %v with lease %v", tt.interval, tt.lease)
			}
			if !errors.Is(err, cluster.ErrConfig) || !strings.Contains(err.Error(), "field Timing.HeartbeatInterval") || !strings.Contains(err.Error(), tt.want) {
				t.Fatalf("error %q does not say %q", err, tt.want)
			}
		})
	}
}
