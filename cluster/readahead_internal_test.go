package cluster

import (
	"bytes"
	"errors"
	"io"
	"os"
	"path/filepath"
	"testing"
)

// countingReader is a ReaderAt over b that counts its reads.
type countingReader struct {
	b     []byte
	reads int
}

func (c *countingReader) ReadAt(p []byte, off int64) (int, error) {
	c.reads++
	return bytes.NewReader(c.b).ReadAt(p, off)
}

// Small reads walked through a file, as a frame-header walk makes them,
// give the file's bytes, end at its end as the file does, and cost a
// read per window, not per call; large reads go to the file as they are.
func TestAheadReaderWalk(t *testing.T) {
	data := make([]byte, 3*aheadWindow+1000)
	for i := range data {
		data[i] = byte(i * 7)
	}
	src := &countingReader{b: data}
	a := &aheadReader{r: src}
	var fh [8]byte
	calls := 0
	off := int64(0)
	for {
		n, err := a.ReadAt(fh[:], off)
		calls++
		want := data[min(off, int64(len(data))):min(off+8, int64(len(data)))]
		if !bytes.Equal(fh[:n], want) {
			t.Fatalf("read at %d: %x, want %x", off, fh[:n], want)
		}
		if n < len(fh) {
			if !errors.Is(err, io.EOF) {
				t.Fatalf("short read at %d without io.EOF: %d, %v", off, n, err)
			}
			break
		}
		if err != nil {
			t.Fatalf("read at %d: %v", off, err)
		}
		off += 8 + 40 // a header and a small frame
	}
	if max := len(data)/aheadWindow + 2; src.reads > max {
		t.Fatalf("%d reads of the file for %d small reads, want at most %d", src.reads, calls, max)
	}

	before := src.reads
	big := make([]byte, aheadSmall+1)
	if n, err := a.ReadAt(big, 100); n != len(big) || err != nil || !bytes.Equal(big, data[100:100+len(big)]) {
		t.Fatalf("large read: %d, %v", n, err)
	}
	if src.reads != before+1 {
		t.Fatalf("a large read made %d reads of the file, want 1", src.reads-before)
	}
	// Backwards, before the window.
	if n, err := a.ReadAt(fh[:], 16); n != 8 || err != nil || !bytes.Equal(fh[:], data[16:24]) {
		t.Fatalf("read back at 16: %x, %v", fh[:n], err)
	}
}

// The tail segment is read ahead only while the WAL opens: a write in
// recovery drops the window, and once the WAL is open every read goes to
// the file, which appends change.
func TestRecoveryFSReadsAheadOnlyWhileOpening(t *testing.T) {
	dir := t.TempDir()
	name := "seg.wal"
	if err := os.WriteFile(filepath.Join(dir, name), bytes.Repeat([]byte{1}, 4096), 0o600); err != nil {
		t.Fatal(err)
	}
	v := newRecoveryFS()
	f, err := v.OpenWriter(dir, name)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if _, ok := f.(*recoveringFile); !ok {
		t.Fatalf("the tail opened while the WAL opens is a %T, want it read ahead", f)
	}
	var b [8]byte
	read := func(off int64) []byte {
		t.Helper()
		if _, err := f.ReadAt(b[:], off); err != nil {
			t.Fatal(err)
		}
		return b[:]
	}
	if got := read(0); !bytes.Equal(got, bytes.Repeat([]byte{1}, 8)) {
		t.Fatalf("read %x", got)
	}
	if _, err := f.WriteAt(bytes.Repeat([]byte{2}, 8), 8); err != nil {
		t.Fatal(err)
	}
	if got := read(8); !bytes.Equal(got, bytes.Repeat([]byte{2}, 8)) {
		t.Fatalf("after a write in recovery the window answered %x", got)
	}
	read(16) // a window that holds offset 24 again
	v.opened()
	// Written behind the file's back, as raft-wal's appends are after
	// the open (through another handle here, so no invalidate runs).
	if err := os.WriteFile(filepath.Join(dir, name), bytes.Repeat([]byte{3}, 4096), 0o600); err != nil {
		t.Fatal(err)
	}
	if got := read(24); !bytes.Equal(got, bytes.Repeat([]byte{3}, 8)) {
		t.Fatalf("after the open a read answered %x from the window", got)
	}
	g, err := v.OpenWriter(dir, name)
	if err != nil {
		t.Fatal(err)
	}
	defer g.Close()
	if _, ok := g.(*recoveringFile); ok {
		t.Fatal("a segment opened after the WAL opened is read ahead")
	}
}
