package cluster

import (
	"bytes"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"
	"unicode/utf8"

	"github.com/hashicorp/raft"

	"github.com/grapnel-io/grapnel/internal/clock"
	"github.com/grapnel-io/grapnel/internal/durable"
	"github.com/grapnel-io/grapnel/internal/gossipmeta"
)

// Failed storage (issue 29 point 3; docs/operations.md, "Failed storage").
//
// Every write to the Raft log, the stable store and the snapshot store
// goes through a storageGuard. The first write that fails (a full disk, a
// read-only remount, an I/O error of a write or an fsync) marks the
// storage failed, and from then on the guard refuses every write. After a
// failed fsync the kernel may have dropped the pages it could not write,
// or marked them clean, and report the next fsync as a success: nothing
// written since the last good fsync can be trusted, and nothing may be
// built on it (PostgreSQL's fsync lesson). Nothing is deleted or
// rewritten either. The replica then:
//
//   - stores no entry: a follower answers AppendEntries with a failure
//     (hashicorp/raft's appendEntries), a leader's StoreLogs fails and
//     Raft makes it a follower (dispatchLogs), and one that leads at idle
//     hands leadership on (stepDownForStorage);
//   - casts no vote: persistVote fails, so Raft grants none, and as a
//     candidate it could not count its own; its own vote requests are not
//     sent (contactTransport) and its election timer is an hour long
//     (paceHeartbeats), so it disturbs nobody;
//   - says why: an error in its log, its gossip metadata (from which the
//     leader opens a StorageFailed problem), metrics, systemd STATUS;
//   - probes its data directory with backoff; once a probe works it
//     closes StorageHealed, and grapnel-server restarts itself in place to
//     reopen what the disk holds, after dropping the files' cached pages
//     (durable.Uncache). Raft's catch-up does the rest.
//
// The one write the guard does not refuse is the current term.
// hashicorp/raft panics when it cannot store a newer term it heard of
// (setCurrentTerm): the replica would crash, and after a systemd restart
// fail again. So once the storage failed, a new term is kept in Raft's
// memory only and the write reports success. That is safe because this
// replica makes no promise in such a term that another replica relies
// on: it grants no vote and acknowledges no entry it did not store before
// the failure. After the restart it reads the older term from disk, as if
// the messages that carried the newer one had been lost, which Raft
// tolerates.

// ErrStorageFailed marks every error of a write to a replica's storage
// that failed, or that the guard refused because an earlier one failed.
var ErrStorageFailed = errors.New("storage failed")

// StorageFault is the first write of a replica's storage that failed.
type StorageFault struct {
	// Op is what was written: append log entries, delete log entries,
	// write CurrentTerm, create snapshot, ...
	Op string
	// Path is the file or directory the error names, relative to the data
	// directory when it is inside it; empty when the error names none.
	Path string
	// Err is the error the write returned.
	Err error
	// At is when it failed.
	At time.Time
}

// Cause is the error's own text without the file name it may carry: the
// errno's text ("no space left on device") when there is one.
func (f *StorageFault) Cause() string {
	var errno syscall.Errno
	if errors.As(f.Err, &errno) {
		return errno.Error()
	}
	var pe *fs.PathError
	if errors.As(f.Err, &pe) {
		return pe.Err.Error()
	}
	return f.Err.Error()
}

// Short is the fault in a few words, at most
// gossipmeta.MaxStorageFailedLen bytes: what was written, where, and the
// cause. Gossip, the problems view and systemd STATUS show it.
func (f *StorageFault) Short() string {
	s := f.Op
	if f.Path != "" {
		s += " " + f.Path
	}
	s += ": " + f.Cause()
	return truncate(s, gossipmeta.MaxStorageFailedLen)
}

