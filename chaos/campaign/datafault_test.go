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
	for i := 1; i <= n; i++ {
		// Commits of one and of several entries.
		var logs []*raft.Log
		for j := 0; j < 1+i%3 && i <= n; j++ {
			logs = append(logs, &raft.Log{Index: uint64(i), Term: 1, Type: raft.LogCommand, Data: []byte(fmt.Sprintf("payload-%03d-%s", i, bytes.Repeat([]byte("x"), i)))})
			i++
		}
		i--
		if err := w.StoreLogs(logs); err != nil {
			t.Fatal(err)
		}
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
	entries := walEntries(b)
	if len(entries) != n {
		t.Fatalf("found %d entry frames, want %d", len(entries), n)
	}
	for k, e := range entries {
		if want := []byte(fmt.Sprintf("payload-%03d-", k+1)); !bytes.Contains(b[e[0]:e[1]], want) {
			t.Fatalf("entry frame %d holds %q, want %q in it", k+1, b[e[0]:e[1]], want)
		}
	}
}
