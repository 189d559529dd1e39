package cluster_test

import (
	"bytes"
	"errors"
	"slices"
	"testing"
	"time"

	"github.com/grapnel-io/grapnel/cluster"
	"github.com/grapnel-io/grapnel/cluster/clustertest"
	"github.com/grapnel-io/grapnel/internal/errs"
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
	dst.WaitLeader(waitLong)
	applyAgents(t, dst, "dst", 3)
	if err := dst.Followers()[0].RestoreSnapshot(bytes.NewReader(snap.Bytes()), int64(snap.Len()), 5*time.Second); !errors.Is(err, errs.ErrNotLeader) {
		t.Fatalf("restore on a follower: %v, want errs.ErrNotLeader", err)
	}
	for _, size := range []int64{int64(snap.Len()), -1} {
		err := onLeader(dst, func(l *cluster.Node) error {
			return l.RestoreSnapshot(bytes.NewReader(snap.Bytes()), size, 5*time.Second)
		})
		if err != nil {
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
		{"on a follower", followers[0], b, errs.ErrNotLeader},
		{"the leader itself", leader, leader.ID(), errs.ErrQuorum},
	}
	for _, ck := range checks {
		if _, err := ck.node.RemoveReplica(ck.id, time.Second); !errors.Is(err, ck.want) {
			t.Fatalf("%s: %v, want %v", ck.name, err, ck.want)
		}
	}
	// Removal is idempotent: an id not in the configuration is already
	// removed (issue 17 point 6: a retry after "outcome unknown").
	if already, err := leader.RemoveReplica("nobody", time.Second); err != nil || !already {
		t.Fatalf("unknown id: already %v, %v; want already removed", already, err)
	}

	c.Stop(a)
	c.WaitFor(a+" dead in gossip", waitLong, func() bool { return gossipStatus(c.WaitLeader(waitLong), a) == cluster.StatusDead })
	var other string
	err := onLeader(c, func(l *cluster.Node) error {
		other = otherThan(c, l.ID())
		_, err := l.RemoveReplica(other, time.Second)
		return err
	})
	if !errors.Is(err, errs.ErrQuorum) {
		t.Fatalf("removing the last alive follower: %v, want errs.ErrQuorum", err)
	}
	if err := onLeader(c, func(l *cluster.Node) error { _, err := l.RemoveReplica(a, 5*time.Second); return err }); err != nil {
		t.Fatalf("removing the dead follower: %v", err)
	}
	leader = c.WaitLeader(waitLong)
	other = otherThan(c, leader.ID())
	if voters, _ := c.Configuration(leader.ID()); !slices.Equal(voters, sorted(leader.ID(), other)) {
		t.Fatalf("voters = %v", voters)
	}

	var removed, kept string
	if err := onLeader(c, func(l *cluster.Node) error {
		removed, kept = otherThan(c, l.ID()), l.ID()
		_, err := l.RemoveReplica(removed, 5*time.Second)
		return err
	}); err != nil {
		t.Fatalf("removing a live follower of two voters: %v", err)
	}
	holdsFor(t, 1500*time.Millisecond, removed+" stays removed", func() bool {
		voters, nonvoters := c.Configuration(kept)
		return !slices.Contains(voters, removed) && !slices.Contains(nonvoters, removed)
	})
}

// onLeader runs fn on the leader, again on the next one while leadership
// moves (busy machines see spurious elections).
func onLeader(c *clustertest.Cluster, fn func(*cluster.Node) error) error {
	deadline := time.Now().Add(waitLong)
	for {
		err := fn(c.WaitLeader(waitLong))
		if !errors.Is(err, errs.ErrNotLeader) || time.Now().After(deadline) {
			return err
		}
	}
}

// otherThan is the running replica that is not id (two are running).
func otherThan(c *clustertest.Cluster, id string) string {
	for _, r := range c.Running() {
		if r != id {
			return r
		}
	}
	return ""
}

// TransferLeadership moves leadership to the named voter, or to any voter,
// and refuses unknown ids and followers.
func TestTransferLeadership(t *testing.T) {
	c := clustertest.New(t, 3)
	leader := c.WaitLeader(waitLong)
	target := c.Followers()[0]
	if err := target.TransferLeadership(""); !errors.Is(err, errs.ErrNotLeader) {
		t.Fatalf("on a follower: %v", err)
	}
	if err := leader.TransferLeadership("nobody"); !errors.Is(err, errs.ErrUnknownReplica) {
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