// truncate cuts s to at most n bytes on a rune boundary, marking the cut.
func truncate(s string, n int) string {
	if len(s) <= n {
		return s
	}
	const mark = "…"
	s = s[:n-len(mark)]
	for len(s) > 0 && !utf8.ValidString(s) {
		s = s[:len(s)-1]
	}
	return s + mark
}

// storageError is what the guard returns for a failed or refused write.
type storageError struct {
	op    string
	fault *StorageFault
	// refused: this write was not tried, an earlier one failed.
	refused bool
}

func (e *storageError) Error() string {
	if e.refused {
		return fmt.Sprintf("%v: %s refused: the storage failed earlier (%s at %s)", ErrStorageFailed, e.op,
			e.fault.Short(), e.fault.At.UTC().Format(time.RFC3339))
	}
	return fmt.Sprintf("%v: %s: %v", ErrStorageFailed, e.op, e.fault.Err)
}

func (e *storageError) Unwrap() []error {
	if e.refused {
		return []error{ErrStorageFailed}
	}
	return []error{ErrStorageFailed, e.fault.Err}
}

// storageGuard watches one replica's writes; see the comment at the top.
// A nil guard passes every write through.
type storageGuard struct {
	dir    string
	now    func() time.Time
	inject func(op string) error
	// failedCh is closed at the first fault.
	failedCh chan struct{}
	once     sync.Once

	mu    sync.Mutex
	fault *StorageFault
	// closing: the node shuts down; an error of a store closed under a
	// write is not a fault.
	closing atomic.Bool
	// errors counts the writes and probes the storage failed; refused the
	// writes refused after the fault; terms the current terms kept in
	// memory only.
	errors, refused, terms atomic.Uint64
	// bolt: the log is raft.db (LogStoreBolt), not the WAL's files.
	bolt bool
}

func newStorageGuard(dir string, now func() time.Time, inject func(string) error) *storageGuard {
	return &storageGuard{dir: dir, now: now, inject: inject, failedCh: make(chan struct{})}
}

// Fault is the first fault, or nil while the storage works.
func (g *storageGuard) Fault() *StorageFault {
	if g == nil {
		return nil
	}
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.fault
}

// refusal is the error of a write refused after the fault, or nil while
// the storage works.
func (g *storageGuard) refusal(op string) error {
	f := g.Fault()
	if f == nil {
		return nil
	}
	g.refused.Add(1)
	return &storageError{op: op, fault: f, refused: true}
}

// write runs one write of op, unless the storage failed before; an error
// it returns is the storage's fault.
func (g *storageGuard) write(op string, fn func() error) error {
	if g == nil {
		return fn()
	}
	return g.writeThrough(op, func() error { return g.record(op, fn) })
}

// writeThrough is write for an fn that records its own fault (through a
// layer that reaches record): it refuses the write after a fault, and
// returns the fault as a *storageError.
func (g *storageGuard) writeThrough(op string, fn func() error) error {
	if g == nil {
		return fn()
	}
	if err := g.refusal(op); err != nil {
		return err
	}
	err := fn()
	if err == nil || !g.isFault(err) {
		return err
	}
	if f := g.Fault(); f != nil {
		return &storageError{op: op, fault: f}
	}
	return err
}

// record runs one write of op (or the injected fault) and records its
// error as the fault.
func (g *storageGuard) record(op string, fn func() error) error {
	err := g.try(op, fn)
	if err != nil && g.isFault(err) {
		g.fail(op, err)
	}
	return err
}

// try runs fn, or returns the injected fault instead.
func (g *storageGuard) try(op string, fn func() error) error {
	if g.inject != nil {
		if err := g.inject(op); err != nil {
			return err
		}
	}
	return fn()
}

// writeTerm stores the current term unless the storage failed; see the
// comment at the top for why it never returns the fault.
func (g *storageGuard) writeTerm(op string, fn func() error) error {
	if g == nil {
		return fn()
	}
	if g.Fault() != nil {
		g.terms.Add(1)
		return nil
	}
	err := g.try(op, fn)
	if err == nil || !g.isFault(err) {
		return err
	}
	g.fail(op, err)
	g.terms.Add(1)
	return nil
}

