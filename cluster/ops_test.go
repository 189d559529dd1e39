package cluster_test

import (
	"bytes"
	"errors"
	"slices"
	"testing"
	"time"

	"github.com/grapnel-io/grapnel/cluster"
	"github.com/grapnel-io/grapnel/cluster/clustertest"
)

// A snapshot saved on one cluster and restored on another leaves every
// replica of the second with exactly the first's state, with the size
// known and with the size learned by spooling.
func TestSnapshot_SaveOnOneRestoreOnAnother(t *testing.T) {
	src := clustertest.New(t, 1)
	src.WaitLeader(waitLong)
	applyAgents(t, src, "src", 8)
	want := src.Content("n1")
	var snap bytes.Buffer
	if _, err := src.Node("n1").SaveSnapshot(&snap); err != nil {
		t.Fatalf("SaveSnapshot: %v", err)
	}

	dst := clustertest.New(t, 3)
	leader := dst.WaitLeader(waitLong)
	applyAgents(t, dst, "dst", 3)
	if err := dst.Followers()[0].RestoreSnapshot(bytes.NewReader(snap.Bytes()), int64(snap.Len()), 5*time.Second); !errors.Is(err, cluster.ErrNotLeader) {
		t.Fatalf("restore on a follower: %v, want ErrNotLeader", err)
	}
	for _, size := range []int64{int64(snap.Len()), -1} {
		if err := leader.RestoreSnapshot(bytes.NewReader(snap.Bytes()), size, 5*time.Second); err != nil {
			t.Fatalf("RestoreSnapshot(size %d): %v", size, err)
		}
		waitSameContent(t, dst, want)
		applyAgents(t, dst, "between", 1)
	}
	if slices.Contains(agents(dst.FSM("n2")), "dst-0") {
		t.Fatal("restored state still holds the entries from before the restore")
	}
}

// RemoveReplica refuses a follower, the leader itself, an unknown id, and
// a removal that leaves the alive voters without a majority; it removes a
// dead voter, and a live one stays out while it keeps running.
func TestRemoveReplica(t *testing.T) {
	c := clustertest.New(t, 3)
	leader := c.WaitLeader(waitLong)
	followers := c.Followers()
	a, b := followers[0].ID(), followers[1].ID()

	checks := []struct {
		name string
		node *cluster.Node
		id   string
		want error
	}{
		{"on a follower", followers[0], b, cluster.ErrNotLeader},
		{"the leader itself", leader, leader.ID(), cluster.ErrQuorum},
		{"unknown id", leader, "nobody", cluster.ErrUnknownMember},
	}
	for _, ck := range checks {
		if err := ck.node.RemoveReplica(ck.id, time.Second); !errors.Is(err, ck.want) {
			t.Fatalf("%s: %v, want %v", ck.name, err, ck.want)
		}
	}

	c.Stop(a)
	c.WaitFor(a+" dead in gossip", waitLong, func() bool { return gossipStatus(leader, a) == cluster.StatusDead })
	if err := leader.RemoveReplica(b, time.Second); !errors.Is(err, cluster.ErrQuorum) {
		t.Fatalf("removing the last alive follower: %v, want ErrQuorum", err)
	}
	if err := leader.RemoveReplica(a, 5*time.Second); err != nil {
		t.Fatalf("removing the dead follower: %v", err)
	}
	if voters, _ := c.Configuration(leader.ID()); !slices.Equal(voters, sorted(leader.ID(), b)) {
		t.Fatalf("voters = %v", voters)
	}

	if err := leader.RemoveReplica(b, 5*time.Second); err != nil {
		t.Fatalf("removing a live follower of two voters: %v", err)
	}
	holdsFor(t, 1500*time.Millisecond, b+" stays removed", func() bool {
		voters, nonvoters := c.Configuration(leader.ID())
		return !slices.Contains(voters, b) && !slices.Contains(nonvoters, b)
	})
}

// TransferLeadership moves leadership to the named voter, or to any voter,
// and refuses unknown ids and followers.
func TestTransferLeadership(t *testing.T) {
	c := clustertest.New(t, 3)
	leader := c.WaitLeader(waitLong)
	target := c.Followers()[0]
	if err := target.TransferLeadership(""); !errors.Is(err, cluster.ErrNotLeader) {
		t.Fatalf("on a follower: %v", err)
	}
	if err := leader.TransferLeadership("nobody"); !errors.Is(err, cluster.ErrUnknownMember) {
		t.Fatalf("unknown id: %v", err)
	}
	if err := leader.TransferLeadership(target.ID()); err != nil {
		t.Fatalf("to %s: %v", target.ID(), err)
	}
	if got := c.WaitLeader(waitLong); got.ID() != target.ID() {
		t.Fatalf("leader is %s, want %s", got.ID(), target.ID())
	}
	if err := target.TransferLeadership(""); err != nil {
		t.Fatalf("to any: %v", err)
	}
	c.WaitFor("leadership moved on", waitLong, func() bool {
		l := c.Leader()
		return l != nil && l.ID() != target.ID()
	})
}

func gossipStatus(n *cluster.Node, id string) string {
	ms, err := n.Members()
	if err != nil {
		return ""
	}
	for _, m := range ms {
		if m.ID == id {
			return m.GossipStatus
		}
	}
	return ""
}

func sorted(ids ...string) []string {
	slices.Sort(ids)
	return ids
}
