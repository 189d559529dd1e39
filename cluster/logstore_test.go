package cluster

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/hashicorp/go-hclog"
	"github.com/hashicorp/raft"
	raftboltdb "github.com/hashicorp/raft-boltdb/v2"
)

// entry is the test log entry at index i.
func entry(i uint64) *raft.Log {
	return &raft.Log{Index: i, Term: 1 + i/100, Type: raft.LogCommand, Data: bytes.Repeat([]byte{byte(i)}, 100+int(i%700))}
}

// checkLog fails unless store holds exactly the entries first..last as
// entry makes them, and the stable keys of keys.
func checkLog(t *testing.T, store interface {
	raft.LogStore
	raft.StableStore
}, first, last uint64) {
	t.Helper()
	if f, _ := store.FirstIndex(); f != first {
		t.Fatalf("first index %d, want %d", f, first)
	}
	if l, _ := store.LastIndex(); l != last {
		t.Fatalf("last index %d, want %d", l, last)
	}
	for i := first; i <= last; i++ {
		var got raft.Log
		if err := store.GetLog(i, &got); err != nil {
			t.Fatalf("entry %d: %v", i, err)
		}
		want := entry(i)
		if got.Index != want.Index || got.Term != want.Term || got.Type != want.Type || !bytes.Equal(got.Data, want.Data) {
			t.Fatalf("entry %d differs: %+v", i, got)
		}
	}
}

func storeEntries(t *testing.T, s raft.LogStore, from, to uint64) {
	t.Helper()
	var batch []*raft.Log
	for i := from; i <= to; i++ {
		batch = append(batch, entry(i))
		if len(batch) == 50 || i == to {
			if err := s.StoreLogs(batch); err != nil {
				t.Fatal(err)
			}
			batch = nil
		}
	}
}

