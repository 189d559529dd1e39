package flashfs

import (
	"context"
	"syscall"

	"github.com/hanwen/go-fuse/v2/fs"
	"github.com/hanwen/go-fuse/v2/fuse"
	"golang.org/x/sys/unix"
)

// handle is an open file: a descriptor of the backing file, read-write
// when the process may write.
type handle struct {
	n        *node
	fd       int
	key      inoKey
	writable bool
}

var (
	_ fs.FileReader    = (*handle)(nil)
	_ fs.FileWriter    = (*handle)(nil)
	_ fs.FileFlusher   = (*handle)(nil)
	_ fs.FileReleaser  = (*handle)(nil)
	_ fs.FileAllocater = (*handle)(nil)
)

func (h *handle) path() string {
	p, e := h.n.rel()
	if e != 0 {
		return "(unlinked)"
	}
	return p
}

func (h *handle) Read(ctx context.Context, dest []byte, off int64) (fuse.ReadResult, syscall.Errno) {
	v := h.n.vol
	if e := v.enter(); e != 0 {
		return nil, e
	}
	defer v.mu.Unlock()
	if f := v.m.faults(); len(f.eio) > 0 && f.eioOn(h.path(), false) {
		return nil, syscall.EIO
	}
	var k int
	var err error
	if s := v.files[h.key]; s != nil {
		k, err = s.readAt(dest, off)
	} else {
		k, err = preadFull(h.fd, dest, off)
	}
	if err != nil {
		return nil, errno(err)
	}
	return fuse.ReadResultData(dest[:k]), 0
}

func (h *handle) Write(ctx context.Context, data []byte, off int64) (uint32, syscall.Errno) {
	v, _, e := h.n.begin(true)
	if e != 0 {
		return 0, e
	}
	defer v.mu.Unlock()
	if !h.writable {
		return 0, syscall.EBADF
	}
	s := v.files[h.key]
	if s == nil {
		var err error
		if s, err = v.state(h.key, h.fd, h.path()); err != nil {
			return 0, errno(err)
		}
	}
	v.seq++
	s.write(v.seq, off, data)
	return uint32(len(data)), 0
}

// Flush is close(2): nothing becomes durable.
func (h *handle) Flush(ctx context.Context) syscall.Errno { return 0 }

func (h *handle) Release(ctx context.Context) syscall.Errno {
	unix.Close(h.fd)
	return 0
}

// Allocate is fallocate(2): the backing file gets the blocks (so a real
// shortage of space shows), the size grows in the volatile layer.
func (h *handle) Allocate(ctx context.Context, off, size uint64, mode uint32) syscall.Errno {
	v, _, e := h.n.begin(true)
	if e != 0 {
		return e
	}
	defer v.mu.Unlock()
	if !h.writable {
		return syscall.EBADF
	}
	if mode&^uint32(unix.FALLOC_FL_KEEP_SIZE) != 0 {
		return syscall.EOPNOTSUPP
	}
	if err := unix.Fallocate(h.fd, unix.FALLOC_FL_KEEP_SIZE, int64(off), int64(size)); err != nil {
		return errno(err)
	}
	if mode&unix.FALLOC_FL_KEEP_SIZE != 0 {
		return 0
	}
	end := int64(off + size)
	s := v.files[h.key]
	if s == nil {
		var st unix.Stat_t
		if err := unix.Fstat(h.fd, &st); err != nil {
			return errno(err)
		}
		if end <= st.Size {
			return 0
		}
		var err error
		if s, err = v.state(h.key, h.fd, h.path()); err != nil {
			return errno(err)
		}
	}
	if end > s.size {
		s.setSize(end)
	}
	return 0
}
