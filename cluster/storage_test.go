package cluster

import (
	"errors"
	"io/fs"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/hashicorp/go-hclog"
	"github.com/hashicorp/raft"
	"golang.org/x/sys/unix"

	"github.com/grapnel-io/grapnel/internal/errs"
	"github.com/grapnel-io/grapnel/internal/gossipmeta"
)

// faultSwitch is a Config.StorageFault that fails the writes of the ops
// it is set for with its error.
type faultSwitch struct {
	mu  sync.Mutex
	err error
	ops map[string]bool // nil: every op
}

func (f *faultSwitch) set(err error, ops ...string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.err, f.ops = err, nil
	if len(ops) > 0 {
		f.ops = map[string]bool{}
		for _, op := range ops {
			f.ops[op] = true
		}
	}
}

func (f *faultSwitch) inject(op string) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.ops != nil && !f.ops[op] {
		return nil
	}
	return f.err
}

var testNow = time.Date(2026, 11, 26, 17, 0, 0, 0, time.UTC)

func guardedWAL(t *testing.T, dir string, inject func(string) error) (*guardedStore, *storageGuard) {
	t.Helper()
	w, err := openLogStore(dir, 1<<20, nil, hclog.NewNullLogger())
	if err != nil {
		t.Fatal(err)
	}
	g := newStorageGuard(dir, func() time.Time { return testNow }, inject)
	s, err := newGuardedStore(w, g, newIntegrity(w, hclog.NewNullLogger()), 16)
	if err != nil {
		t.Fatal(err)
	}
	return s, g
}

// Requirement (issue 29 point 3, the PostgreSQL fsync lesson): after one
// write of the storage failed, the guard keeps that first fault (what,
// where, why, when) and refuses every later write of the log and the
// stable store, even once the disk would take it again, and it rewrites
// or deletes nothing: the store reopened holds what it held before the
// fault. A newer term is kept in Raft's memory only (Raft panics when it
// cannot store one), never written.
func TestStorageGuardKeepsTheFirstFaultAndRefusesLaterWrites(t *testing.T) {
	dir := t.TempDir()
	var faults faultSwitch
	s, g := guardedWAL(t, dir, faults.inject)
	storeEntries(t, s, 1, 10)
	for k, v := range map[string]uint64{"CurrentTerm": 3, "LastVoteTerm": 3} {
		if err := s.SetUint64([]byte(k), v); err != nil {
			t.Fatal(err)
		}
	}
	if err := s.Set(stableKeys.lastVoteCand, []byte("n1")); err != nil {
		t.Fatal(err)
	}
	if g.Fault() != nil {
		t.Fatalf("fault %+v before any failed write", g.Fault())
	}

	segment := filepath.Join(dir, walDir, "00000000000000000001-0000000000000001.wal")
	faults.set(&fs.PathError{Op: "write", Path: segment, Err: syscall.ENOSPC}, "append log entries")
	err := s.StoreLogs([]*raft.Log{entry(11)})
	if !errors.Is(err, ErrStorageFailed) || !errors.Is(err, syscall.ENOSPC) {
		t.Fatalf("failed append: %v, want ErrStorageFailed and ENOSPC", err)
	}
	f := g.Fault()
	if f == nil || f.Op != "append log entries" || f.Path != "wal/00000000000000000001-0000000000000001.wal" ||
		f.Cause() != "no space left on device" || !f.At.Equal(testNow) {
		t.Fatalf("fault %+v, want the append with the segment's path in the data dir and ENOSPC", f)
	}
	if want := "append log entries wal/00000000000000000001-0000000000000001.wal: no space left on device"; f.Short() != want {
		t.Fatalf("short %q, want %q", f.Short(), want)
	}

	// The disk works again, then fails differently: neither is tried.
	faults.set(nil)
	writes := map[string]func() error{
		"StoreLogs":    func() error { return s.StoreLogs([]*raft.Log{entry(11)}) },
		"StoreLog":     func() error { return s.StoreLog(entry(11)) },
		"DeleteRange":  func() error { return s.DeleteRange(1, 5) },
		"DeleteSuffix": func() error { return s.DeleteRange(8, 10) },
		"Set":          func() error { return s.Set(stableKeys.lastVoteCand, []byte("n2")) },
		"SetUint64":    func() error { return s.SetUint64(stableKeys.lastVoteTerm, 4) },
	}
	for round, inject := range []error{nil, syscall.EIO} {
		faults.set(inject)
		for name, write := range writes {
			err := write()
			if !errors.Is(err, ErrStorageFailed) || !strings.Contains(err.Error(), "refused: the storage failed earlier (append log entries") {
				t.Fatalf("round %d: %s after the fault: %v, want a refusal naming the first fault", round, name, err)
			}
			if errors.Is(err, syscall.EIO) {
				t.Fatalf("round %d: %s reached the disk: %v", round, name, err)
			}
		}
	}
	if g.Fault() != f {
		t.Fatalf("the fault changed to %+v", g.Fault())
	}
	if err := s.SetUint64(stableKeys.currentTerm, 9); err != nil {
		t.Fatalf("a newer term after the fault: %v, want nil (kept in Raft's memory)", err)
	}
	if v, _ := s.GetUint64(stableKeys.currentTerm); v != 3 {
		t.Fatalf("current term %d on the store, want 3: a term was written after the fault", v)
	}
	if n, r, terms := g.errors.Load(), g.refused.Load(), g.terms.Load(); n != 1 || r != 2*uint64(len(writes)) || terms != 1 {
		t.Fatalf("counted %d errors, %d refusals, %d terms; want 1, %d, 1", n, r, terms, 2*len(writes))
	}

	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	again, _ := guardedWAL(t, dir, nil)
	defer again.Close()
	checkLog(t, again, 1, 10)
	for k, want := range map[string]uint64{"CurrentTerm": 3, "LastVoteTerm": 3} {
		if v, _ := again.GetUint64([]byte(k)); v != want {
			t.Fatalf("%s %d after reopening, want %d", k, v, want)
		}
	}
	if v, _ := again.Get(stableKeys.lastVoteCand); string(v) != "n1" {
		t.Fatalf("LastVoteCand %q after reopening, want n1", v)
	}
}

