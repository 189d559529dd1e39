package cluster

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/hashicorp/go-hclog"
	"github.com/hashicorp/raft"
)

// Every bit of what Raft relies on in an entry is covered by its sum; an
// entry without one (an older release's) reads unchecked.
func TestEntrySum_EveryFlipIsFound(t *testing.T) {
	l := &raft.Log{Index: 42, Term: 7, Type: raft.LogCommand, Data: []byte("a command")}
	s := withSums([]*raft.Log{l})[0]
	if l.Extensions != nil {
		t.Fatal("withSums changed Raft's own entry")
	}
	good := *s
	if err := checkEntry(42, &good); err != nil || good.Extensions != nil {
		t.Fatalf("intact entry: %v, extensions %q", err, good.Extensions)
	}
	for bit := range len(s.Data) * 8 {
		c := *s
		c.Data = bytes.Clone(s.Data)
		c.Data[bit/8] ^= 1 << (bit % 8)
		if err := checkEntry(42, &c); !errors.Is(err, ErrCorrupt) {
			t.Fatalf("data bit %d flipped: %v, want ErrCorrupt", bit, err)
		}
	}
	for bit := range 64 {
		c := *s
		c.Term ^= 1 << bit
		if err := checkEntry(42, &c); !errors.Is(err, ErrCorrupt) {
			t.Fatalf("term bit %d flipped: %v", bit, err)
		}
	}
	c := *s
	c.Type = raft.LogNoop
	if err := checkEntry(42, &c); !errors.Is(err, ErrCorrupt) {
		t.Fatalf("type changed: %v", err)
	}
	if err := checkEntry(43, &good); !errors.Is(err, ErrCorrupt) {
		t.Fatalf("entry read for another index: %v", err)
	}
	// A batch: each copy carries its own sum in its own bytes.
	batch := withSums([]*raft.Log{{Index: 1, Term: 1, Data: []byte("a")}, {Index: 2, Term: 1, Data: []byte("b")}, {Index: 3, Term: 2, Data: []byte("c")}})
	for i, e := range batch {
		c := *e
		if err := checkEntry(uint64(i+1), &c); err != nil {
			t.Fatalf("batch entry %d: %v", i+1, err)
		}
	}
	legacy := *l
	if err := checkEntry(42, &legacy); err != nil {
		t.Fatalf("entry without a sum: %v", err)
	}
}

// logStores are the stores the checks of each entry hold on.
var logStores = []string{LogStoreWAL, LogStoreBolt}

// storeGlob matches the files of a store under dir.
func storeGlob(dir, kind string) string {
	if kind == LogStoreBolt {
		return filepath.Join(dir, boltFile)
	}
	return filepath.Join(dir, walDir, "*.wal")
}

// testStore is testWAL for the store kind names.
func testStore(t *testing.T, dir, kind string, n int, term uint64) {
	t.Helper()
	w, err := openStore(dir, kind, 1<<20, nil, hclog.NewNullLogger())
	if err != nil {
		t.Fatal(err)
	}
	cw := checkedWAL{rawStore: w, c: newIntegrity(w, hclog.NewNullLogger())}
	for i := 1; i <= n; i++ {
		l := &raft.Log{Index: uint64(i), Term: term, Type: raft.LogCommand, Data: []byte(fmt.Sprintf("entry-%05d", i))}
		if err := cw.storeLogs([]*raft.Log{l}); err != nil {
			t.Fatal(err)
		}
	}
	if err := w.SetUint64(stableKeys.currentTerm, term+1); err != nil {
		t.Fatal(err)
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
}

// flipIn flips the lowest bit of the first byte of marker wherever it is
// in the files matching glob (bbolt leaves copies of a page it rewrote
// in its free pages: the live one is among them); it fails if the marker
// is in none.
func flipIn(t *testing.T, glob string, marker []byte) {
	t.Helper()
	files, _ := filepath.Glob(glob)
	found := false
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		flipped := false
		for off := 0; ; {
			i := bytes.Index(b[off:], marker)
			if i < 0 {
				break
			}
			b[off+i] ^= 1
			off += i + len(marker)
			flipped = true
		}
		if flipped {
			found = true
			if err := os.WriteFile(f, b, 0o600); err != nil {
				t.Fatal(err)
			}
		}
	}
	if !found {
		t.Fatalf("%q not found in %s", marker, glob)
	}
}

