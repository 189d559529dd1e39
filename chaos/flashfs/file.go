package flashfs

import (
	"sort"

	"golang.org/x/sys/unix"
)

// extent is a run of written bytes not yet in the backing file.
type extent struct {
	off  int64
	data []byte
	// lost marks bytes an fsync failed to write (an eio fault): they are
	// still read back, as Linux keeps them in the page cache, but no
	// later fsync writes them (the PostgreSQL "fsyncgate" behaviour).
	lost bool
}

func (e *extent) end() int64 { return e.off + int64(len(e.data)) }

// overlay is a file's unsynced bytes: sorted, non-overlapping extents.
type overlay struct{ ext []extent }

// write records data at off over whatever was there.
func (o *overlay) write(off int64, data []byte) {
	end := off + int64(len(data))
	i := sort.Search(len(o.ext), func(i int) bool { return o.ext[i].end() > off })
	j := i
	var left, right *extent
	for j < len(o.ext) && o.ext[j].off < end {
		e := o.ext[j]
		if e.off < off {
			k := off - e.off
			// Capped, so that appending to it never writes into the
			// bytes that follow in the same array.
			left = &extent{off: e.off, data: e.data[:k:k], lost: e.lost}
		}
		if e.end() > end {
			right = &extent{off: end, data: e.data[end-e.off:], lost: e.lost}
		}
		j++
	}
	// Appends are the common case (a log): grow the extent just before.
	if left == nil && i > 0 && i == j && o.ext[i-1].end() == off && !o.ext[i-1].lost {
		o.ext[i-1].data = append(o.ext[i-1].data, data...)
		return
	}
	repl := make([]extent, 0, 3)
	if left != nil {
		repl = append(repl, *left)
	}
	repl = append(repl, extent{off: off, data: append([]byte(nil), data...)})
	if right != nil {
		repl = append(repl, *right)
	}
	o.ext = append(o.ext[:i], append(repl, o.ext[j:]...)...)
}

// read copies the overlay's bytes that fall in [off, off+len(buf)).
func (o *overlay) read(off int64, buf []byte) {
	end := off + int64(len(buf))
	i := sort.Search(len(o.ext), func(i int) bool { return o.ext[i].end() > off })
	for ; i < len(o.ext) && o.ext[i].off < end; i++ {
		e := &o.ext[i]
		from, to := max(e.off, off), min(e.end(), end)
		copy(buf[from-off:to-off], e.data[from-e.off:to-e.off])
	}
}

// truncate drops every byte at or past n.
func (o *overlay) truncate(n int64) {
	i := sort.Search(len(o.ext), func(i int) bool { return o.ext[i].end() > n })
	if i < len(o.ext) && o.ext[i].off < n {
		k := n - o.ext[i].off
		o.ext[i].data = o.ext[i].data[:k:k]
		i++
	}
	o.ext = o.ext[:i]
}

// bytes is how many bytes the overlay holds.
func (o *overlay) bytes() int64 {
	var n int64
	for _, e := range o.ext {
		n += int64(len(e.data))
	}
	return n
}

// fileState is the volatile layer of one file: its unsynced bytes and
// size. It exists from the first unsynced change of the file to the
// fsync that makes every change durable.
type fileState struct {
	fd   int    // the backing file, read-write, owned by the state
	path string // the file's path at the first unsynced change (for reports)
	size int64  // the size the process sees
	// backSize is the backing file's size; hide cuts it shorter while a
	// truncate is pending: backing bytes at or past hide read as zeros.
	backSize, hide int64
	ov             overlay
	last           *lastWrite // the latest unsynced write, for a torn power cut
}

// lastWrite is one write(2) as the process made it.
type lastWrite struct {
	seq  uint64
	off  int64
	data []byte
}

func newFileState(fd int, path string) (*fileState, error) {
	var st unix.Stat_t
	if err := unix.Fstat(fd, &st); err != nil {
		return nil, err
	}
	return &fileState{fd: fd, path: path, size: st.Size, backSize: st.Size, hide: st.Size}, nil
}

func (s *fileState) write(seq uint64, off int64, data []byte) {
	s.ov.write(off, data)
	s.size = max(s.size, off+int64(len(data)))
	s.last = &lastWrite{seq: seq, off: off, data: append([]byte(nil), data...)}
}

// setSize is a pending truncate (or extension) to n.
func (s *fileState) setSize(n int64) {
	if n < s.size {
		s.ov.truncate(n)
		s.hide = min(s.hide, n)
		if s.last != nil {
			switch {
			case s.last.off >= n:
				s.last = nil
			case s.last.off+int64(len(s.last.data)) > n:
				s.last.data = s.last.data[:n-s.last.off]
			}
		}
	}
	s.size = n
}

// readAt reads what the process sees: the backing file up to the cut of
// a pending truncate, zeros past it, the overlay on top.
func (s *fileState) readAt(buf []byte, off int64) (int, error) {
	if off >= s.size {
		return 0, nil
	}
	b := buf[:min(int64(len(buf)), s.size-off)]
	clear(b)
	if lim := min(s.hide, s.backSize); off < lim {
		if _, err := preadFull(s.fd, b[:min(int64(len(b)), lim-off)], off); err != nil {
			return 0, err
		}
	}
	s.ov.read(off, b)
	return len(b), nil
}

// markLost makes every pending byte lost: a failed fsync.
func (s *fileState) markLost() {
	for i := range s.ov.ext {
		s.ov.ext[i].lost = true
	}
	s.last = nil
}

// flush writes the pending truncate, size and bytes to the backing file:
// the file's data is then durable. Lost bytes stay in the overlay only.
func (s *fileState) flush() error {
	if s.hide < s.backSize {
		if err := unix.Ftruncate(s.fd, s.hide); err != nil {
			return err
		}
		s.backSize = s.hide
	}
	kept := s.ov.ext[:0:0]
	for _, e := range s.ov.ext {
		if e.lost {
			kept = append(kept, e)
			continue
		}
		if err := pwriteFull(s.fd, e.data, e.off); err != nil {
			return err
		}
		s.backSize = max(s.backSize, e.end())
	}
	if s.backSize != s.size {
		if err := unix.Ftruncate(s.fd, s.size); err != nil {
			return err
		}
	}
	s.backSize, s.hide = s.size, s.size
	s.ov.ext = kept
	s.last = nil
	return nil
}

// clean reports whether the state holds nothing the backing file lacks.
func (s *fileState) clean() bool {
	return len(s.ov.ext) == 0 && s.size == s.backSize && s.hide == s.backSize
}

func preadFull(fd int, b []byte, off int64) (int, error) {
	n := 0
	for n < len(b) {
		m, err := unix.Pread(fd, b[n:], off+int64(n))
		if err == unix.EINTR {
			continue
		}
		if err != nil {
			return n, err
		}
		if m == 0 {
			break // end of file: the rest reads as zeros
		}
		n += m
	}
	return n, nil
}

func pwriteFull(fd int, b []byte, off int64) error {
	for len(b) > 0 {
		m, err := unix.Pwrite(fd, b, off)
		if err == unix.EINTR {
			continue
		}
		if err != nil {
			return err
		}
		b, off = b[m:], off+int64(m)
	}
	return nil
}