// Requirement (issue 29 point 3): a current term that cannot be stored is
// the fault when it fails first, and the write still reports success to
// Raft, which would panic otherwise (raft.go setCurrentTerm).
func TestStorageGuardTermFailingFirst(t *testing.T) {
	var faults faultSwitch
	s, g := guardedWAL(t, t.TempDir(), faults.inject)
	defer s.Close()
	faults.set(syscall.EROFS)
	if err := s.SetUint64(stableKeys.currentTerm, 2); err != nil {
		t.Fatalf("term write failing first: %v, want nil", err)
	}
	if f := g.Fault(); f == nil || f.Op != "write CurrentTerm" || f.Short() != "write CurrentTerm: read-only file system" {
		t.Fatalf("fault %+v, want the term write with EROFS", f)
	}
	if err := s.SetUint64(stableKeys.lastVoteTerm, 2); !errors.Is(err, ErrStorageFailed) {
		t.Fatalf("vote after the fault: %v, want it refused (no vote is cast)", err)
	}
}

// Requirement (issue 29 point 3): a write the kernel itself refuses is
// the fault. RLIMIT_FSIZE 0 makes every write of this process fail with
// EFBIG (Go ignores the SIGXFSZ that comes with it): the WAL's append
// fails in raft-wal's own write, without an injected error. The limit is
// put back at once; the storage stays failed.
func TestStorageGuardSeesTheKernelRefuseAWrite(t *testing.T) {
	dir := t.TempDir()
	s, g := guardedWAL(t, dir, nil)
	defer s.Close()
	storeEntries(t, s, 1, 5)
	var old unix.Rlimit
	if err := unix.Getrlimit(unix.RLIMIT_FSIZE, &old); err != nil {
		t.Fatal(err)
	}
	limited := old
	limited.Cur = 0
	if err := unix.Setrlimit(unix.RLIMIT_FSIZE, &limited); err != nil {
		t.Fatal(err)
	}
	err := s.StoreLogs([]*raft.Log{entry(6)})
	if rerr := unix.Setrlimit(unix.RLIMIT_FSIZE, &old); rerr != nil {
		t.Fatal(rerr)
	}
	if !errors.Is(err, ErrStorageFailed) || !errors.Is(err, syscall.EFBIG) {
		t.Fatalf("append under RLIMIT_FSIZE 0: %v, want ErrStorageFailed and EFBIG", err)
	}
	if f := g.Fault(); f == nil || f.Cause() != syscall.EFBIG.Error() {
		t.Fatalf("fault %+v, want EFBIG", f)
	}
	if err := s.StoreLogs([]*raft.Log{entry(6)}); !errors.Is(err, ErrStorageFailed) {
		t.Fatalf("append once the limit is gone: %v, want it refused", err)
	}
}

