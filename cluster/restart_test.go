package cluster_test

import (
	"bytes"
	"os"
	"slices"
	"strings"
	"testing"

	"github.com/grapnel-io/grapnel/cluster/clustertest"
)

// Stopping every replica and starting them again keeps the state.
func TestWholeClusterRestart_KeepsState(t *testing.T) {
	eachLogStore(t, testWholeClusterRestart_KeepsState)
}

func testWholeClusterRestart_KeepsState(t *testing.T, store clustertest.Option) {
	c := clustertest.New(t, 3, store)
	c.WaitLeader(waitLong)
	last := applyAgents(t, c, "a", 10)
	c.WaitApplied(last)
	before := c.Content("n1")

	for _, id := range c.IDs() {
		c.Stop(id)
	}
	c.RestartAll(c.IDs()...)
	leader := c.WaitLeader(waitLong)
	if err := leader.Barrier(waitLong); err != nil {
		t.Fatal(err)
	}
	if got := c.Content(leader.ID()); !bytes.Equal(got, before) {
		t.Fatalf("state after restart differs from before")
	}
	c.WaitApplied(last)
	waitSameContent(t, c, before)
	idx := c.MustApply(agentCmd(t, "after-restart"))
	c.WaitApplied(idx)
	c.WaitConverged()
	requireAgents(t, c, "n2", append(names("a", 10), "after-restart")...)
}

// A replica whose Raft has state never bootstraps again: alone it stays
// without a leader in its old three-voter configuration. Fresh peers next
// to it (their flash replaced) do not bootstrap a second cluster, and
// they hold their votes (votehold.go): they cannot know whether n1 lacks
// an entry they had acknowledged, and no leader exists to catch up from.
// Once an operator releases one of them (grapnel cluster repair), n1 is
// elected and pulls both into its cluster, state intact.
func TestExistingState_NeverBootstrapsAgain(t *testing.T) {
	c := clustertest.New(t, 3)
	c.WaitLeader(waitLong)
	last := applyAgents(t, c, "kept", 5)
	c.WaitApplied(last)
	want := c.Content("n1")
	for _, id := range c.IDs() {
		c.Stop(id)
	}

	c.Restart("n1")
	n1 := c.Node("n1")
	holdsFor(t, 4*n1.Timing().ElectionTimeout, "n1 alone without leadership", func() bool { return !n1.IsLeader() })
	if voters, _ := c.Configuration("n1"); !slices.Equal(voters, []string{"n1", "n2", "n3"}) {
		t.Fatalf("n1 configuration = %v, want its old three voters", voters)
	}

	for _, id := range []string{"n2", "n3"} {
		if err := os.RemoveAll(c.Replica(id).DataDir); err != nil {
			t.Fatal(err)
		}
	}
	c.RestartAll("n2", "n3")
	for _, id := range []string{"n2", "n3"} {
		if h := c.Node(id).VoteHold(); !strings.Contains(h, "no Raft state") {
			t.Fatalf("%s vote hold = %q, want one for a start with no Raft state", id, h)
		}
	}
	holdsFor(t, 4*n1.Timing().ElectionTimeout, "no leader while the empty replicas hold their votes", func() bool {
		for _, id := range c.IDs() {
			if c.Node(id).IsLeader() {
				return false
			}
		}
		return true
	})
	if _, err := c.Node("n2").ReleaseVoteHold(); err != nil {
		t.Fatal(err)
	}
	// n2 and n3 have no configuration, so they cannot campaign: whoever
	// leads got the log from n1, and the content check proves it.
	c.WaitLeader(waitLong)
	c.WaitApplied(last)
	waitSameContent(t, c, want)
	for _, id := range c.IDs() {
		if voters, _ := c.Configuration(id); !slices.Equal(voters, []string{"n1", "n2", "n3"}) {
			t.Fatalf("%s configuration = %v", id, voters)
		}
	}
	c.WaitFor("n3 caught up and voting again", waitLong, func() bool { return c.Node("n3").VoteHold() == "" })
}
