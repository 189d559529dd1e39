package cluster_test

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/grapnel-io/grapnel/cluster"
	"github.com/grapnel-io/grapnel/cluster/clustertest"
	"github.com/grapnel-io/grapnel/fsm"
)

// clustertest.InMemory (cluster.MemoryStore): the replicas write no Raft
// log or snapshot under their data directories; a stopped replica
// restarts with the log it stored, as from its disk, and a wiped one
// with none, as with new flash.
func TestMemoryStore_RestartKeepsTheLogWipeEmptiesIt(t *testing.T) {
	c := clustertest.New(t, 3, clustertest.InMemory())
	c.WaitLeader(waitLong)
	last := applyAgents(t, c, "a", 5)
	c.WaitApplied(last)
	for _, id := range c.IDs() {
		for _, name := range []string{"wal", "raft.db"} {
			if _, err := os.Stat(filepath.Join(c.Replica(id).DataDir, name)); !errors.Is(err, os.ErrNotExist) {
				t.Fatalf("%s: %s in the data directory (%v): the Raft log went to disk", id, name, err)
			}
		}
	}

	// Cut off from the others, a restarted replica has only what its
	// own store kept.
	follower := c.Followers()[0].ID()
	c.Stop(follower)
	c.Isolate(follower)
	c.Restart(follower)
	if got := c.Node(follower).Raft().LastIndex(); got < last {
		t.Fatalf("restarted %s has its log up to %d, stored up to %d", follower, got, last)
	}
	c.Stop(follower)
	c.Heal()
	c.Wipe(follower)
	c.Isolate(follower)
	c.Restart(follower)
	if got := c.Node(follower).Raft().LastIndex(); got != 0 {
		t.Fatalf("wiped %s restarted with its log up to %d", follower, got)
	}
	c.Heal()
	c.WaitApplied(last)
	c.WaitConverged()
}

// A MemoryStore keeps the log itself: a LogStore beside it is refused,
// naming the field.
func TestMemoryStore_RefusesALogStore(t *testing.T) {
	_, err := cluster.NewNode(cluster.Config{ID: "n1", DataDir: t.TempDir(), RaftAddress: "127.0.0.1:0", FSM: fsm.New(),
		MemoryStore: cluster.NewMemoryStore(), LogStore: cluster.LogStoreWAL})
	if !errors.Is(err, cluster.ErrConfig) || !strings.Contains(err.Error(), "LogStore") {
		t.Fatalf("err = %v, want ErrConfig naming LogStore", err)
	}
}