// Requirement (issue 29 point 3): a snapshot write that fails is a fault
// like a log write, and no snapshot is created after it.
func TestStorageGuardSnapshots(t *testing.T) {
	dir := t.TempDir()
	var faults faultSwitch
	g := newStorageGuard(dir, func() time.Time { return testNow }, faults.inject)
	fileSnaps, err := raft.NewFileSnapshotStoreWithLogger(dir, 3, hclog.NewNullLogger())
	if err != nil {
		t.Fatal(err)
	}
	snaps := privateSnapshots{SnapshotStore: fileSnaps, dir: dir, syncDir: func(string) error { return nil }, guard: g}
	_, trans := raft.NewInmemTransport("")
	create := func() (raft.SnapshotSink, error) {
		return snaps.Create(raft.SnapshotVersionMax, 10, 1, raft.Configuration{}, 1, trans)
	}
	sink, err := create()
	if err != nil {
		t.Fatal(err)
	}
	faults.set(syscall.EIO, "write snapshot")
	if _, err := sink.Write([]byte("state")); !errors.Is(err, ErrStorageFailed) || !errors.Is(err, syscall.EIO) {
		t.Fatalf("snapshot write: %v, want ErrStorageFailed and EIO", err)
	}
	sink.Cancel()
	if f := g.Fault(); f == nil || f.Op != "write snapshot" {
		t.Fatalf("fault %+v, want the snapshot write", f)
	}
	faults.set(nil)
	if _, err := create(); !errors.Is(err, ErrStorageFailed) {
		t.Fatalf("snapshot after the fault: %v, want it refused", err)
	}
	if metas, _ := fileSnaps.List(); len(metas) != 0 {
		t.Fatalf("%d snapshots listed, want none", len(metas))
	}
}

// A fault's short form fits the gossip metadata whatever the path, and
// a store closed under a write while the node shuts down is no fault.
func TestStorageFaultShortAndClosing(t *testing.T) {
	f := &StorageFault{Op: "append log entries", Path: strings.Repeat("é", 200), Err: syscall.EIO}
	if s := f.Short(); len(s) > gossipmeta.MaxStorageFailedLen || !strings.HasSuffix(s, "…") || !strings.HasPrefix(s, "append log entries é") {
		t.Fatalf("short %q (%d bytes)", s, len(s))
	}
	s, g := guardedWAL(t, t.TempDir(), nil)
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	if err := s.StoreLogs([]*raft.Log{entry(1)}); err == nil || errors.Is(err, ErrStorageFailed) || g.Fault() != nil {
		t.Fatalf("append to the closed store: %v, fault %+v; want the store's error and no fault", err, g.Fault())
	}
}

// A proposal the leader's failed storage did not take has an unknown
// outcome for the client.
func TestFoldRaftErrorStorageFailed(t *testing.T) {
	err := FoldRaftError(&storageError{op: "append log entries", fault: &StorageFault{Op: "append log entries", Err: syscall.ENOSPC}})
	if !errors.Is(err, errs.ErrOutcomeUnknown) || !errors.Is(err, ErrStorageFailed) || !errors.Is(err, syscall.ENOSPC) {
		t.Fatalf("folded %v", err)
	}
}

// The probe of failed storage fsyncs the log's own files: the WAL's
// segments, or raft.db with LogStoreBolt (a data directory without the
// file the store keeps fails the probe, naming it). And a bolt store says
// it is not monotonic, so that Raft deletes a range after a snapshot
// restore instead of resetting the log.
func TestProbeSyncsTheBoltFileAndBoltIsNotMonotonic(t *testing.T) {
	dir := t.TempDir()
	g := newStorageGuard(dir, func() time.Time { return testNow }, nil)
	g.bolt = true
	if err := g.probe(0); err == nil || !strings.Contains(err.Error(), boltFile) {
		t.Fatalf("probe of bolt storage without raft.db: %v, want an error naming %s", err, boltFile)
	}
	b, err := openStore(dir, LogStoreBolt, 1<<20, nil, hclog.NewNullLogger())
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	if err := g.probe(0); err != nil {
		t.Fatalf("probe of working bolt storage: %v", err)
	}
	s, err := newGuardedStore(b, g, newIntegrity(b, hclog.NewNullLogger()), 16)
	if err != nil {
		t.Fatal(err)
	}
	if s.IsMonotonic() {
		t.Fatal("the bolt store says it is monotonic")
	}
	w, _ := guardedWAL(t, t.TempDir(), nil)
	defer w.Close()
	if !w.IsMonotonic() {
		t.Fatal("the WAL store says it is not monotonic")
	}
}
