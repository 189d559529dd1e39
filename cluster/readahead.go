package cluster

import (
	"io"
	"sync"
	"sync/atomic"

	walfs "github.com/hashicorp/raft-wal/fs"
	"github.com/hashicorp/raft-wal/types"
)

// A start walks the open segment of the Raft log twice, frame header by
// frame header: scanTail (segcheck.go) and raft-wal's own recovery. Each
// header was a read of 8 bytes, a system call: two per entry, for every
// entry the segment holds (thousands: the log keeps 10,240 behind the
// snapshot), about 1.7 ms per walk with 2,000 entries on a 2-core
// machine. aheadReader reads a window of the file instead and answers the
// small reads from it.

// aheadWindow is the bytes read at once; aheadSmall is the largest read
// answered from the window, larger ones go to the file as they are.
const (
	aheadWindow = 64 << 10
	aheadSmall  = 64
)

// aheadReader answers small reads of r from a window read ahead. The
// window is only right while nobody writes the file behind the reader's
// back: it is for files read through once (invalidate drops it).
type aheadReader struct {
	r   io.ReaderAt
	mu  sync.Mutex
	buf []byte // the window: the file's bytes from off, as many as were read
	off int64
}

func (a *aheadReader) ReadAt(p []byte, off int64) (int, error) {
	if len(p) > aheadSmall || off < 0 {
		return a.r.ReadAt(p, off)
	}
	a.mu.Lock()
	defer a.mu.Unlock()
	end := off + int64(len(p))
	if a.buf == nil || off < a.off || end > a.off+int64(len(a.buf)) {
		if cap(a.buf) == 0 {
			a.buf = make([]byte, aheadWindow)
		}
		n, err := a.r.ReadAt(a.buf[:cap(a.buf)], off)
		a.buf, a.off = a.buf[:n], off
		if n < len(p) {
			// The file ends (or failed) within p: what there is, and why
			// not more (a ReaderAt that reads less says why).
			return copy(p, a.buf), err
		}
	}
	return copy(p, a.buf[off-a.off:end-a.off]), nil
}

// invalidate drops the window, after a write.
func (a *aheadReader) invalidate() {
	a.mu.Lock()
	a.buf = a.buf[:0]
	a.off = 0
	a.mu.Unlock()
}

// recoveryFS is raft-wal's file system, but the segment it reopens for
// appending (the log's tail) is read ahead while the WAL opens: raft-wal
// walks it from the start to rebuild its index. Once open (opened), every
// read goes to the file as raft-wal issues it, since appends then change
// the file under any window.
type recoveryFS struct {
	types.VFS
	done atomic.Bool
}

func newRecoveryFS() *recoveryFS { return &recoveryFS{VFS: walfs.New()} }

// opened ends the reads ahead: call it once wal.Open returned.
func (v *recoveryFS) opened() { v.done.Store(true) }

func (v *recoveryFS) OpenWriter(dir, name string) (types.WritableFile, error) {
	f, err := v.VFS.OpenWriter(dir, name)
	if err != nil || v.done.Load() {
		return f, err
	}
	return &recoveringFile{WritableFile: f, ahead: aheadReader{r: f}, done: &v.done}, nil
}

// recoveringFile is a tail segment opened while the WAL opens.
type recoveringFile struct {
	types.WritableFile
	ahead aheadReader
	done  *atomic.Bool
}

func (f *recoveringFile) ReadAt(p []byte, off int64) (int, error) {
	if f.done.Load() {
		return f.WritableFile.ReadAt(p, off)
	}
	return f.ahead.ReadAt(p, off)
}

func (f *recoveringFile) WriteAt(p []byte, off int64) (int, error) {
	// Recovery writes only to start an empty segment afresh; whatever it
	// writes, the window must not answer for those bytes any more.
	n, err := f.WritableFile.WriteAt(p, off)
	if !f.done.Load() {
		f.ahead.invalidate()
	}
	return n, err
}