func openForRepair(t *testing.T, dir string) (*logStore, *raft.FileSnapshotStore, *holdState, *integrity) {
	t.Helper()
	w, snaps, h, c := openStoreForRepair(t, dir, LogStoreWAL)
	return w.(*logStore), snaps, h, c
}

// openStoreForRepair is openForRepair for the store kind names.
func openStoreForRepair(t *testing.T, dir, kind string) (rawStore, *raft.FileSnapshotStore, *holdState, *integrity) {
	t.Helper()
	w, err := openStore(dir, kind, 1<<20, nil, hclog.NewNullLogger())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { w.Close() })
	snaps, err := raft.NewFileSnapshotStoreWithLogger(dir, 3, hclog.NewNullLogger())
	if err != nil {
		t.Fatal(err)
	}
	h := newHoldState(dir, time.Now)
	if err := h.load(); err != nil {
		t.Fatal(err)
	}
	return w, snaps, h, newIntegrity(w, hclog.NewNullLogger())
}

// A flipped bit in an entry at rest: the start cuts the log before it,
// and the replica holds its vote for a log through its old last entry.
// raft-wal (and raft-boltdb) alone read the entry back, wrong, without
// an error.
func TestStartupRepair_CutsTheLogAtACorruptEntry(t *testing.T) {
	for _, kind := range logStores {
		t.Run(kind, func(t *testing.T) { testStartupRepairCuts(t, kind) })
	}
}

func testStartupRepairCuts(t *testing.T, kind string) {
	dir := t.TempDir()
	testStore(t, dir, kind, 200, 3)
	flipIn(t, storeGlob(dir, kind), []byte("entry-00120"))

	w, snaps, h, c := openStoreForRepair(t, dir, kind)
	var raw raft.Log
	if err := w.GetLog(120, &raw); err != nil {
		t.Fatalf("the %s store refused the flipped entry itself (%v): this layer's check is not what finds it", kind, err)
	}
	if err := startupRepair(dir, w, snaps, h, c, hclog.NewNullLogger(), func() uint64 { return 4 }); err != nil {
		t.Fatal(err)
	}
	if last, _ := w.LastIndex(); last != 119 {
		t.Fatalf("last index after the repair = %d, want 119 (cut before the bad entry)", last)
	}
	v := h.Held()
	if v == nil || v.Index != 200 || v.Term != 3 || v.Empty {
		t.Fatalf("hold = %+v, want one for a log through entry 200 of term 3", v)
	}
	if c.found.Load() != 1 || c.repaired.Load() != 1 {
		t.Fatalf("found %d, repaired %d", c.found.Load(), c.repaired.Load())
	}
	// The hold is on disk before the cut, and a new run reads it back.
	h2 := newHoldState(dir, time.Now)
	if err := h2.load(); err != nil || h2.Held() == nil || h2.Held().Index != 200 {
		t.Fatalf("hold read back: %+v, %v", h2.Held(), err)
	}
	// It refuses exactly the votes the intact log would have refused.
	for _, tc := range []struct {
		term, index uint64
		refuse      bool
	}{{3, 199, true}, {3, 200, false}, {2, 500, true}, {4, 1, false}} {
		if got := h2.refuses(tc.term, tc.index); got != tc.refuse {
			t.Errorf("candidate log (term %d, index %d): refused %t, want %t", tc.term, tc.index, got, tc.refuse)
		}
	}
}

