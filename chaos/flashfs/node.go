package flashfs

import (
	"context"
	"os"
	"slices"
	"strconv"
	"strings"
	"syscall"

	"github.com/hanwen/go-fuse/v2/fs"
	"github.com/hanwen/go-fuse/v2/fuse"
	"golang.org/x/sys/unix"
)

// node is a file, directory or other entry of a mount. Every call goes
// to the backing directory under the volume's lock, through the volatile
// layer.
type node struct {
	fs.Inode
	vol *volume
}

var (
	_ fs.NodeLookuper   = (*node)(nil)
	_ fs.NodeGetattrer  = (*node)(nil)
	_ fs.NodeSetattrer  = (*node)(nil)
	_ fs.NodeOpener     = (*node)(nil)
	_ fs.NodeCreater    = (*node)(nil)
	_ fs.NodeMkdirer    = (*node)(nil)
	_ fs.NodeMknoder    = (*node)(nil)
	_ fs.NodeSymlinker  = (*node)(nil)
	_ fs.NodeLinker     = (*node)(nil)
	_ fs.NodeUnlinker   = (*node)(nil)
	_ fs.NodeRmdirer    = (*node)(nil)
	_ fs.NodeRenamer    = (*node)(nil)
	_ fs.NodeReaddirer  = (*node)(nil)
	_ fs.NodeReadlinker = (*node)(nil)
	_ fs.NodeFsyncer    = (*node)(nil)
	_ fs.NodeStatfser   = (*node)(nil)
)

// rel is the node's path relative to the mount root; ESTALE when the
// node is in no directory any more (unlinked while open).
func (n *node) rel() (string, syscall.Errno) {
	var parts []string
	cur, root := &n.Inode, n.Root()
	for cur != root {
		name, parent := cur.Parent()
		if parent == nil {
			return "", syscall.ESTALE
		}
		parts = append(parts, name)
		cur = parent
	}
	slices.Reverse(parts)
	return strings.Join(parts, "/"), 0
}

func join(dir, name string) string {
	if dir == "" {
		return name
	}
	return dir + "/" + name
}

// childPath is the path of the entry name in n, refusing the trash.
func (n *node) childPath(name string) (string, syscall.Errno) {
	if n.IsRoot() && name == trashName {
		return "", syscall.EPERM
	}
	dir, e := n.rel()
	if e != 0 {
		return "", e
	}
	return join(dir, name), 0
}

// begin enters the volume for a call that changes the file system:
// EROFS when read-only, ENOSPC when full and the call needs space.
func (n *node) begin(space bool) (*volume, *faults, syscall.Errno) {
	v := n.vol
	if e := v.enter(); e != 0 {
		return nil, nil, e
	}
	f := v.m.faults()
	switch {
	case f.readonly:
		v.mu.Unlock()
		return nil, nil, syscall.EROFS
	case space && f.full:
		v.mu.Unlock()
		return nil, nil, syscall.ENOSPC
	}
	return v, f, 0
}

func errno(err error) syscall.Errno { return fs.ToErrno(err) }

// lstatGen stats the backing entry and returns its generation: the birth
// time, so that a reused inode number is a new inode to the kernel.
func lstatGen(abs string) (syscall.Stat_t, uint64, error) {
	var st syscall.Stat_t
	if err := syscall.Lstat(abs, &st); err != nil {
		return st, 0, err
	}
	return st, birthGen(unix.AT_FDCWD, abs, unix.AT_SYMLINK_NOFOLLOW), nil
}

func birthGen(dirfd int, path string, flags int) uint64 {
	var x unix.Statx_t
	if unix.Statx(dirfd, path, flags, unix.STATX_BTIME, &x) != nil || x.Mask&unix.STATX_BTIME == 0 {
		return 1
	}
	return uint64(x.Btime.Sec)*1e9 + uint64(x.Btime.Nsec)
}

func (n *node) newChild(ctx context.Context, st *syscall.Stat_t, gen uint64) *fs.Inode {
	return n.NewInode(ctx, &node{vol: n.vol}, fs.StableAttr{Mode: st.Mode & syscall.S_IFMT, Ino: st.Ino, Gen: gen})
}

// attr fills a with the backing attributes and the volatile size.
func (v *volume) attr(a *fuse.Attr, st *syscall.Stat_t) {
	a.FromStat(st)
	if s := v.files[keyOf(st.Dev, st.Ino)]; s != nil {
		a.Size = uint64(s.size)
		a.Blocks = max(a.Blocks, (a.Size+511)/512)
	}
}

