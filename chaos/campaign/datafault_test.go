package campaign

import (
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"testing"

	"github.com/hashicorp/raft"
	wal "github.com/hashicorp/raft-wal"
)

// walEntries finds every entry of a segment raft-wal wrote, in order,
// each payload holding its entry's data: the corrupt-log fault flips a
// bit inside one, never in a frame header.
func TestWalEntriesFindsRaftWALsEntries(t *testing.T) {
	dir := t.TempDir()
	w, err := wal.Open(dir, wal.WithSegmentSize(1<<20))
	if err != nil {
		t.Fatal(err)
	}
	const n = 50
	// Commits of one, two and three entries in turn.
	lastBatch := 0
	for i, size := 1, 1; i <= n; size = size%3 + 1 {
		var logs []*raft.Log
		for ; len(logs) < size && i <= n; i++ {
			logs = append(logs, &raft.Log{Index: uint64(i), Term: 1, Type: raft.LogCommand, Data: []byte(fmt.Sprintf("payload-%03d-%s", i, bytes.Repeat([]byte("x"), i)))})
		}
		if err := w.StoreLogs(logs); err != nil {
			t.Fatal(err)
		}
		lastBatch = len(logs)
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	segs, _ := filepath.Glob(filepath.Join(dir, "*.wal"))
	if len(segs) != 1 {
		t.Fatalf("segments %v", segs)
	}
	b, err := os.ReadFile(segs[0])
	if err != nil {
		t.Fatal(err)
	}
	entries, before := walEntries(b)
	if len(entries) != n {
		t.Fatalf("found %d entry frames, want %d", len(entries), n)
	}
	if before != n-lastBatch {
		t.Fatalf("%d entries before the last commit's batch, want %d", before, n-lastBatch)
	}
	for k, e := range entries {
		if want := []byte(fmt.Sprintf("payload-%03d-", k+1)); !bytes.Contains(b[e[0]:e[1]], want) {
			t.Fatalf("entry frame %d holds %q, want %q in it", k+1, b[e[0]:e[1]], want)
		}
	}
}