// The WAL keeps every entry and stable key across a reopen.
func TestLogStoreKeepsEverythingAcrossReopen(t *testing.T) {
	dir := t.TempDir()
	s, err := openLogStore(dir, DefaultSegmentSize, nil, hclog.NewNullLogger())
	if err != nil {
		t.Fatal(err)
	}
	storeEntries(t, s, 1, 300)
	if err := s.SetUint64(stableKeys.currentTerm, 7); err != nil {
		t.Fatal(err)
	}
	if err := s.Set(stableKeys.lastVoteCand, []byte("r2")); err != nil {
		t.Fatal(err)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	s, err = openLogStore(dir, DefaultSegmentSize, nil, hclog.NewNullLogger())
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	checkLog(t, s, 1, 300)
	if v, err := s.GetUint64(stableKeys.currentTerm); err != nil || v != 7 {
		t.Fatalf("CurrentTerm %d, %v", v, err)
	}
	if v, err := s.Get(stableKeys.lastVoteCand); err != nil || string(v) != "r2" {
		t.Fatalf("LastVoteCand %q, %v", v, err)
	}
}

// A snapshot's truncation deletes whole segments: the log's disk use
// stays bounded by the trailing entries and a segment or two.
func TestLogStoreDeletesTruncatedSegments(t *testing.T) {
	dir := t.TempDir()
	const segment = 64 << 10
	s, err := openLogStore(dir, segment, nil, hclog.NewNullLogger())
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	segments := func() int {
		names, err := filepath.Glob(filepath.Join(dir, walDir, "*.wal"))
		if err != nil {
			t.Fatal(err)
		}
		return len(names)
	}
	storeEntries(t, s, 1, 2000)
	grown := segments()
	if grown < 4 {
		t.Fatalf("%d segments for 2000 entries of 64 KiB segments", grown)
	}
	if err := s.DeleteRange(1, 1900); err != nil {
		t.Fatal(err)
	}
	if n := segments(); n > 3 {
		t.Fatalf("%d segments after truncating all but 100 entries (had %d)", n, grown)
	}
	checkLog(t, s, 1901, 2000)
}

// makeBolt writes a raft.db as releases before the WAL did: entries
// first..last and the stable keys.
func makeBolt(t *testing.T, dir string, first, last uint64) {
	t.Helper()
	b, err := raftboltdb.NewBoltStore(filepath.Join(dir, boltFile))
	if err != nil {
		t.Fatal(err)
	}
	storeEntries(t, b, 1, last)
	if first > 1 {
		if err := b.DeleteRange(1, first-1); err != nil {
			t.Fatal(err)
		}
	}
	for k, v := range map[string]uint64{"CurrentTerm": 9, "LastVoteTerm": 8} {
		if err := b.SetUint64([]byte(k), v); err != nil {
			t.Fatal(err)
		}
	}
	if err := b.Set(stableKeys.lastVoteCand, []byte("replica-2")); err != nil {
		t.Fatal(err)
	}
	if err := b.Close(); err != nil {
		t.Fatal(err)
	}
}

// A data directory of an earlier release (raft.db) is moved into the WAL
// on start: the same entries and stable keys, and raft.db is gone. A
// power loss during an earlier migration (a half-built side directory,
// or the WAL in place with raft.db not yet removed) changes nothing.
func TestLogStoreMigratesBolt(t *testing.T) {
	for _, tc := range []struct {
		name    string
		prepare func(t *testing.T, dir string)
	}{
		{"fresh", func(*testing.T, string) {}},
		{"half-built side directory", func(t *testing.T, dir string) {
			side := filepath.Join(dir, walDir+".migrating")
			if err := os.MkdirAll(side, 0o700); err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile(filepath.Join(side, "00000000000000000001-0000000000000001.wal"), []byte("torn"), 0o600); err != nil {
				t.Fatal(err)
			}
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			makeBolt(t, dir, 41, 1200)
			tc.prepare(t, dir)
			s, err := openLogStore(dir, 64<<10, nil, hclog.NewNullLogger())
			if err != nil {
				t.Fatal(err)
			}
			checkLog(t, s, 41, 1200)
			for k, want := range map[string]uint64{"CurrentTerm": 9, "LastVoteTerm": 8} {
				if v, err := s.GetUint64([]byte(k)); err != nil || v != want {
					t.Fatalf("%s = %d (%v), want %d", k, v, err, want)
				}
			}
			if v, err := s.Get(stableKeys.lastVoteCand); err != nil || string(v) != "replica-2" {
				t.Fatalf("LastVoteCand %q, %v", v, err)
			}
			if _, err := os.Stat(filepath.Join(dir, boltFile)); !os.IsNotExist(err) {
				t.Fatalf("raft.db still there: %v", err)
			}
			if _, err := os.Stat(filepath.Join(dir, walDir+".migrating")); !os.IsNotExist(err) {
				t.Fatalf("side directory still there: %v", err)
			}
			// A raft.db next to the WAL is what a power loss between the
			// rename and the removal leaves: the WAL wins.
			if err := s.Close(); err != nil {
				t.Fatal(err)
			}
			makeBolt(t, dir, 1, 5)
			s, err = openLogStore(dir, 64<<10, nil, hclog.NewNullLogger())
			if err != nil {
				t.Fatal(err)
			}
			defer s.Close()
			checkLog(t, s, 41, 1200)
			if _, err := os.Stat(filepath.Join(dir, boltFile)); !os.IsNotExist(err) {
				t.Fatalf("raft.db next to the WAL not removed: %v", err)
			}
		})
	}
}

// An empty raft.db (a replica that never stored anything) migrates to an
// empty WAL.
func TestLogStoreMigratesEmptyBolt(t *testing.T) {
	dir := t.TempDir()
	b, err := raftboltdb.NewBoltStore(filepath.Join(dir, boltFile))
	if err != nil {
		t.Fatal(err)
	}
	b.Close()
	s, err := openLogStore(dir, 64<<10, nil, hclog.NewNullLogger())
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	if l, _ := s.LastIndex(); l != 0 {
		t.Fatalf("last index %d", l)
	}
}

// A raft.db that cannot be read stops the start with an error naming it,
// and is left where it is.
func TestLogStoreRefusesUnreadableBolt(t *testing.T) {
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, boltFile), []byte(strings.Repeat("not a database", 400)), 0o600); err != nil {
		t.Fatal(err)
	}
	_, err := openLogStore(dir, 64<<10, nil, hclog.NewNullLogger())
	if err == nil || !strings.Contains(err.Error(), boltFile) {
		t.Fatalf("err = %v, want one naming %s", err, boltFile)
	}
	if _, err := os.Stat(filepath.Join(dir, boltFile)); err != nil {
		t.Fatal(fmt.Errorf("raft.db removed after a failed migration: %w", err))
	}
}

// Raft clears a log suffix (a follower's entries the new leader does not
// have) with DeleteRange on the tail; the WAL seals the tail segment then.
// After a restart the whole log reads back. raft-wal v0.4.0 marked the
// segment sealed without its index block, and the next start failed with
// "sealed segment has no index block" (hashicorp/raft-wal#31); the chaos
// campaign's SIGKILLs found it.
func TestLogStoreReadsBackAfterTailTruncation(t *testing.T) {
	dir := t.TempDir()
	s, err := openLogStore(dir, DefaultSegmentSize, nil, hclog.NewNullLogger())
	if err != nil {
		t.Fatal(err)
	}
	storeEntries(t, s, 1, 424)
	if err := s.DeleteRange(424, 424); err != nil {
		t.Fatal(err)
	}
	storeEntries(t, s, 424, 430)
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	s, err = openLogStore(dir, DefaultSegmentSize, nil, hclog.NewNullLogger())
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	checkLog(t, s, 1, 430)
}