// preserveOwner gives a new entry to the calling process's user, as a
// kernel file system would (this server runs as root).
func preserveOwner(ctx context.Context, abs string) {
	if os.Getuid() != 0 {
		return
	}
	if caller, ok := fuse.FromContext(ctx); ok {
		_ = syscall.Lchown(abs, int(caller.Uid), int(caller.Gid))
	}
}

func (n *node) Lookup(ctx context.Context, name string, out *fuse.EntryOut) (*fs.Inode, syscall.Errno) {
	v := n.vol
	if e := v.enter(); e != 0 {
		return nil, e
	}
	defer v.mu.Unlock()
	p, e := n.childPath(name)
	if e != 0 {
		return nil, syscall.ENOENT
	}
	st, gen, err := lstatGen(v.abs(p))
	if err != nil {
		return nil, errno(err)
	}
	v.attr(&out.Attr, &st)
	return n.newChild(ctx, &st, gen), 0
}

func (n *node) Getattr(ctx context.Context, fh fs.FileHandle, out *fuse.AttrOut) syscall.Errno {
	v := n.vol
	if e := v.enter(); e != 0 {
		return e
	}
	defer v.mu.Unlock()
	var st syscall.Stat_t
	if h, ok := fh.(*handle); ok {
		if err := syscall.Fstat(h.fd, &st); err != nil {
			return errno(err)
		}
	} else {
		p, e := n.rel()
		if e != 0 {
			return e
		}
		if err := syscall.Lstat(v.abs(p), &st); err != nil {
			return errno(err)
		}
	}
	v.attr(&out.Attr, &st)
	return 0
}

func (n *node) Setattr(ctx context.Context, fh fs.FileHandle, in *fuse.SetAttrIn, out *fuse.AttrOut) syscall.Errno {
	v, _, e := n.begin(false)
	if e != 0 {
		return e
	}
	defer v.mu.Unlock()
	// Through the open file when there is one (its entry may be gone),
	// else through the path, never following a symlink.
	h, _ := fh.(*handle)
	p, perr := n.rel()
	var path string
	var follow int // AT_ flags for the path calls
	if h != nil {
		path = "/proc/self/fd/" + strconv.Itoa(h.fd) // the magic link to the open file
	} else if perr != 0 {
		return perr
	} else {
		path, follow = v.abs(p), unix.AT_SYMLINK_NOFOLLOW
	}
	if m, ok := in.GetMode(); ok {
		var err error
		if h != nil {
			err = unix.Fchmod(h.fd, m&07777)
		} else {
			err = unix.Chmod(path, m&07777) // the kernel resolved any symlink already
		}
		if err != nil {
			return errno(err)
		}
	}
	uid, uok := in.GetUID()
	gid, gok := in.GetGID()
	if uok || gok {
		u, g := -1, -1
		if uok {
			u = int(uid)
		}
		if gok {
			g = int(gid)
		}
		var err error
		if h != nil {
			err = unix.Fchown(h.fd, u, g)
		} else {
			err = unix.Fchownat(unix.AT_FDCWD, path, u, g, follow)
		}
		if err != nil {
			return errno(err)
		}
	}
	// The size before the times, so that an explicit mtime stands.
	if sz, ok := in.GetSize(); ok {
		fd := -1
		if h != nil && h.writable {
			fd = h.fd
		} else {
			f, err := unix.Open(path, unix.O_RDWR|unix.O_CLOEXEC, 0)
			if err != nil {
				return errno(err)
			}
			defer unix.Close(f)
			fd = f
		}
		var st unix.Stat_t
		if err := unix.Fstat(fd, &st); err != nil {
			return errno(err)
		}
		if st.Mode&unix.S_IFMT != unix.S_IFREG {
			return syscall.EINVAL
		}
		s, err := v.state(keyOf(st.Dev, st.Ino), fd, p)
		if err != nil {
			return errno(err)
		}
		s.setSize(int64(sz))
	}
	mtime, mok := in.GetMTime()
	atime, aok := in.GetATime()
	if mok || aok {
		ts := []unix.Timespec{{Nsec: unix.UTIME_OMIT}, {Nsec: unix.UTIME_OMIT}}
		if aok {
			ts[0] = unix.NsecToTimespec(atime.UnixNano())
		}
		if mok {
			ts[1] = unix.NsecToTimespec(mtime.UnixNano())
		}
		if err := unix.UtimesNanoAt(unix.AT_FDCWD, path, ts, follow); err != nil {
			return errno(err)
		}
	}
	var st syscall.Stat_t
	var err error
	if h != nil {
		err = syscall.Fstat(h.fd, &st)
	} else {
		err = syscall.Lstat(path, &st)
	}
	if err != nil {
		return errno(err)
	}
	v.attr(&out.Attr, &st)
	return 0
}

