package cluster

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"sync/atomic"

	"github.com/hashicorp/go-hclog"
	"github.com/hashicorp/raft"
	wal "github.com/hashicorp/raft-wal"
	"go.etcd.io/bbolt"

	"github.com/grapnel-io/grapnel/internal/clock"
	"github.com/grapnel-io/grapnel/internal/durable"
)

// Corrupted data (issue 29 point 3; docs/operations.md, "Corrupted or
// lost data").
//
// raft-wal checks a CRC only over the last commit of the segment it
// recovers at open (a torn write); an entry read back later is decoded as
// it is. hashicorp/raft's snapshot store checks a CRC-64 of state.bin when
// a snapshot is opened. So this layer adds a CRC-32C of each entry's
// index, term, type and data, kept in the entry's Extensions (Raft's field
// for middleware, opaque to it). It is local: the sum is added when the
// entry is stored and taken off when it is read, so what Raft replicates
// and applies is unchanged, and an older release reads the entries as
// before (it would replicate the sum along, which the receiver
// recomputes). An entry without a sum (written by an older release) is
// read unchecked.
//
// A corrupted entry or snapshot is never applied, served or replicated:
//
//   - at start, before Raft opens anything, every snapshot is checked
//     newest first until one is whole (corrupt ones go to
//     DataDir/quarantine), and every entry Raft would read after it; the
//     log is cut before the first bad entry (or wholly, when it no longer
//     joins the snapshot), and the replica holds its vote until it has
//     caught up from the leader (votehold.go);
//   - a bad entry read while running (the leader sending old entries to a
//     follower, the scrub) reads as not found, so the leader sends a
//     snapshot instead; a bad entry the snapshot covers is cut from the
//     head of the log at once, an applied one once a snapshot taken then
//     covers it, and one not applied yet makes the replica restart in
//     place (Node.Corrupted), which repairs it as at start (if Raft's
//     apply loop meets it first, hashicorp/raft panics; the restart that
//     follows repairs it the same way);
//   - the scrub reads the whole log and the newest snapshot every
//     ScrubInterval, so data that rots at rest is found while the
//     replica runs, not at the next read that needs it.

// ErrCorrupt marks data that failed its check.
var ErrCorrupt = errors.New("corrupt data")

// CorruptError says what failed its check.
type CorruptError struct {
	// What: "log entry" or "snapshot".
	What string
	// Index is the entry's index, or the snapshot's last index.
	Index uint64
	// ID is the snapshot's id.
	ID string
	// Reason says what did not match.
	Reason string
}

func (e *CorruptError) Error() string {
	if e.What == "snapshot" {
		return fmt.Sprintf("%v: snapshot %s (index %d): %s", ErrCorrupt, e.ID, e.Index, e.Reason)
	}
	return fmt.Sprintf("%v: log entry %d: %s", ErrCorrupt, e.Index, e.Reason)
}

func (e *CorruptError) Unwrap() error { return ErrCorrupt }

// sumTag starts the Extensions that hold this layer's sum; 4 bytes of
// CRC-32C follow.
var sumTag = []byte("gsum1") // 5 bytes (withSums)

var castagnoli = crc32.MakeTable(crc32.Castagnoli)

// entrySum is the CRC-32C of what Raft relies on in an entry; hdr is a
// scratch buffer (crc32 lets it escape: one for a batch, not one each).
func entrySum(l *raft.Log, hdr *[17]byte) uint32 {
	binary.LittleEndian.PutUint64(hdr[0:8], l.Index)
	binary.LittleEndian.PutUint64(hdr[8:16], l.Term)
	hdr[16] = byte(l.Type)
	return crc32.Update(crc32.Checksum(hdr[:], castagnoli), castagnoli, l.Data)
}