// testSnapshot writes a snapshot of index and term holding data.
func testSnapshot(t *testing.T, snaps *raft.FileSnapshotStore, index, term uint64, data string) {
	t.Helper()
	_, trans := raft.NewInmemTransport("")
	sink, err := snaps.Create(raft.SnapshotVersionMax, index, term, raft.Configuration{}, 1, trans)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := io.WriteString(sink, data); err != nil {
		t.Fatal(err)
	}
	if err := sink.Close(); err != nil {
		t.Fatal(err)
	}
}

// A flipped bit in the newest snapshot: it goes to the quarantine, and
// the older one with the log replaces it while the log joins it; where
// the log does not, the whole log is cut and the vote held.
func TestStartupRepair_QuarantinesACorruptSnapshot(t *testing.T) {
	for _, tc := range []struct {
		name      string
		headCut   uint64 // log entries cut from the head before the fault
		wantFirst uint64
		wantHold  bool
	}{
		{"log joins the older snapshot", 0, 1, false},
		{"log starts after the older snapshot", 150, 0, true},
	} {
		for _, kind := range logStores {
			t.Run(kind+"/"+tc.name, func(t *testing.T) {
				dir := t.TempDir()
				testStore(t, dir, kind, 250, 2)
				w, snaps, h, c := openStoreForRepair(t, dir, kind)
				testSnapshot(t, snaps, 100, 2, "older-snapshot-state")
				time.Sleep(2 * time.Millisecond) // ids carry milliseconds
				testSnapshot(t, snaps, 200, 2, "newest-snapshot-state")
				if tc.headCut > 0 {
					if err := w.DeleteRange(1, tc.headCut); err != nil {
						t.Fatal(err)
					}
				}
				flipIn(t, filepath.Join(dir, "snapshots", "*", "state.bin"), []byte("newest-snapshot"))
				if err := startupRepair(dir, w, snaps, h, c, hclog.NewNullLogger(), func() uint64 { return 3 }); err != nil {
					t.Fatal(err)
				}
				l, err := snaps.List()
				if err != nil || len(l) != 1 || l[0].Index != 100 {
					t.Fatalf("snapshots after the repair: %v, %v; want the older one only", l, err)
				}
				q, _ := filepath.Glob(filepath.Join(dir, quarantineDir, "snapshot-*"))
				if len(q) != 1 {
					t.Fatalf("quarantine holds %v, want the corrupt snapshot", q)
				}
				if first, _ := w.FirstIndex(); first != tc.wantFirst {
					t.Fatalf("first index %d, want %d", first, tc.wantFirst)
				}
				if got := h.Held() != nil; got != tc.wantHold {
					t.Fatalf("hold %+v, want held %t", h.Held(), tc.wantHold)
				}
			})
		}
	}
}

// A bad entry read while running reads as not found, so that the leader
// sends a snapshot instead; one the snapshot covers is cut from the head
// at once, any other asks for a restart.
func TestCheckedWAL_BadEntryWhileRunning(t *testing.T) {
	for _, kind := range logStores {
		t.Run(kind, func(t *testing.T) { testBadEntryWhileRunning(t, kind) })
	}
}

func testBadEntryWhileRunning(t *testing.T, kind string) {
	dir := t.TempDir()
	testStore(t, dir, kind, 100, 2)
	flipIn(t, storeGlob(dir, kind), []byte("entry-00030"))
	flipIn(t, storeGlob(dir, kind), []byte("entry-00080"))
	w, _, _, c := openStoreForRepair(t, dir, kind)
	c.snapIndex = func() uint64 { return 50 }
	cw := checkedWAL{rawStore: w, c: c}
	var l raft.Log
	if err := cw.GetLog(30, &l); err != raft.ErrLogNotFound {
		t.Fatalf("bad entry 30: %v, want raft.ErrLogNotFound itself", err)
	}
	if first, _ := w.FirstIndex(); first != 31 {
		t.Fatalf("first index %d, want 31: the covered bad entry cut from the head", first)
	}
	select {
	case <-c.corrupted:
		t.Fatal("a covered bad entry asked for a restart")
	default:
	}
	if err := cw.GetLog(80, &l); err != raft.ErrLogNotFound {
		t.Fatalf("bad entry 80: %v", err)
	}
	select {
	case <-c.corrupted:
	default:
		t.Fatal("a bad entry after the snapshot did not ask for a restart")
	}
	if err := cw.GetLog(81, &l); err != nil || string(l.Data) != "entry-00081" || l.Extensions != nil {
		t.Fatalf("entry 81: %v %q %q", err, l.Data, l.Extensions)
	}
}

