package cluster

import (
	"bytes"
	"sync/atomic"
	"testing"

	"github.com/hashicorp/raft"
)

// countedStore is an in-memory raw store that counts its log reads and
// can hold one read, after it read the entry, until released.
type countedStore struct {
	*raft.InmemStore
	reads atomic.Int64
	hold  chan chan struct{} // a read sends its release channel here, then waits on it
}

func (c *countedStore) Close() error { return nil }

func (c *countedStore) GetLog(index uint64, l *raft.Log) error {
	c.reads.Add(1)
	err := c.InmemStore.GetLog(index, l)
	if c.hold != nil {
		release := make(chan struct{})
		c.hold <- release
		<-release
	}
	return err
}

func logEntry(i uint64, data string) *raft.Log {
	return &raft.Log{Index: i, Term: 1, Type: raft.LogCommand, Data: []byte(data)}
}

func getData(t *testing.T, s *startReads, i uint64) string {
	t.Helper()
	var l raft.Log
	if err := s.GetLog(i, &l); err != nil {
		t.Fatalf("GetLog(%d): %v", i, err)
	}
	return string(l.Data)
}

// Between begin and the release, an entry is read from the store once;
// before begin and after the release, every time.
func TestStartReadsKeepsWhatTheStartRead(t *testing.T) {
	raw := &countedStore{InmemStore: raft.NewInmemStore()}
	if err := raw.StoreLogs([]*raft.Log{logEntry(1, "a"), logEntry(2, "b"), logEntry(3, "c")}); err != nil {
		t.Fatal(err)
	}
	s := &startReads{rawStore: raw}
	getData(t, s, 1)
	getData(t, s, 1)
	if n := raw.reads.Load(); n != 2 {
		t.Fatalf("%d reads before begin, want 2", n)
	}
	s.begin(3)
	for range 3 {
		for i := uint64(1); i <= 3; i++ {
			if got, want := getData(t, s, i), string(rune('a'+i-1)); got != want {
				t.Fatalf("entry %d: %q, want %q", i, got, want)
			}
		}
	}
	if n := raw.reads.Load(); n != 5 {
		t.Fatalf("%d reads of the store, want 5 (2 before begin, then one per entry)", n)
	}
	if !s.tick(2) {
		t.Fatal("tick found nothing kept")
	}
	getData(t, s, 3)
	if n := raw.reads.Load(); n != 5 {
		t.Fatal("released before Raft applied the last entry")
	}
	s.tick(3)
	getData(t, s, 3)
	if n := raw.reads.Load(); n != 6 {
		t.Fatalf("%d reads after the release, want 6", n)
	}
	if s.tick(3) {
		t.Fatal("entries kept after the release")
	}
}

// A write drops what it changes: a follower that cuts its log's tail and
// stores the leader's entries reads the new ones. The bytes kept are
// bounded, and the ticks end the keeping even if Raft never catches up.
func TestStartReadsWritesAndBounds(t *testing.T) {
	raw := &countedStore{InmemStore: raft.NewInmemStore()}
	if err := raw.StoreLogs([]*raft.Log{logEntry(1, "old1"), logEntry(2, "old2"), logEntry(3, "old3")}); err != nil {
		t.Fatal(err)
	}
	s := &startReads{rawStore: raw}
	s.begin(3)
	getData(t, s, 2)
	getData(t, s, 3)
	if err := s.DeleteRange(2, 3); err != nil {
		t.Fatal(err)
	}
	if err := s.StoreLogs([]*raft.Log{logEntry(2, "new2"), logEntry(3, "new3")}); err != nil {
		t.Fatal(err)
	}
	if got := getData(t, s, 2) + getData(t, s, 3); got != "new2new3" {
		t.Fatalf("after the overwrite: %q", got)
	}
	getData(t, s, 1)
	if err := s.StoreLogs([]*raft.Log{logEntry(4, "four")}); err != nil {
		t.Fatal(err)
	}
	before := raw.reads.Load()
	getData(t, s, 1)
	if raw.reads.Load() != before {
		t.Fatal("an append after the kept entries dropped them")
	}

	big := &startReads{rawStore: raw}
	if err := raw.StoreLogs([]*raft.Log{{Index: 5, Term: 1, Type: raft.LogCommand, Data: bytes.Repeat([]byte{1}, startReadsMax)}}); err != nil {
		t.Fatal(err)
	}
	big.begin(5)
	getData(t, big, 1)
	getData(t, big, 5)
	if big.bytes > startReadsMax {
		t.Fatalf("%d bytes kept, over the bound %d", big.bytes, startReadsMax)
	}
	for range startReadsTicks - 1 {
		big.tick(0)
	}
	if !big.tick(0) || big.tick(0) {
		t.Fatalf("still keeping after %d ticks", startReadsTicks)
	}
}

// A read that raced a write returns what it read, but does not keep it:
// the next read finds what the write stored.
func TestStartReadsDoesNotKeepARacedRead(t *testing.T) {
	raw := &countedStore{InmemStore: raft.NewInmemStore(), hold: make(chan chan struct{})}
	if err := raw.InmemStore.StoreLogs([]*raft.Log{logEntry(1, "old")}); err != nil {
		t.Fatal(err)
	}
	s := &startReads{rawStore: raw}
	s.begin(1)
	done := make(chan string)
	go func() {
		var l raft.Log
		_ = s.GetLog(1, &l)
		done <- string(l.Data)
	}()
	release := <-raw.hold // it read "old" and waits
	if err := s.DeleteRange(1, 1); err != nil {
		t.Fatal(err)
	}
	if err := s.StoreLogs([]*raft.Log{logEntry(1, "new")}); err != nil {
		t.Fatal(err)
	}
	close(release)
	if got := <-done; got != "old" {
		t.Fatalf("the raced read returned %q", got)
	}
	go func() { close(<-raw.hold) }()
	if got := getData(t, s, 1); got != "new" {
		t.Fatalf("after a raced read: %q, want the entry the write stored", got)
	}
}