// withSums are copies of logs carrying their sums, made with four
// allocations per batch whatever its size (every commit takes this path:
// about 8 µs for 64 entries of 1 KiB, BenchmarkWithSums). Raft's own
// entries are left as they are (they stay in the log cache and in
// flight).
func withSums(logs []*raft.Log) []*raft.Log {
	const n = 5 + 4 // len(sumTag) + CRC-32C
	copies := make([]raft.Log, len(logs))
	ext := make([]byte, n*len(logs))
	out := make([]*raft.Log, len(logs))
	var hdr [17]byte
	for i, l := range logs {
		copies[i] = *l
		e := ext[i*n : (i+1)*n : (i+1)*n]
		copy(e, sumTag)
		binary.LittleEndian.PutUint32(e[len(sumTag):], entrySum(l, &hdr))
		copies[i].Extensions = e
		out[i] = &copies[i]
	}
	return out
}

// checkEntry checks an entry read for index and takes its sum off.
func checkEntry(index uint64, l *raft.Log) error {
	if l.Index != index {
		return &CorruptError{What: "log entry", Index: index, Reason: fmt.Sprintf("read back as entry %d", l.Index)}
	}
	if !bytes.HasPrefix(l.Extensions, sumTag) {
		return nil // written by an older release: unchecked
	}
	if len(l.Extensions) != len(sumTag)+4 {
		return &CorruptError{What: "log entry", Index: index, Reason: fmt.Sprintf("checksum field of %d bytes", len(l.Extensions))}
	}
	want := binary.LittleEndian.Uint32(l.Extensions[len(sumTag):])
	var hdr [17]byte
	if got := entrySum(l, &hdr); got != want {
		return &CorruptError{What: "log entry", Index: index, Reason: fmt.Sprintf("checksum %08x, stored %08x", got, want)}
	}
	l.Extensions = nil
	return nil
}

// logReader reads entries: a store, under the checks or not.
type logReader interface {
	GetLog(index uint64, l *raft.Log) error
}

// readEntry reads one entry from the store and checks it. A decode error
// is corruption; not found and a closed store are not.
func readEntry(w logReader, index uint64, l *raft.Log) error {
	*l = raft.Log{}
	if err := w.GetLog(index, l); err != nil {
		if errors.Is(err, raft.ErrLogNotFound) || isClosed(err) {
			return err
		}
		return &CorruptError{What: "log entry", Index: index, Reason: err.Error()}
	}
	return checkEntry(index, l)
}

// integrity is what a node knows of the checks while it runs.
type integrity struct {
	w      rawStore
	logger hclog.Logger
	// snapIndex is the index of the newest snapshot (for what a bad
	// entry's loss means); raft, once it runs, tells the applied index
	// and takes a snapshot that covers it.
	snapIndex func() uint64
	raft      atomic.Pointer[raft.Raft]
	// corrupted is closed at the first bad entry the snapshot does not
	// cover, found while running: the replica must restart to repair.
	corrupted chan struct{}
	once      sync.Once
	mu        sync.Mutex
	first     *CorruptError
	bad       map[uint64]bool // the bad entries handled
	// found counts the bad entries and snapshots found since start;
	// repaired those repaired in place or at start.
	found, repaired atomic.Uint64
}

func newIntegrity(w rawStore, logger hclog.Logger) *integrity {
	return &integrity{w: w, logger: logger, corrupted: make(chan struct{}), snapIndex: func() uint64 { return 0 }, bad: map[uint64]bool{}}
}

// badEntry handles a bad entry found while running. One the newest
// snapshot covers is cut from the head of the log now (Raft sends the
// snapshot to a follower that needs older entries). One that is applied
// but not yet covered is covered by a snapshot taken now, then cut. Any
// other (not applied yet) makes the replica restart in place to repair
// it as at start. Each is handled once; a read that meets it again only
// reads as not found.
func (c *integrity) badEntry(e *CorruptError) {
	c.mu.Lock()
	seen := c.bad[e.Index]
	c.bad[e.Index] = true
	c.mu.Unlock()
	if seen {
		return
	}
	c.found.Add(1)
	switch s := c.snapIndex(); {
	case e.Index <= s:
		c.cutHead(e)
	case c.raft.Load() != nil && e.Index <= c.raft.Load().AppliedIndex():
		c.logger.Error("corrupt log entry, applied: taking a snapshot that covers it, then cutting it from the log",
			"error", e, "snapshot_index", s)
		go func() {
			err := c.raft.Load().Snapshot().Error()
			if err == nil && e.Index <= c.snapIndex() {
				c.cutHead(e)
				return
			}
			c.logger.Error("corrupt log entry: the snapshot did not cover it; restarting to repair", "error", e, "snapshot_error", err)
			c.fail(e)
		}()
	default:
		c.logger.Error("corrupt log entry: this replica restarts in place, cuts its log before it and catches up from the leader",
			"error", e, "snapshot_index", s)
		c.fail(e)
	}
}

