package cluster

import (
	"sync"
	"sync/atomic"

	"github.com/hashicorp/raft"
)

// A start reads every entry after the newest snapshot four times: the
// integrity check (startupRepair), the cluster version check
// (checkDataFormat), hashicorp/raft's scan for configurations, and the
// FSM applying them. raft-wal reads at least 64 KiB from the segment file
// for every entry, however small: with 2,000 entries after a power cut,
// the copies alone were a sixth of the CPU of a start. startReads keeps
// the entries the first pass read, so that the others find them in
// memory, until Raft has applied them all.

// startReadsMax bounds the bytes of entries kept: past it, entries are
// read from the store each time, as before.
const startReadsMax = 2 << 20

// startReadsTicks is how many of observeRaft's ticks (one a second) the
// entries are kept at most, when Raft does not apply them all sooner (a
// replica that waits for a leader).
const startReadsTicks = 10

// startReads is the raw log store with the entries read since begin kept
// in memory until release. Every write drops what it may change, and a
// read that raced a write does not keep what it read, so a kept entry is
// always what the store holds.
type startReads struct {
	rawStore
	// keeping is false once the entries are released: from then on the
	// reads and writes of every commit go to the store without the lock.
	keeping atomic.Bool
	mu      sync.Mutex
	logs    map[uint64]raft.Log // nil: not keeping
	bytes   int
	gen     uint64 // counts the writes, for reads that raced one
	until   uint64 // release once Raft applied this index
	ticks   int
}

// raw is the store under the kept entries, for what needs its type.
func (s *startReads) raw() rawStore { return s.rawStore }

// begin keeps the entries read from now on, until Raft has applied until
// (the last index at the start).
func (s *startReads) begin(until uint64) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.logs, s.bytes, s.until, s.ticks = map[uint64]raft.Log{}, 0, until, 0
	s.keeping.Store(true)
}

// tick releases the entries once Raft applied them all, or after
// startReadsTicks ticks; it says whether any were kept before it ran.
func (s *startReads) tick(applied uint64) bool {
	if !s.keeping.Load() {
		return false
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	s.ticks++
	if applied >= s.until || s.ticks >= startReadsTicks {
		// Emptied before the flag drops: a write that still sees it
		// set drops from an empty map, one that sees it clear has
		// nothing to drop.
		s.logs, s.bytes = nil, 0
		s.keeping.Store(false)
	}
	return true
}

func (s *startReads) GetLog(index uint64, l *raft.Log) error {
	if !s.keeping.Load() {
		return s.rawStore.GetLog(index, l)
	}
	s.mu.Lock()
	if kept, ok := s.logs[index]; ok {
		s.mu.Unlock()
		*l = kept
		return nil
	}
	keeping, gen := s.logs != nil, s.gen
	s.mu.Unlock()
	if err := s.rawStore.GetLog(index, l); err != nil || !keeping {
		return err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.logs != nil && s.gen == gen && s.bytes+len(l.Data) <= startReadsMax {
		s.logs[index] = *l
		s.bytes += len(l.Data)
	}
	return nil
}

func (s *startReads) StoreLog(l *raft.Log) error { return s.StoreLogs([]*raft.Log{l}) }

func (s *startReads) StoreLogs(logs []*raft.Log) error {
	if len(logs) == 0 || !s.keeping.Load() {
		return s.rawStore.StoreLogs(logs)
	}
	s.drop(logs[0].Index, ^uint64(0))
	defer s.drop(logs[0].Index, ^uint64(0))
	return s.rawStore.StoreLogs(logs)
}

func (s *startReads) DeleteRange(min, max uint64) error {
	if !s.keeping.Load() {
		return s.rawStore.DeleteRange(min, max)
	}
	s.drop(min, max)
	defer s.drop(min, max)
	return s.rawStore.DeleteRange(min, max)
}

// drop forgets the kept entries from min to max. A write drops them
// before and after it runs: a read that began before the write ended
// keeps nothing (gen), and one that ended before it began was dropped.
func (s *startReads) drop(min, max uint64) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.gen++
	for i, l := range s.logs {
		if i >= min && i <= max {
			s.bytes -= len(l.Data)
			delete(s.logs, i)
		}
	}
}

// IsMonotonic keeps the store's promise (raft.MonotonicLogStore).
func (s *startReads) IsMonotonic() bool { return monotonic(s.rawStore) }
