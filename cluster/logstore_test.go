package cluster

import (
	"os"
	"path/filepath"
	"syscall"
	"testing"

	"github.com/hashicorp/raft"
)

// allocated is how many bytes of path have blocks on disk.
func allocated(t *testing.T, path string) (size, onDisk int64) {
	t.Helper()
	fi, err := os.Stat(path)
	if err != nil {
		t.Fatal(err)
	}
	st, ok := fi.Sys().(*syscall.Stat_t)
	if !ok {
		t.Skip("no block counts on this platform")
	}
	return fi.Size(), st.Blocks * 512
}

func TestPreallocatedLogStoreKeepsItsLogs(t *testing.T) {
	dir := t.TempDir()
	const prealloc = 4 << 20
	s, err := openLogStore(dir, prealloc)
	if err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(dir, "raft.db")
	size, onDisk := allocated(t, path)
	if size < prealloc || onDisk < prealloc {
		t.Fatalf("raft.db is %d bytes with %d on disk, want both at least %d", size, onDisk, prealloc)
	}
	var logs []*raft.Log
	for i := uint64(1); i <= 300; i++ {
		logs = append(logs, &raft.Log{Index: i, Term: 1, Type: raft.LogCommand, Data: make([]byte, 1000)})
	}
	if err := s.StoreLogs(logs); err != nil {
		t.Fatal(err)
	}
	if err := s.SetUint64([]byte("CurrentTerm"), 7); err != nil {
		t.Fatal(err)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	// Reopened: nothing is filled again, and every entry is there.
	s, err = openLogStore(dir, prealloc)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	if again, _ := allocated(t, path); again != size {
		t.Fatalf("reopening changed the size from %d to %d", size, again)
	}
	last, err := s.LastIndex()
	if err != nil || last != 300 {
		t.Fatalf("last index %d (%v), want 300", last, err)
	}
	var l raft.Log
	if err := s.GetLog(150, &l); err != nil || len(l.Data) != 1000 {
		t.Fatalf("entry 150: %v, %d bytes", err, len(l.Data))
	}
	if term, err := s.GetUint64([]byte("CurrentTerm")); err != nil || term != 7 {
		t.Fatalf("term %d (%v), want 7", term, err)
	}
}

func TestLogStoreWithoutPreallocationStaysSmall(t *testing.T) {
	dir := t.TempDir()
	s, err := openLogStore(dir, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	if size, _ := allocated(t, filepath.Join(dir, "raft.db")); size >= 1<<20 {
		t.Fatalf("raft.db is %d bytes without preallocation", size)
	}
}