// cutHead cuts the log's head through a bad entry the snapshot covers.
func (c *integrity) cutHead(e *CorruptError) {
	first, _ := c.w.FirstIndex()
	if err := c.w.DeleteRange(first, e.Index); err != nil {
		c.logger.Error("corrupt log entry: could not cut it from the log's head; restarting to repair", "error", e, "cut_error", err)
		c.fail(e)
		return
	}
	c.repaired.Add(1)
	c.logger.Error("corrupt log entry, covered by the snapshot: cut the log's head through it; "+
		"a follower that needs older entries gets the snapshot", "error", e, "snapshot_index", c.snapIndex())
}

// fail records the first corruption that needs a restart and signals it.
func (c *integrity) fail(e *CorruptError) {
	c.mu.Lock()
	if c.first == nil {
		c.first = e
	}
	c.mu.Unlock()
	c.once.Do(func() { close(c.corrupted) })
}

// checkedWAL is the store under the log cache (the WAL, or raft.db): it
// adds each entry's sum on the way in and checks it on the way out.
type checkedWAL struct {
	rawStore
	c *integrity
}

func (w checkedWAL) storeLogs(logs []*raft.Log) error {
	return w.rawStore.StoreLogs(withSums(logs))
}

// GetLog reads and checks an entry; a bad one reads as not found (Raft
// then sends a snapshot where it wanted the entry) and is handled.
func (w checkedWAL) GetLog(index uint64, l *raft.Log) error {
	err := readEntry(w.rawStore, index, l)
	var ce *CorruptError
	if errors.As(err, &ce) {
		w.c.badEntry(ce)
		*l = raft.Log{}
		return raft.ErrLogNotFound
	}
	return err
}

// Corrupted is closed when this replica found, while running, a corrupt
// log entry its snapshot does not cover, or a corrupt newest snapshot:
// it must restart (grapnel-server does so in place) to cut its log and
// catch up from the leader.
func (n *Node) Corrupted() <-chan struct{} { return n.integrity.corrupted }

// Corruption is the first corruption that calls for a restart, or nil.
func (n *Node) Corruption() error {
	n.integrity.mu.Lock()
	defer n.integrity.mu.Unlock()
	if n.integrity.first == nil {
		return nil
	}
	return n.integrity.first
}

// CorruptFound counts the corrupt entries and snapshots this replica
// found since it started, at start included; CorruptRepaired those it
// repaired (cut, quarantined).
func (n *Node) CorruptFound() uint64    { return n.integrity.found.Load() }
func (n *Node) CorruptRepaired() uint64 { return n.integrity.repaired.Load() }

// quarantineDir holds what failed its check, for a post-mortem.
const quarantineDir = "quarantine"

// repairStore is what startupRepair reads and cuts: the WAL or raft.db,
// before Raft opens it.
type repairStore interface {
	logReader
	FirstIndex() (uint64, error)
	LastIndex() (uint64, error)
	DeleteRange(min, max uint64) error
}

// isClosed says err is that of a store closed under a read or write
// (while the node shuts down), not of the storage.
func isClosed(err error) bool {
	return errors.Is(err, wal.ErrClosed) || errors.Is(err, bbolt.ErrDatabaseNotOpen)
}

