package cluster

import (
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"testing"

	"github.com/grapnel-io/grapnel/internal/durable"
	"github.com/grapnel-io/grapnel/internal/durable/crashfs"
	"github.com/hashicorp/go-hclog"
	"github.com/hashicorp/raft"
)

// A power cut after a recovery from peers.json leaves the file applied
// (renamed) or not yet, never both or neither; once the rename returned,
// and so before Raft starts, it is applied: a later start does not
// rewrite a configuration the cluster has moved on from.
func TestPeersFileRenameCrashSafe(t *testing.T) {
	path := "/data/" + PeersFile
	content := []byte(`[{"id":"n1","address":"127.0.0.1:1","non_voter":false}]`)
	crashfs.Check(t, crashfs.Sequence{
		Seed: func(m *crashfs.FS) { m.Seed(path, content, 0o600) },
		Run:  func(m *crashfs.FS) error { return markApplied(durable.On(m), path) },
		Check: func(c crashfs.Crash) error {
			_, errPeers := os.Stat(c.Path(path))
			_, errApplied := os.Stat(c.Path(path + ".applied"))
			switch {
			case (errPeers == nil) == (errApplied == nil):
				return fmt.Errorf("peers.json and peers.json.applied: %v, %v; want exactly one", errPeers, errApplied)
			case c.Done && errPeers == nil:
				return errors.New("peers.json would be applied again at the next start")
			}
			return nil
		},
	})
}

// A snapshot's own directory is synced before hashicorp/raft renames it
// into place, so that the names state.bin and meta.json in it are
// durable when it is published (raft syncs the files and the snapshots
// directory, not that one); a failed sync cancels the snapshot, and a
// second Close, which Raft makes after the FSM's own, is harmless.
func TestSnapshotDirSyncedBeforePublish(t *testing.T) {
	dir := t.TempDir()
	if err := durable.MkdirAll(filepath.Join(dir, "snapshots"), 0o700); err != nil {
		t.Fatal(err)
	}
	store, err := raft.NewFileSnapshotStoreWithLogger(dir, 3, hclog.NewNullLogger())
	if err != nil {
		t.Fatal(err)
	}
	var synced []string
	var syncErr error
	snaps := privateSnapshots{SnapshotStore: store, dir: dir, syncDir: func(d string) error {
		for _, f := range []string{"state.bin", "meta.json"} {
			if _, err := os.Stat(filepath.Join(d, f)); err != nil {
				t.Errorf("synced %s before %s was there: %v", d, f, err)
			}
		}
		list, _ := store.List()
		for _, m := range list {
			if m.ID+".tmp" == filepath.Base(d) {
				t.Errorf("synced %s after the snapshot was published", d)
			}
		}
		synced = append(synced, d)
		if syncErr != nil {
			return syncErr
		}
		return durable.SyncDir(d)
	}}
	take := func(index uint64) (raft.SnapshotSink, error) {
		sink, err := snaps.Create(raft.SnapshotVersionMax, index, 1, raft.Configuration{}, 1, nil)
		if err != nil {
			return nil, err
		}
		if _, err := io.WriteString(sink, "state"); err != nil {
			return nil, err
		}
		if err := sink.Close(); err != nil {
			return sink, err
		}
		return sink, sink.Close() // as Raft does after the FSM's Persist closed it
	}
	sink, err := take(10)
	if err != nil {
		t.Fatal(err)
	}
	if want := filepath.Join(dir, "snapshots", sink.ID()+".tmp"); len(synced) != 1 || synced[0] != want {
		t.Fatalf("synced %v, want [%s]", synced, want)
	}
	if list, _ := store.List(); len(list) != 1 {
		t.Fatalf("%d snapshots, want 1", len(list))
	}

	syncErr = errors.New("input/output error")
	if _, err := take(20); !errors.Is(err, syncErr) {
		t.Fatalf("a failed sync gives %v", err)
	}
	if list, _ := store.List(); len(list) != 1 || list[0].Index != 10 {
		t.Fatalf("a snapshot whose directory could not be synced was published: %+v", list)
	}
}