// isFault says whether a write's error is the storage's: a store closed
// under a write while the node shuts down is not.
func (g *storageGuard) isFault(err error) bool {
	return !(g.closing.Load() && isClosed(err))
}

// fail records err as the fault unless one is recorded, and returns the
// recorded one.
func (g *storageGuard) fail(op string, err error) *StorageFault {
	g.errors.Add(1)
	g.mu.Lock()
	if g.fault == nil {
		g.fault = &StorageFault{Op: op, Path: g.pathOf(err), Err: err, At: g.now()}
	}
	f := g.fault
	g.mu.Unlock()
	g.once.Do(func() { close(g.failedCh) })
	return f
}

// pathOf is the file err names, relative to the data directory when it
// is inside it.
func (g *storageGuard) pathOf(err error) string {
	var path string
	var de *durable.Error
	var pe *fs.PathError
	switch {
	case errors.As(err, &de):
		path = de.Path
	case errors.As(err, &pe):
		path = pe.Path
	default:
		return ""
	}
	if rel, err := filepath.Rel(g.dir, path); err == nil && rel != ".." && !strings.HasPrefix(rel, "../") {
		return rel
	}
	return path
}

// probe checks the data directory (durable.Probe, reserving a segment's
// size) and fsyncs the WAL's files as they are; a failure counts as a
// storage error. A new file alone is not enough: a disk whose fsyncs
// fail for the segments being written (a bad region, an I/O error that
// stays) takes a new file, and the replica would restart in place every
// probe, only to fail again at its first write.
func (g *storageGuard) probe(reserve int64) error {
	err := g.try("probe", func() error {
		if err := durable.Probe(g.dir, reserve); err != nil {
			return err
		}
		if g.bolt {
			return syncFile(filepath.Join(g.dir, boltFile))
		}
		return syncFiles(filepath.Join(g.dir, walDir))
	})
	if err != nil {
		g.errors.Add(1)
	}
	return err
}

// guardedStore is the Raft log and stable store (raft-wal) behind the
// guard. The log is read and written through a raft.LogCache of the last
// entries; the cache turns an error into text, so the WAL's errors are
// recorded beneath it (walWrites) and the guard returns them whole above
// it, for the callers to find ErrStorageFailed and the errno in. Reads
// pass through: a failed read is not a failed write, and the data it
// would return is not built on.
type guardedStore struct {
	w   rawStore      // the WAL or raft.db: the stable store
	log raft.LogStore // the cache over it: the log
	g   *storageGuard
}

// newGuardedStore puts the guard and a cache of the last cached entries
// in front of w.
func newGuardedStore(w rawStore, g *storageGuard, c *integrity, cached int) (*guardedStore, error) {
	lc, err := raft.NewLogCache(cached, walWrites{checkedWAL: checkedWAL{rawStore: w, c: c}, g: g})
	if err != nil {
		return nil, err
	}
	return &guardedStore{w: w, log: lc, g: g}, nil
}

// walWrites is the WAL as the log cache writes it: the guard records
// each write's error before the cache sees it, and each entry carries
// its checksum (integrity.go). It keeps the WAL's MonotonicLogStore.
type walWrites struct {
	checkedWAL
	g *storageGuard
}

func (w walWrites) StoreLog(l *raft.Log) error { return w.StoreLogs([]*raft.Log{l}) }

func (w walWrites) StoreLogs(logs []*raft.Log) error {
	return w.g.record(opAppend, func() error { return w.checkedWAL.storeLogs(logs) })
}

func (w walWrites) DeleteRange(min, max uint64) error {
	return w.g.record(opDelete, func() error { return w.rawStore.DeleteRange(min, max) })
}

// What the log writes are called in faults and in Config.StorageFault.
const (
	opAppend = "append log entries"
	opDelete = "delete log entries"
)