// With LogStoreBolt the log is raft.db, kept across a reopen, and no WAL
// is made beside it.
func TestBoltStoreKeepsEverythingAcrossReopen(t *testing.T) {
	dir := t.TempDir()
	s, err := openStore(dir, LogStoreBolt, DefaultSegmentSize, nil, hclog.NewNullLogger())
	if err != nil {
		t.Fatal(err)
	}
	storeEntries(t, s, 1, 300)
	if err := s.SetUint64(stableKeys.currentTerm, 7); err != nil {
		t.Fatal(err)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	s, err = openStore(dir, LogStoreBolt, DefaultSegmentSize, nil, hclog.NewNullLogger())
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	checkLog(t, s, 1, 300)
	if v, err := s.GetUint64(stableKeys.currentTerm); err != nil || v != 7 {
		t.Fatalf("CurrentTerm %d, %v", v, err)
	}
	if _, err := os.Stat(filepath.Join(dir, walDir)); !os.IsNotExist(err) {
		t.Fatalf("a WAL was made beside raft.db: %v", err)
	}
}

// A data directory that holds a WAL is refused with LogStoreBolt: its
// entries are not moved back, and raft-boltdb would start empty. The WAL
// is left as it was and no raft.db is made.
func TestBoltStoreRefusesAWAL(t *testing.T) {
	dir := t.TempDir()
	w, err := openStore(dir, LogStoreWAL, 64<<10, nil, hclog.NewNullLogger())
	if err != nil {
		t.Fatal(err)
	}
	storeEntries(t, w, 1, 20)
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	_, err = openStore(dir, LogStoreBolt, 64<<10, nil, hclog.NewNullLogger())
	if !errors.Is(err, ErrLogStoreSwitch) || !strings.Contains(err.Error(), "LogStore") || !strings.Contains(err.Error(), walDir) {
		t.Fatalf("err = %v, want ErrLogStoreSwitch naming the field and %s/", err, walDir)
	}
	if _, err := os.Stat(filepath.Join(dir, boltFile)); !os.IsNotExist(err) {
		t.Fatalf("raft.db made beside the WAL: %v", err)
	}
	w, err = openStore(dir, LogStoreWAL, 64<<10, nil, hclog.NewNullLogger())
	if err != nil {
		t.Fatal(err)
	}
	defer w.Close()
	checkLog(t, w, 1, 20)
}

// A raft.db a node kept with LogStoreBolt moves into the WAL when the
// node starts with LogStoreWAL, each entry's sum with it: the entries
// read back checked.
func TestBoltStoreMigratesToTheWALWithItsSums(t *testing.T) {
	dir := t.TempDir()
	b, err := openStore(dir, LogStoreBolt, 64<<10, nil, hclog.NewNullLogger())
	if err != nil {
		t.Fatal(err)
	}
	cb := checkedWAL{rawStore: b, c: newIntegrity(b, hclog.NewNullLogger())}
	for i := uint64(1); i <= 120; i++ {
		if err := cb.storeLogs([]*raft.Log{entry(i)}); err != nil {
			t.Fatal(err)
		}
	}
	if err := b.SetUint64(stableKeys.currentTerm, 5); err != nil {
		t.Fatal(err)
	}
	if err := b.Close(); err != nil {
		t.Fatal(err)
	}
	w, err := openStore(dir, LogStoreWAL, 64<<10, nil, hclog.NewNullLogger())
	if err != nil {
		t.Fatal(err)
	}
	defer w.Close()
	if _, err := os.Stat(filepath.Join(dir, boltFile)); !os.IsNotExist(err) {
		t.Fatalf("raft.db still there after the migration: %v", err)
	}
	for i := uint64(1); i <= 120; i++ {
		var l raft.Log
		if err := w.GetLog(i, &l); err != nil {
			t.Fatalf("entry %d: %v", i, err)
		}
		if !bytes.HasPrefix(l.Extensions, sumTag) {
			t.Fatalf("entry %d lost its sum in the migration: %q", i, l.Extensions)
		}
		if err := checkEntry(i, &l); err != nil || !bytes.Equal(l.Data, entry(i).Data) {
			t.Fatalf("entry %d: %v", i, err)
		}
	}
	if v, err := w.GetUint64(stableKeys.currentTerm); err != nil || v != 5 {
		t.Fatalf("CurrentTerm %d, %v", v, err)
	}
}
