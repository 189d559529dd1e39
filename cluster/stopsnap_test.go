package cluster_test

import (
	"bytes"
	"strconv"
	"testing"

	"github.com/grapnel-io/grapnel/cluster"
	"github.com/grapnel-io/grapnel/cluster/clustertest"
)

// A replica that stops with fewer than StopSnapshotMin entries past its
// newest snapshot takes none; with more it takes one that covers every
// entry it applied, and its next start restores it: the state is the
// same and Raft's newest snapshot is the one taken at the stop.
func TestSnapshotBeforeStop(t *testing.T) {
	eachLogStore(t, testSnapshotBeforeStop)
}

func testSnapshotBeforeStop(t *testing.T, store clustertest.Option) {
	c := clustertest.New(t, 1, store)
	c.WaitLeader(waitLong)
	c.WaitApplied(applyAgents(t, c, "few", 3))
	n := c.Node("n1")
	if idx, err := n.SnapshotBeforeStop(); err != nil || idx != 0 {
		t.Fatalf("SnapshotBeforeStop with a few entries: index %d, error %v; want no snapshot", idx, err)
	}
	if got := snapIndex(t, n); got != 0 {
		t.Fatalf("a snapshot at %d after a few entries; want none", got)
	}

	c.WaitApplied(applyAgents(t, c, "many", cluster.StopSnapshotMin))
	if err := n.Barrier(waitLong); err != nil {
		t.Fatal(err)
	}
	applied := n.Raft().AppliedIndex()
	idx, err := n.SnapshotBeforeStop()
	if err != nil {
		t.Fatalf("SnapshotBeforeStop: %v", err)
	}
	if idx < applied {
		t.Fatalf("snapshot at %d, want at least the applied index %d", idx, applied)
	}
	if again, err := n.SnapshotBeforeStop(); err != nil || again != 0 {
		t.Fatalf("a second SnapshotBeforeStop: index %d, error %v; want none", again, err)
	}
	want := c.Content("n1")
	c.Stop("n1")
	c.Restart("n1")
	c.WaitLeader(waitLong)
	if got := snapIndex(t, c.Node("n1")); got != idx {
		t.Fatalf("after the restart the newest snapshot is at %d, want %d", got, idx)
	}
	if err := c.Node("n1").Barrier(waitLong); err != nil {
		t.Fatal(err)
	}
	if got := c.Content("n1"); !bytes.Equal(got, want) {
		t.Fatal("state after the restart differs from the state at the stop")
	}
	requireAgents(t, c, "n1", append(names("few", 3), names("many", cluster.StopSnapshotMin)...)...)
}

// snapIndex is the index of the node's newest snapshot, as Raft reports it.
func snapIndex(t *testing.T, n *cluster.Node) uint64 {
	t.Helper()
	v, err := strconv.ParseUint(n.Stats()["last_snapshot_index"], 10, 64)
	if err != nil {
		t.Fatalf("last_snapshot_index: %v", err)
	}
	return v
}