func (s *guardedStore) FirstIndex() (uint64, error)            { return s.log.FirstIndex() }
func (s *guardedStore) LastIndex() (uint64, error)             { return s.log.LastIndex() }
func (s *guardedStore) GetLog(index uint64, l *raft.Log) error { return s.log.GetLog(index, l) }
func (s *guardedStore) Get(key []byte) ([]byte, error)         { return s.w.Get(key) }
func (s *guardedStore) GetUint64(key []byte) (uint64, error)   { return s.w.GetUint64(key) }

// IsMonotonic keeps raft-wal's promise visible through the wrapper:
// hashicorp/raft then resets the log instead of deleting a range after
// a snapshot restore. raft-boltdb makes none.
func (s *guardedStore) IsMonotonic() bool { return monotonic(s.w) }

// monotonic says whether store promises hashicorp/raft a monotonic log
// (raft.MonotonicLogStore), for the wrappers that keep the promise of
// the store they wrap.
func monotonic(store any) bool {
	m, ok := store.(raft.MonotonicLogStore)
	return ok && m.IsMonotonic()
}

func (s *guardedStore) StoreLog(l *raft.Log) error { return s.StoreLogs([]*raft.Log{l}) }

func (s *guardedStore) StoreLogs(logs []*raft.Log) error {
	return s.g.writeThrough(opAppend, func() error { return s.log.StoreLogs(logs) })
}

func (s *guardedStore) DeleteRange(min, max uint64) error {
	return s.g.writeThrough(opDelete, func() error { return s.log.DeleteRange(min, max) })
}

func (s *guardedStore) Set(key, val []byte) error {
	return s.g.write("write "+string(key), func() error { return s.w.Set(key, val) })
}

func (s *guardedStore) SetUint64(key []byte, val uint64) error {
	op := "write " + string(key)
	if bytes.Equal(key, stableKeys.currentTerm) {
		return s.g.writeTerm(op, func() error { return s.w.SetUint64(key, val) })
	}
	return s.g.write(op, func() error { return s.w.SetUint64(key, val) })
}

// Close closes the store; errors of writes racing it are not faults.
func (s *guardedStore) Close() error {
	if s.g != nil {
		s.g.closing.Store(true)
	}
	return s.w.Close()
}

var (
	_ raft.LogStore          = (*guardedStore)(nil)
	_ raft.StableStore       = (*guardedStore)(nil)
	_ raft.MonotonicLogStore = (*guardedStore)(nil)
)

// storageFailedTimeout is the Raft heartbeat and election timeout of a
// replica whose storage failed: it never stands for election, so it does
// not make the others vote in terms it cannot win (paceHeartbeats).
const storageFailedTimeout = time.Hour

// StorageFault is the first write of this replica's storage that failed,
// or nil while it works.
func (n *Node) StorageFault() *StorageFault { return n.storage.Fault() }

// StorageFailed is closed when this replica's storage fails a write.
func (n *Node) StorageFailed() <-chan struct{} { return n.storage.failedCh }

// StorageHealed is closed when a probe of the data directory worked after
// the storage failed. The node still refuses every write: what the disk
// holds is read again only by a new node on the data directory, so the
// caller shuts this one down and starts the replica again (grapnel-server
// executes itself again in place, after durable.Uncache).
func (n *Node) StorageHealed() <-chan struct{} { return n.healed }

// StorageErrors counts the writes and probes this replica's storage
// failed since it started.
func (n *Node) StorageErrors() uint64 { return n.storage.errors.Load() }

// StorageFaults are the replicas whose storage failed, by id, with their
// fault in a few words: this one from its own guard, the others as their
// gossip metadata announces it while they are alive.
func (n *Node) StorageFaults() map[string]string {
	out := map[string]string{}
	for id, p := range n.peers.all() {
		if id != n.cfg.ID && p.Role == gossipmeta.RoleServer && p.GossipStatus == StatusAlive && p.StorageFailed != "" {
			out[id] = p.StorageFailed
		}
	}
	if f := n.storage.Fault(); f != nil {
		out[n.cfg.ID] = f.Short()
	}
	return out
}

