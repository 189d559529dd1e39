package cluster

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"time"

	"github.com/grapnel-io/grapnel/internal/durable"
	"github.com/hashicorp/go-hclog"
	"github.com/hashicorp/raft"
	raftboltdb "github.com/hashicorp/raft-boltdb/v2"
	wal "github.com/hashicorp/raft-wal"
	"github.com/hashicorp/raft-wal/migrate"
	"github.com/hashicorp/raft-wal/segment"
	"go.etcd.io/bbolt"
)

// The Raft log and stable store is by default a write-ahead log of
// segment files (hashicorp/raft-wal) under DataDir/wal; raft-boltdb/v2
// (DataDir/raft.db) stays a choice (LogStoreBolt). A commit appends its
// entries to the open segment and syncs it once; bbolt, which held the
// log before (raft.db), writes and syncs its pages, then its meta page:
// two fdatasyncs per commit on the leader and again on each follower, in
// a row, since hashicorp/raft stores the leader's entries before it
// replicates them. Measured in docs/replication.md.
const (
	walDir = "wal"
	// boltFile is the log of releases before the WAL; a node migrates it
	// on start (migrateBolt).
	boltFile = "raft.db"
)

// DefaultSegmentSize is the size of one WAL segment file. A segment is
// allocated whole when it is opened (fallocate: no bytes written) and
// deleted once a snapshot covers all of it, so the log takes at most
// the trailing entries plus two segments on disk. 64 MiB (raft-wal's own
// default) would be most of a small unit's free space for a log that
// trails 10,240 entries of about 1 KiB. Every start walks the open
// segment frame by frame twice (scanTail and raft-wal's recovery), so
// its size bounds what a start pays for the log: a vehicle writes a few
// entries per drive and its open segment is anywhere from empty to full.
// With 16 MiB a nearly full one (about 20,000 entries) made the first
// answer about 10 ms later than an empty one (docs/operations.md, "A start
// on a grown log"); a rotation costs a few fsyncs once per 4 MiB.
const DefaultSegmentSize = 4 << 20

// stableKeys are the keys hashicorp/raft keeps in the stable store; the
// first two hold numbers.
var stableKeys = struct{ currentTerm, lastVoteTerm, lastVoteCand []byte }{
	[]byte("CurrentTerm"), []byte("LastVoteTerm"), []byte("LastVoteCand"),
}

// The stores a node can keep its Raft log and stable store in
// (Config.LogStore).
const (
	// LogStoreWAL is raft-wal under DataDir/wal: the default.
	LogStoreWAL = "wal"
	// LogStoreBolt is raft-boltdb/v2 in DataDir/raft.db, the store the
	// design names: a bbolt transaction per commit (two fdatasyncs and a
	// write per dirty page), measured against the WAL in
	// docs/replication.md. The checks of each entry's sum hold on it as
	// on the WAL (integrity.go); the checks of segments and of the WAL's
	// metadata (segcheck.go) are the WAL's own.
	LogStoreBolt = "bolt"
)

// ErrLogStoreSwitch refuses a store that would not read the log the data
// directory holds: a WAL is not moved back into raft.db, and opening
// raft-boltdb beside it would start the replica with an empty log.
var ErrLogStoreSwitch = errors.New("the data directory holds its Raft log in another store")

// rawStore is the Raft log and stable store as it is on disk, under the
// checks and the guard: raft-wal or raft-boltdb/v2.
type rawStore interface {
	raft.LogStore
	raft.StableStore
	Close() error
}

// openStore opens (or creates) the store kind names under dir; dirs makes
// the WAL's directory durable (nil: a Dirs of its own).
func openStore(dir, kind string, segmentSize int, dirs *durable.Dirs, logger hclog.Logger) (rawStore, error) {
	if kind == LogStoreBolt {
		return openBolt(dir)
	}
	return openLogStore(dir, segmentSize, dirs, logger)
}

// openBolt opens (or creates) raft.db under dir, as releases before the
// WAL did. A WAL in dir is refused: its entries are not moved back.
func openBolt(dir string) (*raftboltdb.BoltStore, error) {
	if _, err := os.Stat(filepath.Join(dir, walDir)); err == nil {
		return nil, fmt.Errorf("cluster: %w: field LogStore: %s, but %s holds this replica's Raft log in %s/ (raft-wal), "+
			"which is not moved back into %s; raft-boltdb would start the replica with an empty log. "+
			"Keep the WAL (%s), or move the data directory aside to start the replica anew (it catches up from the leader)",
			ErrLogStoreSwitch, LogStoreBolt, dir, walDir, boltFile, LogStoreWAL)
	} else if !errors.Is(err, fs.ErrNotExist) {
		return nil, fmt.Errorf("cluster: raft log: %w", err)
	}
	path := filepath.Join(dir, boltFile)
	_, statErr := os.Stat(path)
	s, err := raftboltdb.New(raftboltdb.Options{Path: path, BoltOptions: boltOptions()})
	if err != nil {
		return nil, fmt.Errorf("cluster: open raft log %s: %w", path, err)
	}
	// bbolt syncs the file it creates, not its name in the directory.
	if errors.Is(statErr, fs.ErrNotExist) {
		if err := durable.SyncDir(dir); err != nil {
			s.Close()
			return nil, fmt.Errorf("cluster: raft log: %w", err)
		}
	}
	return s, nil
}