// startupRepair checks the snapshots and the log before Raft opens them
// (see the comment at the top) and repairs what it can locally. It
// returns what it did, for the log.
func startupRepair(dataDir string, w repairStore, snaps *raft.FileSnapshotStore, hold *holdState,
	c *integrity, logger hclog.Logger, currentTerm func() uint64) error {
	snapIndex, err := checkSnapshots(dataDir, snaps, c, logger)
	if err != nil {
		return err
	}
	first, err := w.FirstIndex()
	if err != nil {
		return fmt.Errorf("cluster: integrity: %w", err)
	}
	last, err := w.LastIndex()
	if err != nil {
		return fmt.Errorf("cluster: integrity: %w", err)
	}
	if last == 0 {
		return nil
	}
	var bad uint64
	reason := ""
	if first > snapIndex+1 {
		// The entries between the snapshot and the log are gone (a newer
		// snapshot was quarantined): the log cannot be replayed.
		bad, reason = first, fmt.Sprintf("log starts at %d, after the newest whole snapshot (%d)", first, snapIndex)
	} else {
		var l raft.Log
		for i := max(first, snapIndex+1); i <= last; i++ {
			err := readEntry(w, i, &l)
			var ce *CorruptError
			if errors.As(err, &ce) {
				bad, reason = i, ce.Error()
				c.found.Add(1)
				break
			}
			if err != nil {
				return fmt.Errorf("cluster: integrity: read log entry %d: %w", i, err)
			}
		}
		// Entries the snapshot covers are checked by the scrub and on
		// read; Raft does not read them at start.
	}
	if bad == 0 {
		return nil
	}
	// What the replica had: its last entry, or the current term as the
	// bound of that entry's term when it is unreadable.
	v := voteHold{Reason: "cut its log at a corrupt entry", Index: last, Since: hold.now()}
	var l raft.Log
	if err := readEntry(w, last, &l); err == nil {
		v.Term = l.Term
	} else {
		v.Term = currentTerm()
	}
	if err := hold.hold(v); err != nil {
		return err
	}
	if bad <= first {
		err = w.DeleteRange(first, last)
	} else {
		err = w.DeleteRange(bad, last)
	}
	if err != nil {
		return fmt.Errorf("cluster: integrity: cut the log from entry %d: %w", bad, err)
	}
	c.repaired.Add(1)
	logger.Error("corrupt Raft log: cut entries from the first bad one; this replica catches up from the leader "+
		"and votes only for a log at least as current as the one it had until then",
		"reason", reason, "cut_from", bad, "cut_to", last, "snapshot_index", snapIndex, "hold_index", v.Index, "hold_term", v.Term)
	return nil
}

// checkSnapshots opens the snapshots newest first, moving each that fails
// its check (or whose metadata is unreadable) into the quarantine, until
// one is whole; it returns that one's index (0: none).
func checkSnapshots(dataDir string, snaps *raft.FileSnapshotStore, c *integrity, logger hclog.Logger) (uint64, error) {
	dir := filepath.Join(dataDir, "snapshots")
	entries, err := os.ReadDir(dir)
	if err != nil {
		if os.IsNotExist(err) {
			return 0, nil
		}
		return 0, fmt.Errorf("cluster: integrity: %w", err)
	}
	listed, err := snaps.List()
	if err != nil {
		return 0, fmt.Errorf("cluster: integrity: list snapshots: %w", err)
	}
	known := map[string]bool{}
	for _, m := range listed {
		known[m.ID] = true
	}
	// A directory raft does not list has metadata it cannot read: Raft
	// skips it and never reaps it, so it goes to the quarantine.
	var unlisted []string
	for _, e := range entries {
		if e.IsDir() && !known[e.Name()] && !strings.HasSuffix(e.Name(), ".tmp") {
			unlisted = append(unlisted, e.Name())
		}
	}
	sort.Strings(unlisted)
	var good *raft.SnapshotMeta
	for _, m := range listed {
		if err := openSnapshot(snaps, m.ID); err != nil {
			c.found.Add(1)
			if qerr := quarantine(dataDir, dir, m.ID); qerr != nil {
				return 0, qerr
			}
			c.repaired.Add(1)
			logger.Error("corrupt snapshot: moved to the quarantine; an older snapshot, the log or the leader replaces it",
				"snapshot", m.ID, "index", m.Index, "error", err, "quarantine", filepath.Join(dataDir, quarantineDir))
			continue
		}
		good = m
		break
	}
	for _, id := range unlisted {
		c.found.Add(1)
		if err := quarantine(dataDir, dir, id); err != nil {
			return 0, err
		}
		c.repaired.Add(1)
		logger.Error("snapshot with unreadable metadata: moved to the quarantine", "snapshot", id)
	}
	if good == nil {
		return 0, nil
	}
	return good.Index, nil
}