func (n *node) Open(ctx context.Context, flags uint32) (fs.FileHandle, uint32, syscall.Errno) {
	v := n.vol
	if e := v.enter(); e != 0 {
		return nil, 0, e
	}
	defer v.mu.Unlock()
	writable := flags&syscall.O_ACCMODE != syscall.O_RDONLY || flags&syscall.O_TRUNC != 0
	if writable && v.m.faults().readonly {
		return nil, 0, syscall.EROFS
	}
	p, e := n.rel()
	if e != 0 {
		return nil, 0, e
	}
	bflags := unix.O_RDONLY
	if writable {
		// Read-write whatever the process asked: the volatile layer
		// reads the file back and writes it at fsync.
		bflags = unix.O_RDWR
	}
	fd, err := unix.Open(v.abs(p), bflags|unix.O_CLOEXEC|unix.O_NOFOLLOW, 0)
	if err != nil {
		return nil, 0, errno(err)
	}
	var st unix.Stat_t
	if err := unix.Fstat(fd, &st); err != nil {
		unix.Close(fd)
		return nil, 0, errno(err)
	}
	h := &handle{n: n, fd: fd, key: keyOf(st.Dev, st.Ino), writable: writable}
	if flags&syscall.O_TRUNC != 0 {
		s, err := v.state(h.key, fd, p)
		if err != nil {
			unix.Close(fd)
			return nil, 0, errno(err)
		}
		s.setSize(0)
	}
	return h, 0, 0
}

func (n *node) Readdir(ctx context.Context) (fs.DirStream, syscall.Errno) {
	v := n.vol
	if e := v.enter(); e != 0 {
		return nil, e
	}
	defer v.mu.Unlock()
	p, e := n.rel()
	if e != 0 {
		return nil, e
	}
	ds, e := fs.NewLoopbackDirStream(v.abs(p))
	if e != 0 {
		return nil, e
	}
	defer ds.Close()
	var list []fuse.DirEntry
	for ds.HasNext() {
		d, e := ds.Next()
		if e != 0 {
			return nil, e
		}
		if n.IsRoot() && d.Name == trashName {
			continue
		}
		list = append(list, d)
	}
	return fs.NewListDirStream(list), 0
}

func (n *node) Readlink(ctx context.Context) ([]byte, syscall.Errno) {
	v := n.vol
	if e := v.enter(); e != 0 {
		return nil, e
	}
	defer v.mu.Unlock()
	p, e := n.rel()
	if e != 0 {
		return nil, e
	}
	for size := 256; ; size *= 2 {
		buf := make([]byte, size)
		k, err := unix.Readlink(v.abs(p), buf)
		if err != nil {
			return nil, errno(err)
		}
		if k < size {
			return buf[:k], 0
		}
	}
}

func (n *node) Statfs(ctx context.Context, out *fuse.StatfsOut) syscall.Errno {
	v := n.vol
	if e := v.enter(); e != 0 {
		return e
	}
	defer v.mu.Unlock()
	var s syscall.Statfs_t
	if err := syscall.Statfs(v.root, &s); err != nil {
		return errno(err)
	}
	out.FromStatfsT(&s)
	if v.m.faults().full {
		out.Bfree, out.Bavail = 0, 0
	}
	return 0
}

// Fsync makes a file's data or a directory's entries durable (fsync,
// fdatasync and fsync of a directory all come here).
func (n *node) Fsync(ctx context.Context, fh fs.FileHandle, flags uint32) syscall.Errno {
	v := n.vol
	if e := v.enter(); e != 0 {
		return e
	}
	defer v.mu.Unlock()
	f := v.m.faults()
	p, perr := n.rel()
	var key inoKey
	if h, ok := fh.(*handle); ok {
		key = h.key
	} else {
		if perr != 0 {
			return perr
		}
		var st unix.Stat_t
		if err := unix.Lstat(v.abs(p), &st); err != nil {
			return errno(err)
		}
		key = keyOf(st.Dev, st.Ino)
	}
	eio := perr == 0 && f.eioOn(p, true)
	if n.IsDir() {
		switch {
		case eio:
			return syscall.EIO
		case f.readonly && (v.ns.pendingFor(key) || v.m.g.opts.Model == Journal && v.ns.pending() > 0):
			return syscall.EROFS
		}
		v.syncDir(key)
		return 0
	}
	s := v.files[key]
	switch {
	case eio:
		if s != nil {
			s.markLost()
		}
		return syscall.EIO
	case f.readonly && (s != nil && !s.clean() || v.m.g.opts.Model == Journal && v.ns.pending() > 0):
		return syscall.EROFS
	}
	return errno(v.syncFile(key))
}
