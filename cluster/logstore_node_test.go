package cluster_test

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/grapnel-io/grapnel/cluster"
	"github.com/grapnel-io/grapnel/cluster/clustertest"
	"github.com/grapnel-io/grapnel/fsm"
)

// Issue 32 point 6: raft-boltdb/v2 stays a working choice. A replica on
// LogStoreBolt keeps raft.db (it is not moved into a WAL) across
// restarts; started with the WAL it migrates raft.db with every entry;
// started on bolt again its WAL is refused with ErrLogStoreSwitch (not
// an empty log) and left as it was.
func TestLogStoreSwitch_BoltKeptMigratedToWALAndNotBack(t *testing.T) {
	var kind atomic.Value
	kind.Store(cluster.LogStoreBolt)
	c := clustertest.New(t, 1, clustertest.WithConfig(func(cfg *cluster.Config) { cfg.LogStore = kind.Load().(string) }))
	c.WaitLeader(waitLong)
	c.WaitApplied(applyAgents(t, c, "bolt", 5))
	dir := c.Replica("n1").DataDir
	exists := func(name string) bool { _, err := os.Stat(filepath.Join(dir, name)); return err == nil }

	c.Stop("n1")
	if !exists("raft.db") || exists("wal") {
		t.Fatalf("on bolt: raft.db there %t, wal there %t; want raft.db only", exists("raft.db"), exists("wal"))
	}
	c.Restart("n1")
	c.WaitLeader(waitLong)
	c.WaitApplied(applyAgents(t, c, "bolt-again", 5))
	c.Stop("n1")
	if !exists("raft.db") || exists("wal") {
		t.Fatalf("restarted on bolt: raft.db there %t, wal there %t; want raft.db only", exists("raft.db"), exists("wal"))
	}

	kind.Store(cluster.LogStoreWAL)
	c.Restart("n1")
	c.WaitLeader(waitLong)
	c.WaitApplied(applyAgents(t, c, "wal", 5))
	requireAgents(t, c, "n1", append(names("bolt", 5), names("bolt-again", 5)...)...)
	c.Stop("n1")
	if exists("raft.db") || !exists("wal") {
		t.Fatalf("on the WAL: raft.db there %t, wal there %t; want the WAL only", exists("raft.db"), exists("wal"))
	}

	kind.Store(cluster.LogStoreBolt)
	err := c.TryStart("n1")
	if !errors.Is(err, cluster.ErrLogStoreSwitch) || !strings.Contains(err.Error(), "LogStore") {
		t.Fatalf("bolt on a WAL: %v, want ErrLogStoreSwitch naming the field", err)
	}
	if exists("raft.db") {
		t.Fatal("the refused start made a raft.db")
	}
	kind.Store(cluster.LogStoreWAL)
	c.Restart("n1")
	c.WaitLeader(waitLong)
	c.WaitApplied(applyAgents(t, c, "wal-again", 1))
	requireAgents(t, c, "n1", append(append(names("bolt", 5), names("bolt-again", 5)...), names("wal", 5)...)...)
}

// A LogStore that names no store is a configuration error naming the
// field.
func TestLogStore_Unknown(t *testing.T) {
	_, err := cluster.NewNode(cluster.Config{ID: "n1", DataDir: t.TempDir(), RaftAddress: "127.0.0.1:0", FSM: fsm.New(), LogStore: "boltdb"})
	if !errors.Is(err, cluster.ErrConfig) || !strings.Contains(err.Error(), "LogStore") || !strings.Contains(err.Error(), `"boltdb"`) {
		t.Fatalf("err = %v, want ErrConfig naming LogStore and the value", err)
	}
}