// BenchmarkStartupCheck is the start's check of the log a replica keeps
// between two snapshots at most (SnapshotThreshold entries of 1 KiB) and
// of a 256 KiB snapshot: what the integrity check adds to a start.
func BenchmarkStartupCheck(b *testing.B) {
	dir := b.TempDir()
	w := benchLog(b, dir)
	snaps, err := raft.NewFileSnapshotStoreWithLogger(dir, 3, hclog.NewNullLogger())
	if err != nil {
		b.Fatal(err)
	}
	_, trans := raft.NewInmemTransport("")
	sink, err := snaps.Create(raft.SnapshotVersionMax, 0, 1, raft.Configuration{}, 1, trans)
	if err != nil {
		b.Fatal(err)
	}
	sink.Write(bytes.Repeat([]byte("s"), 256<<10))
	sink.Close()
	h := newHoldState(dir, time.Now)
	b.ResetTimer()
	for range b.N {
		if err := startupRepair(dir, w, snaps, h, newIntegrity(w, hclog.NewNullLogger()), hclog.NewNullLogger(), func() uint64 { return 1 }); err != nil {
			b.Fatal(err)
		}
	}
	b.StopTimer()
	if h.Held() != nil {
		b.Fatal("a clean log was held")
	}
	w.Close()
}

// BenchmarkStartupScanRaft is what hashicorp/raft's own pass over the
// same log costs at start (NewRaft reads every entry after the snapshot
// for configuration changes): the reference for BenchmarkStartupCheck.
func BenchmarkStartupScanRaft(b *testing.B) {
	dir := b.TempDir()
	w := benchLog(b, dir)
	b.ResetTimer()
	for range b.N {
		var l raft.Log
		for i := uint64(1); i <= DefaultSnapshotThreshold; i++ {
			if err := w.GetLog(i, &l); err != nil {
				b.Fatal(err)
			}
		}
	}
	b.StopTimer()
	w.Close()
}

// benchLog is a WAL under dir holding the most a replica keeps between
// two snapshots: DefaultSnapshotThreshold entries of 1 KiB, with sums.
func benchLog(b *testing.B, dir string) *logStore {
	b.Helper()
	w, err := openLogStore(dir, 16<<20, nil, hclog.NewNullLogger())
	if err != nil {
		b.Fatal(err)
	}
	cw := checkedWAL{rawStore: w, c: newIntegrity(w, hclog.NewNullLogger())}
	data := bytes.Repeat([]byte("x"), 1024)
	var batch []*raft.Log
	for i := 1; i <= DefaultSnapshotThreshold; i++ {
		batch = append(batch, &raft.Log{Index: uint64(i), Term: 1, Type: raft.LogCommand, Data: data})
		if len(batch) == 64 {
			if err := cw.storeLogs(batch); err != nil {
				b.Fatal(err)
			}
			batch = nil
		}
	}
	return w
}

// BenchmarkWithSums is what the sums add to a commit of 64 entries of
// 1 KiB before the WAL writes and fsyncs them.
func BenchmarkWithSums(b *testing.B) {
	logs := make([]*raft.Log, 64)
	for i := range logs {
		logs[i] = &raft.Log{Index: uint64(i + 1), Term: 1, Type: raft.LogCommand, Data: bytes.Repeat([]byte("x"), 1024)}
	}
	b.ReportAllocs()
	for range b.N {
		withSums(logs)
	}
}
