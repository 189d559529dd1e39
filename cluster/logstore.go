package cluster

import (
	"fmt"
	"os"
	"path/filepath"
	"sync"
	"time"

	"github.com/hashicorp/raft"
	raftboltdb "github.com/hashicorp/raft-boltdb/v2"
	"go.etcd.io/bbolt"
)

// DefaultPreallocate is how far grapnel-server fills raft.db with zeros
// ahead of use. bbolt grows its file with truncate, which leaves holes:
// the first commit into each new page then also allocates its block, and
// the commit's fdatasync writes the file's block map as well. Blocks that
// already exist are written in place, as etcd preallocates its WAL
// segments. With the default snapshot threshold and trailing logs the
// file reaches this size under load anyway, so the space is spent once.
const DefaultPreallocate = 32 << 20

// preallocateAfter is how long after the start a node waits before it
// fills raft.db: the start, the first election and the first answers
// come first. Filling 32 MiB and syncing it took 50–60 ms, more than the
// whole rest of a start on an empty data directory.
const preallocateAfter = time.Second

// preallocateChunk is how much of raft.db one step of the fill writes
// while Raft's writes wait (see logStore.preallocate).
const preallocateChunk = 1 << 20

// logStore is raft.db, the log and stable store, with a lock around
// every write. The lock lets the preallocation extend the file while
// Raft runs: between two of its writes nothing else writes the file, and
// its end is then past every page bbolt has written. Reads do not take
// it.
type logStore struct {
	*raftboltdb.BoltStore
	path string
	mu   sync.Mutex
}

var (
	_ raft.LogStore    = (*logStore)(nil)
	_ raft.StableStore = (*logStore)(nil)
)

// openLogStore opens (or creates) raft.db under dir.
func openLogStore(dir string) (*logStore, error) {
	path := filepath.Join(dir, "raft.db")
	s, err := raftboltdb.New(raftboltdb.Options{
		Path: path,
		// Without a synced freelist a commit writes fewer pages (bbolt
		// rebuilds the freelist on open, as etcd's backend does); the map
		// freelist keeps allocation cheap as the log is truncated.
		BoltOptions: &bbolt.Options{Timeout: 5 * time.Second, NoFreelistSync: true, FreelistType: bbolt.FreelistMapType},
	})
	if err != nil {
		return nil, fmt.Errorf("cluster: open raft.db: %w", err)
	}
	return &logStore{BoltStore: s, path: path}, nil
}

// StoreLog stores one entry.
func (s *logStore) StoreLog(l *raft.Log) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.BoltStore.StoreLog(l)
}

// StoreLogs stores entries.
func (s *logStore) StoreLogs(logs []*raft.Log) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.BoltStore.StoreLogs(logs)
}

// DeleteRange deletes the entries from minIdx to maxIdx, both included.
func (s *logStore) DeleteRange(minIdx, maxIdx uint64) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.BoltStore.DeleteRange(minIdx, maxIdx)
}

// Set stores a stable-store key.
func (s *logStore) Set(k, v []byte) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.BoltStore.Set(k, v)
}

// SetUint64 stores a stable-store key holding a number.
func (s *logStore) SetUint64(k []byte, v uint64) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.BoltStore.SetUint64(k, v)
}

// needsPreallocation says raft.db is smaller than size.
func (s *logStore) needsPreallocation(size int64) (bool, error) {
	fi, err := os.Stat(s.path)
	if err != nil {
		return false, fmt.Errorf("cluster: raft.db: %w", err)
	}
	return fi.Size() < size, nil
}

// preallocate writes zeros from the end of raft.db up to size and syncs
// them, so that every block up to size exists. Writing, not fallocate: an
// extent fallocate leaves unwritten still changes the block map when first
// written. bbolt must write its own first pages (a file of zeros is not a
// database), so the zeros only ever go past the end of the file, one
// chunk at a time with the store's lock held: then no page bbolt wrote or
// is writing lies there, and bbolt (which never truncates the file with
// NoFreelistSync) later writes its new pages over the zeros in place.
// Each chunk is synced before the next, so a commit's fdatasync, which
// flushes the whole file, never has more than one chunk of zeros to
// write too. It returns early, without error, when stop closes.
func (s *logStore) preallocate(size int64, stop <-chan struct{}) error {
	f, err := os.OpenFile(s.path, os.O_WRONLY, 0)
	if err != nil {
		return fmt.Errorf("cluster: preallocate raft.db: %w", err)
	}
	defer f.Close()
	zeros := make([]byte, preallocateChunk)
	for {
		select {
		case <-stop:
			return nil
		default:
		}
		done, err := s.extend(f, zeros, size)
		if err != nil {
			return fmt.Errorf("cluster: preallocate raft.db to %d bytes: %w", size, err)
		}
		if err := f.Sync(); err != nil {
			return fmt.Errorf("cluster: preallocate raft.db: %w", err)
		}
		if done {
			return nil
		}
	}
}

// extend appends up to len(zeros) zeros to f, under the store's lock, and
// says whether the file has reached size.
func (s *logStore) extend(f *os.File, zeros []byte, size int64) (bool, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	fi, err := f.Stat()
	if err != nil {
		return false, err
	}
	end := fi.Size()
	if end >= size {
		return true, nil
	}
	n := min(int64(len(zeros)), size-end)
	if _, err := f.WriteAt(zeros[:n], end); err != nil {
		return false, err
	}
	return end+n >= size, nil
}

// preallocateLater fills raft.db up to Config.Preallocate once the start
// is over (preallocateAfter), then closes n.preallocated. Raft's writes in
// the meantime grow the file as without preallocation; nothing waits for
// the fill.
func (n *Node) preallocateLater() {
	defer n.wg.Done()
	defer close(n.preallocated)
	size := n.cfg.Preallocate
	if size <= 0 {
		return
	}
	if need, err := n.store.needsPreallocation(size); err != nil || !need {
		if err != nil {
			n.logger.Warn("not preallocating raft.db", "error", err)
		}
		return
	}
	after := n.cfg.preallocateAfter
	if after == 0 {
		after = preallocateAfter
	}
	if !n.sleep(after) {
		return
	}
	if err := n.store.preallocate(size, n.shutdownCh); err != nil {
		n.logger.Warn("could not preallocate raft.db; commits that grow it also sync its block map", "error", err)
	}
}
