package cluster

import (
	"io/fs"
	"os"
	"path/filepath"

	"github.com/hashicorp/go-hclog"
	"github.com/hashicorp/raft"
)

// The data directory holds the whole state, config secrets included (the
// snapshots' state.bin, the WAL). Its files are 0600 and its directories
// 0700 whatever mode the directory had when the replica started:
// grapnel-server sets its umask to 077, so that what hashicorp/raft and
// raft-wal create (0644 and 0755 by their own choice) is private from the
// start, and secureDataDir fixes what an earlier release or another tool
// left more open.
const (
	dataDirMode  os.FileMode = 0o700
	dataFileMode os.FileMode = 0o600
)

// secureDataDir sets every directory under dir (dir included) to 0700 and
// takes the group's and others' bits from every file, saying once how
// many it had to fix. A symbolic link is left as it is.
func secureDataDir(dir string, logger hclog.Logger) error {
	fixed := 0
	err := filepath.WalkDir(dir, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.Type()&fs.ModeSymlink != 0 {
			return nil
		}
		fi, err := d.Info()
		if err != nil {
			return err
		}
		perm := fi.Mode().Perm()
		want := perm &^ 0o077
		if d.IsDir() {
			want = dataDirMode
		}
		if perm == want {
			return nil
		}
		fixed++
		return os.Chmod(path, want)
	})
	if err == nil && fixed > 0 {
		logger.Warn("the data directory was readable by other users; its modes were fixed (directories 0700, files 0600)", "dir", dir, "entries", fixed)
	}
	return err
}

// privateSnapshots is the file snapshot store with each new snapshot
// made private (0700, 0600) as soon as it is complete, for a process
// that runs with a more open umask than grapnel-server's, and durable.
// Its writes go through the storage guard (storage.go): one that fails
// marks the storage failed, and none is made after that.
type privateSnapshots struct {
	raft.SnapshotStore
	dir string // the data directory
	// syncDir fsyncs a directory: durable.SyncDir but in tests.
	syncDir func(string) error
	// guard watches the writes; nil passes them through.
	guard *storageGuard
}

func (p privateSnapshots) Create(version raft.SnapshotVersion, index, term uint64, configuration raft.Configuration,
	configurationIndex uint64, trans raft.Transport) (raft.SnapshotSink, error) {
	var sink raft.SnapshotSink
	err := p.guard.write("create snapshot", func() error {
		var err error
		sink, err = p.SnapshotStore.Create(version, index, term, configuration, configurationIndex, trans)
		return err
	})
	if err != nil {
		return nil, err
	}
	return &privateSink{SnapshotSink: sink, dir: p.dir, syncDir: p.syncDir, guard: p.guard}, nil
}

type privateSink struct {
	raft.SnapshotSink
	dir     string
	syncDir func(string) error
	guard   *storageGuard
	synced  bool // Close may be called again (the FSM's Persist, then Raft)
}

// Write writes snapshot data; the file store buffers it, so a failure
// may also show first at Close.
func (s *privateSink) Write(p []byte) (n int, err error) {
	err = s.guard.write("write snapshot", func() error {
		n, err = s.SnapshotSink.Write(p)
		return err
	})
	return n, err
}

// Close completes the snapshot (see complete); a failure marks the
// storage failed.
func (s *privateSink) Close() error {
	return s.guard.write("complete snapshot", s.complete)
}

// complete completes the snapshot, then makes it private. The snapshot is
// written under the data directory, which is 0700, so nobody else could
// read it meanwhile.
//
// hashicorp/raft (v1.7.3) fsyncs state.bin and meta.json and, after
// renaming <id>.tmp to <id>, the snapshots directory, but never <id>.tmp
// itself: the two files' names in it are not durable, and a power cut
// after raft has reaped the older snapshots and compacted the log could
// leave an empty snapshot directory and nothing else. Both names exist
// from Create on, so syncing the directory before raft's Close makes
// them durable before the rename that publishes them.
func (s *privateSink) complete() error {
	snaps := filepath.Join(s.dir, "snapshots")
	if !s.synced {
		if err := s.syncDir(filepath.Join(snaps, s.ID()+".tmp")); err != nil {
			s.SnapshotSink.Cancel()
			return err
		}
		s.synced = true
	}
	if err := s.SnapshotSink.Close(); err != nil {
		return err
	}
	for _, p := range []string{snaps, filepath.Join(snaps, s.ID())} {
		if err := os.Chmod(p, dataDirMode); err != nil {
			return err
		}
	}
	entries, err := os.ReadDir(filepath.Join(snaps, s.ID()))
	if err != nil {
		return err
	}
	for _, e := range entries {
		if e.Type().IsRegular() {
			if err := os.Chmod(filepath.Join(snaps, s.ID(), e.Name()), dataFileMode); err != nil {
				return err
			}
		}
	}
	return nil
}
