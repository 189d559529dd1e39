package cluster

import (
	"fmt"
	"os"
	"path/filepath"
	"time"

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

// openLogStore opens raft.db under dir, the log and stable store, and
// makes sure at least prealloc bytes of it are allocated on disk.
func openLogStore(dir string, prealloc int64) (*raftboltdb.BoltStore, error) {
	path := filepath.Join(dir, "raft.db")
	open := func() (*raftboltdb.BoltStore, error) {
		s, err := raftboltdb.New(raftboltdb.Options{
			Path: path,
			// Without a synced freelist a commit writes fewer pages
			// (bbolt rebuilds the freelist on open, as etcd's backend
			// does); the map freelist keeps allocation cheap as the log
			// is truncated.
			BoltOptions: &bbolt.Options{Timeout: 5 * time.Second, NoFreelistSync: true, FreelistType: bbolt.FreelistMapType},
		})
		if err != nil {
			return nil, fmt.Errorf("cluster: open raft.db: %w", err)
		}
		return s, nil
	}
	// bbolt must write its own first pages: a file of zeros is not a
	// database. So open once, then fill behind what bbolt wrote.
	s, err := open()
	if err != nil || prealloc <= 0 {
		return s, err
	}
	fi, err := os.Stat(path)
	if err != nil {
		s.Close()
		return nil, fmt.Errorf("cluster: raft.db: %w", err)
	}
	if fi.Size() >= prealloc {
		return s, nil
	}
	if err := s.Close(); err != nil {
		return nil, fmt.Errorf("cluster: close raft.db before preallocating: %w", err)
	}
	if err := fillZeros(path, fi.Size(), prealloc); err != nil {
		return nil, fmt.Errorf("cluster: preallocate raft.db to %d bytes: %w", prealloc, err)
	}
	return open()
}

// fillZeros writes zeros into path from offset from up to size and syncs,
// so every block up to size exists. Writing, not fallocate: an extent
// fallocate leaves unwritten still changes the block map when first
// written.
func fillZeros(path string, from, size int64) error {
	f, err := os.OpenFile(path, os.O_WRONLY, 0)
	if err != nil {
		return err
	}
	buf := make([]byte, 1<<20)
	for off := from; off < size; {
		n := min(int64(len(buf)), size-off)
		if _, err := f.WriteAt(buf[:n], off); err != nil {
			f.Close()
			return err
		}
		off += n
	}
	if err := f.Sync(); err != nil {
		f.Close()
		return err
	}
	return f.Close()
}