// StorageFaultChanges is signalled when StorageFaults may have changed:
// this replica's storage failed, a member announced a fault or its end,
// or such a member died or left. Signals coalesce.
func (n *Node) StorageFaultChanges() (<-chan struct{}, func()) { return n.faultFeed.Subscribe() }

// onStorageFailed is observeRaft's reaction to this replica's storage
// failing: it says why, stops standing for election, announces the fault
// in gossip, steps down if it leads and starts the probe.
func (n *Node) onStorageFailed() {
	f := n.storage.Fault()
	n.logger.Error("storage failed: this replica stores no more entries and casts no votes; it steps down, "+
		"probes its data directory and restarts once the storage works again",
		"op", f.Op, "path", f.Path, "error", f.Err, "data_dir", n.cfg.DataDir)
	n.faultFeed.Notify()
	n.feed.Notify()
	if n.gossip != nil {
		n.gossip.announce()
	}
	n.wg.Add(2)
	go n.stepDownForStorage()
	go n.probeStorage()
}

// stepDownForStorage makes a leader whose storage failed stop leading.
// Raft does so by itself at the next entry it cannot store; at idle none
// may come, so it hands leadership to the most current follower, and
// where there is none it stores a barrier, which fails.
func (n *Node) stepDownForStorage() {
	defer n.wg.Done()
	if !n.IsLeader() {
		return
	}
	err := n.TransferLeadership("")
	if err == nil || !n.IsLeader() {
		n.logger.Warn("storage failed: handed leadership on")
		return
	}
	n.logger.Warn("storage failed: could not hand leadership on; stepping down", "error", err)
	_ = n.await(n.raft.Barrier(n.timing.ElectionTimeout))
}

// probeStorage probes the data directory with backoff from
// Timing.StorageProbeMin to StorageProbeMax until a probe works, then
// closes healed. It logs a probe's failure only when the error changes.
func (n *Node) probeStorage() {
	defer n.wg.Done()
	clk := n.cfg.Clock
	wait := n.timing.StorageProbeMin
	last := ""
	for {
		t := clock.NewTimer(clk, wait)
		select {
		case <-t.C:
		case <-n.shutdownCh:
			t.Stop()
			return
		}
		err := n.storage.probe(int64(n.segmentSize))
		if err == nil {
			n.logger.Warn("storage works again (a file was written, fsynced and removed in the data directory); "+
				"this replica must restart to read what its disk holds", "data_dir", n.cfg.DataDir)
			close(n.healed)
			return
		}
		if err.Error() != last {
			last = err.Error()
			n.logger.Warn("storage still fails", "probe", err, "next_probe_in", min(2*wait, n.timing.StorageProbeMax))
		}
		wait = min(2*wait, n.timing.StorageProbeMax)
	}
}

// syncFiles fsyncs every regular file in dir, opened for reading.
func syncFiles(dir string) error {
	entries, err := os.ReadDir(dir)
	if err != nil {
		return &durable.Error{Op: "probe", Path: dir, Step: "list", Err: err}
	}
	for _, e := range entries {
		if !e.Type().IsRegular() {
			continue
		}
		if err := syncFile(filepath.Join(dir, e.Name())); err != nil {
			return err
		}
	}
	return nil
}

// syncFile opens the file at path and fsyncs it.
func syncFile(path string) error {
	f, err := os.Open(path)
	if err != nil {
		return &durable.Error{Op: "probe", Path: path, Step: "open", Err: err}
	}
	err = f.Sync()
	f.Close()
	if err != nil {
		return &durable.Error{Op: "probe", Path: path, Step: "fsync", Err: err}
	}
	return nil
}
