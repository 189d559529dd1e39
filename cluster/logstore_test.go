package cluster

import (
	"fmt"
	"os"
	"path/filepath"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/hashicorp/raft"

	"github.com/grapnel-io/grapnel/fsm"
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

// Raft keeps writing while raft.db is filled: every entry and every
// stable-store key written before, during and after the fill is there
// when the file is opened again, and the file has its size.
func TestPreallocationWhileRaftWritesKeepsEverything(t *testing.T) {
	dir := t.TempDir()
	const prealloc = 8 << 20
	s, err := openLogStore(dir)
	if err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(dir, "raft.db")
	if need, err := s.needsPreallocation(prealloc); err != nil || !need {
		t.Fatalf("a new raft.db needs no preallocation (%v)", err)
	}
	store := func(i uint64) {
		if err := s.StoreLogs([]*raft.Log{{Index: i, Term: 1, Type: raft.LogCommand, Data: make([]byte, 3000)}}); err != nil {
			t.Error(err)
		}
		if err := s.SetUint64([]byte(fmt.Sprintf("key-%d", i)), i); err != nil {
			t.Error(err)
		}
	}
	const before = 50
	for i := uint64(1); i <= before; i++ {
		store(i)
	}
	// A writer keeps storing during the whole fill and for a while after.
	var total uint64
	filled, writing := make(chan struct{}), make(chan struct{})
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		after := 0
		for i := uint64(before + 1); ; i++ {
			store(i)
			total = i
			if i == before+10 {
				close(writing)
			}
			select {
			case <-filled:
				after++
			default:
			}
			if after == 20 {
				return
			}
		}
	}()
	<-writing
	if err := s.preallocate(prealloc, nil); err != nil {
		t.Fatal(err)
	}
	close(filled)
	wg.Wait()
	size, onDisk := allocated(t, path)
	if size < prealloc || onDisk < prealloc {
		t.Fatalf("raft.db is %d bytes with %d on disk, want both at least %d", size, onDisk, prealloc)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	s, err = openLogStore(dir)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	if need, err := s.needsPreallocation(prealloc); err != nil || need {
		t.Fatalf("a filled raft.db needs preallocation again (%v)", err)
	}
	first, _ := s.FirstIndex()
	last, _ := s.LastIndex()
	if first != 1 || last != total {
		t.Fatalf("entries %d to %d, want 1 to %d", first, last, total)
	}
	for i := uint64(1); i <= total; i++ {
		var l raft.Log
		if err := s.GetLog(i, &l); err != nil || len(l.Data) != 3000 {
			t.Fatalf("entry %d: %v, %d bytes", i, err, len(l.Data))
		}
		if v, err := s.GetUint64([]byte(fmt.Sprintf("key-%d", i))); err != nil || v != i {
			t.Fatalf("key-%d: %d (%v)", i, v, err)
		}
	}
}

// The fill stops when asked, and a later one completes it.
func TestPreallocationStopsAndResumes(t *testing.T) {
	dir := t.TempDir()
	s, err := openLogStore(dir)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	stop := make(chan struct{})
	close(stop)
	if err := s.preallocate(4<<20, stop); err != nil {
		t.Fatal(err)
	}
	if need, _ := s.needsPreallocation(4 << 20); !need {
		t.Fatal("a stopped fill filled raft.db anyway")
	}
	if err := s.preallocate(4<<20, nil); err != nil {
		t.Fatal(err)
	}
	if size, onDisk := allocated(t, filepath.Join(dir, "raft.db")); size < 4<<20 || onDisk < 4<<20 {
		t.Fatalf("raft.db is %d bytes with %d on disk after the fill", size, onDisk)
	}
}

func TestLogStoreWithoutPreallocationStaysSmall(t *testing.T) {
	dir := t.TempDir()
	s, err := openLogStore(dir)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	if size, _ := allocated(t, filepath.Join(dir, "raft.db")); size >= 1<<20 {
		t.Fatalf("raft.db is %d bytes without preallocation", size)
	}
}

// A node does not fill raft.db before it starts: the fill comes after,
// and it still comes. One stopped before the fill leaves it for the next
// start.
func TestNodePreallocatesAfterItStarted(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "raft.db")
	const prealloc = 4 << 20
	start := func(after time.Duration) *Node {
		t.Helper()
		n, err := NewNode(Config{ID: "solo", DataDir: dir, RaftAddress: "127.0.0.1:0", FSM: fsm.New(),
			BootstrapSelf: true, Preallocate: prealloc, preallocateAfter: after})
		if err != nil {
			t.Fatal(err)
		}
		return n
	}

	n := start(time.Hour)
	if size, _ := allocated(t, path); size >= prealloc {
		t.Fatalf("raft.db is %d bytes when NewNode returns: the start filled it", size)
	}
	if err := n.Shutdown(); err != nil {
		t.Fatal(err)
	}
	select {
	case <-n.preallocated:
	default:
		t.Fatal("the fill still runs after Shutdown")
	}
	if size, _ := allocated(t, path); size >= prealloc {
		t.Fatalf("raft.db is %d bytes although the node stopped before the fill", size)
	}

	n = start(time.Millisecond)
	defer n.Shutdown()
	select {
	case <-n.preallocated:
	case <-time.After(30 * time.Second):
		t.Fatal("raft.db was not filled within 30 s of the start")
	}
	if size, onDisk := allocated(t, path); size < prealloc || onDisk < prealloc {
		t.Fatalf("raft.db is %d bytes with %d on disk after the fill, want both at least %d", size, onDisk, prealloc)
	}
	// The node still commits, in place now.
	select {
	case <-n.LeaderCh():
	case <-time.After(30 * time.Second):
		t.Fatal("no leader within 30 s")
	}
	if err := n.Barrier(10 * time.Second); err != nil {
		t.Fatal(err)
	}
}