// boltOptions are raft.db's, as earlier releases opened it: without a
// synced freelist a commit writes fewer pages (bbolt rebuilds it on
// open, as etcd's backend does); the map freelist keeps allocation cheap
// as the log is cut.
func boltOptions() *bbolt.Options {
	return &bbolt.Options{Timeout: 5 * time.Second, NoFreelistSync: true, FreelistType: bbolt.FreelistMapType}
}

// openLogStore opens (or creates) the WAL under dir, first moving the
// entries and keys of a raft.db there into it.
func openLogStore(dir string, segmentSize int, dirs *durable.Dirs, logger hclog.Logger) (*logStore, error) {
	if err := migrateBolt(dir, segmentSize, logger); err != nil {
		return nil, err
	}
	path := filepath.Join(dir, walDir)
	// raft-wal syncs the directory it writes its segments in, not the
	// name of that directory in the data directory.
	if dirs == nil {
		dirs = durable.NewDirs()
	}
	if err := dirs.MkdirAll(path, 0o700); err != nil {
		return nil, fmt.Errorf("cluster: raft log: %w", err)
	}
	w, err := openWAL(path, segmentSize, logger)
	if err != nil {
		return nil, fmt.Errorf("cluster: open raft log %s: %w", path, err)
	}
	return w, nil
}

// logStore is the Raft log and stable store.
type logStore = wal.WAL

// raft-wal's lines are its own component (raft-wal), limited as the
// other libraries' are (internal/logbridge).
// Its tail segment is read ahead while it opens (readahead.go).
func openWAL(path string, segmentSize int, logger hclog.Logger) (*logStore, error) {
	vfs := newRecoveryFS()
	defer vfs.opened()
	return wal.Open(path, wal.WithSegmentSize(segmentSize), wal.WithLogger(logger.ResetNamed("raft-wal")),
		wal.WithSegmentFiler(segment.NewFiler(path, vfs)))
}

// migrateBolt copies a raft.db (the log of earlier releases) into a new
// WAL and removes it. The copy is built in a side directory and renamed
// into place, so a power loss during the migration leaves raft.db as it
// was and the next start migrates again; one after the rename leaves
// both, and the next start removes raft.db.
func migrateBolt(dir string, segmentSize int, logger hclog.Logger) error {
	boltPath := filepath.Join(dir, boltFile)
	if _, err := os.Stat(boltPath); errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	final := filepath.Join(dir, walDir)
	if _, err := os.Stat(final); err == nil {
		logger.Warn("removing " + boltFile + ": its entries were moved to " + walDir + " by an earlier start")
		return removeSynced(boltPath)
	}
	tmp := final + ".migrating"
	if err := os.RemoveAll(tmp); err != nil {
		return fmt.Errorf("cluster: migrate %s: %w", boltFile, err)
	}
	if err := os.MkdirAll(tmp, 0o700); err != nil {
		return fmt.Errorf("cluster: migrate %s: %w", boltFile, err)
	}
	if err := copyBolt(boltPath, tmp, segmentSize, logger); err != nil {
		return fmt.Errorf("cluster: migrate %s to the WAL: %w", boltFile, err)
	}
	if err := durable.Rename(tmp, final); err != nil {
		return fmt.Errorf("cluster: migrate %s: %w", boltFile, err)
	}
	logger.Info("moved the Raft log from " + boltFile + " to " + walDir)
	return removeSynced(boltPath)
}

// copyBolt copies every entry and stable key of the bolt store at path
// into a new WAL in dir.
func copyBolt(path, dir string, segmentSize int, logger hclog.Logger) error {
	src, err := raftboltdb.New(raftboltdb.Options{Path: path, BoltOptions: boltOptions()})
	if err != nil {
		return err
	}
	defer src.Close()
	dst, err := openWAL(dir, segmentSize, logger)
	if err != nil {
		return err
	}
	defer dst.Close()
	if last, err := src.LastIndex(); err != nil {
		return err
	} else if last > 0 {
		if err := migrate.CopyLogs(context.Background(), dst, src, 1<<20, nil); err != nil {
			return err
		}
	}
	for _, k := range [][]byte{stableKeys.currentTerm, stableKeys.lastVoteTerm} {
		v, err := src.GetUint64(k)
		if err != nil {
			continue // never set
		}
		if err := dst.SetUint64(k, v); err != nil {
			return err
		}
	}
	if v, err := src.Get(stableKeys.lastVoteCand); err == nil && len(v) > 0 {
		if err := dst.Set(stableKeys.lastVoteCand, v); err != nil {
			return err
		}
	}
	return nil
}

func removeSynced(path string) error {
	if err := durable.Remove(path); err != nil {
		return fmt.Errorf("cluster: %w", err)
	}
	return nil
}

var (
	_ rawStore               = (*logStore)(nil)
	_ raft.MonotonicLogStore = (*logStore)(nil)
	_ rawStore               = (*raftboltdb.BoltStore)(nil)
)
