package cluster_test

import (
	"errors"
	"slices"
	"testing"
	"time"

	"github.com/grapnel-io/grapnel/cluster"
	"github.com/grapnel-io/grapnel/cluster/clustertest"
	"github.com/grapnel-io/grapnel/internal/errs"
)

// Losing the leader elects a new one in a higher term, and every entry
// committed before the loss is still there, on the survivors and on the
// old leader when it comes back.
func TestLeaderLoss_NewLeaderHigherTerm_NoCommittedEntryLost(t *testing.T) {
	c := clustertest.New(t, 3, clustertest.InMemory())
	old := c.WaitLeader(waitLong)
	applyAgents(t, c, "before", 20)
	oldID, oldTerm := old.ID(), old.Raft().CurrentTerm()

	c.Stop(oldID)
	leader := c.WaitLeader(waitLong)
	if leader.ID() == oldID {
		t.Fatalf("stopped replica %s still leads", oldID)
	}
	if term := leader.Raft().CurrentTerm(); term <= oldTerm {
		t.Fatalf("new leader's term %d is not above the old leader's %d", term, oldTerm)
	}
	last := applyAgents(t, c, "after", 5)
	c.WaitApplied(last)
	for _, id := range c.Running() {
		requireAgents(t, c, id, append(names("before", 20), names("after", 5)...)...)
	}

	c.Restart(oldID)
	c.WaitApplied(last)
	c.WaitConverged()
	requireAgents(t, c, oldID, append(names("before", 20), names("after", 5)...)...)
}

// A leader cut off from the others cannot commit: its Apply fails, the
// majority elects a new leader and commits, and after healing the entry
// the old leader proposed is nowhere.
func TestPartitionedLeaderCannotCommit(t *testing.T) {
	c := clustertest.New(t, 3, clustertest.InMemory())
	old := c.WaitLeader(waitLong)
	applyAgents(t, c, "before", 3)
	oldID := old.ID()

	c.Isolate(oldID)
	_, _, err := old.Apply(agentCmd(t, "lost"), 2*time.Second)
	if err == nil {
		t.Fatal("isolated leader committed an entry")
	}
	if !errors.Is(err, errs.ErrNotLeader) {
		t.Logf("isolated leader's apply failed with %v", err)
	}

	var majority *cluster.Node
	c.WaitFor("a leader in the majority", waitLong, func() bool {
		for _, id := range c.Running() {
			if n := c.Node(id); id != oldID && n.IsLeader() {
				majority = n
				return true
			}
		}
		return false
	})
	if _, _, err := majority.Apply(agentCmd(t, "majority"), 5*time.Second); err != nil {
		t.Fatalf("majority cannot commit: %v", err)
	}
	if old.IsLeader() && old.Raft().CurrentTerm() >= majority.Raft().CurrentTerm() {
		t.Fatal("isolated replica still leads in the newest term")
	}

	c.Heal()
	c.WaitLeader(waitLong)
	idx := c.MustApply(agentCmd(t, "healed"))
	c.WaitApplied(idx)
	c.WaitConverged()
	for _, id := range c.Running() {
		if slices.Contains(agents(c.FSM(id)), "lost") {
			t.Fatalf("replica %s holds the entry the isolated leader proposed", id)
		}
		requireAgents(t, c, id, "majority", "healed")
	}
}