// openSnapshot opens a snapshot, which reads state.bin through and checks
// its CRC-64 (hashicorp/raft's FileSnapshotStore.Open).
func openSnapshot(snaps *raft.FileSnapshotStore, id string) error {
	_, rc, err := snaps.Open(id)
	if err != nil {
		return err
	}
	return rc.Close()
}

// quarantine moves snapshots/id into DataDir/quarantine, durably.
func quarantine(dataDir, snapDir, id string) error {
	q := filepath.Join(dataDir, quarantineDir)
	if err := durable.MkdirAll(q, dataDirMode); err != nil {
		return fmt.Errorf("cluster: quarantine: %w", err)
	}
	dst := filepath.Join(q, "snapshot-"+id)
	if _, err := os.Stat(dst); err == nil {
		dst = fmt.Sprintf("%s-%d", dst, os.Getpid())
	}
	if err := durable.Rename(filepath.Join(snapDir, id), dst); err != nil {
		return fmt.Errorf("cluster: quarantine snapshot %s: %w", id, err)
	}
	return nil
}

// scrubLoop checks the whole log and the newest snapshot every
// ScrubInterval (the first time one interval after start: a start checks
// what Raft reads). It stops on Shutdown.
func (n *Node) scrubLoop() {
	defer n.wg.Done()
	every := n.timing.ScrubInterval
	if every < 0 {
		return
	}
	clk := n.cfg.Clock
	for {
		t := clock.NewTimer(clk, every)
		select {
		case <-t.C:
		case <-n.shutdownCh:
			t.Stop()
			return
		}
		if n.storage.Fault() != nil {
			continue // it restarts once the storage works, and checks then
		}
		n.Scrub()
	}
}

// scrubBatch is how many entries the scrub reads between two checks for
// shutdown.
const scrubBatch = 256

// Scrub reads every entry and the newest snapshot once; what fails is
// handled as a read that fails (checkedWAL.GetLog). It returns how many
// entries it read.
func (n *Node) Scrub() (read uint64) {
	c := n.integrity
	first, err := c.w.FirstIndex()
	if err != nil {
		return 0
	}
	last, err := c.w.LastIndex()
	if err != nil {
		return 0
	}
	w := checkedWAL{rawStore: c.w, c: c}
	var l raft.Log
	for i := first; i > 0 && i <= last; i++ {
		if i%scrubBatch == 0 && n.stopping() {
			return read
		}
		if err := w.GetLog(i, &l); err == nil {
			read++
		} else if errors.Is(err, raft.ErrLogNotFound) {
			// Cut by a compaction meanwhile, or bad (handled): on to the
			// rest, which the compaction keeps.
			if f, ferr := c.w.FirstIndex(); ferr == nil && f > i {
				i = f - 1
			}
		}
	}
	if fs, ok := n.snaps.(privateSnapshots); ok {
		if fss, ok := fs.SnapshotStore.(*raft.FileSnapshotStore); ok {
			if l, err := fss.List(); err == nil && len(l) > 0 {
				if err := openSnapshot(fss, l[0].ID); err != nil && !n.stopping() {
					c.found.Add(1)
					e := &CorruptError{What: "snapshot", Index: l[0].Index, ID: l[0].ID, Reason: err.Error()}
					n.logger.Error("corrupt snapshot: this replica restarts in place, moves it to the quarantine and "+
						"recovers from an older snapshot and its log, or from the leader", "error", e)
					c.fail(e)
				}
			}
		}
	}
	return read
}
