package cluster_test

import (
	"slices"
	"testing"
	"time"

	"github.com/grapnel-io/grapnel/cluster/clustertest"
)

// A replica that leaves gracefully is out of the configuration when Leave
// returns; a leader hands leadership over first, so the cluster keeps a
// leader and keeps committing.
func TestLeave_LeaderAndFollower(t *testing.T) {
	tests := []struct {
		name   string
		leader bool
	}{
		{"leader", true},
		{"follower", false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := clustertest.New(t, 3, clustertest.InMemory())
			leader := c.WaitLeader(waitLong)
			applyAgents(t, c, "pre", 3)
			leaving := leader
			if !tt.leader {
				leaving = c.Followers()[0]
			}
			id := leaving.ID()
			if err := leaving.Leave(10 * time.Second); err != nil {
				t.Fatalf("Leave: %v", err)
			}
			if leaving.IsLeader() {
				t.Fatal("the replica that left still leads")
			}
			c.Stop(id)
			next := c.WaitLeader(waitLong)
			voters, nonvoters := c.Configuration(next.ID())
			if slices.Contains(voters, id) || slices.Contains(nonvoters, id) || len(voters) != 2 {
				t.Fatalf("configuration after %s left: voters=%v nonvoters=%v", id, voters, nonvoters)
			}
			idx := c.MustApply(agentCmd(t, "after-leave"))
			c.WaitApplied(idx)
			for _, r := range c.Running() {
				requireAgents(t, c, r, append(names("pre", 3), "after-leave")...)
			}
		})
	}
}
