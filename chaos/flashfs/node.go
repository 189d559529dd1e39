package flashfs

import (
	"context"
	"errors"
	"io"
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

func (n *node) Create(ctx context.Context, name string, flags uint32, mode uint32, out *fuse.EntryOut) (*fs.Inode, fs.FileHandle, uint32, syscall.Errno) {
	v, f, e := n.begin(false)
	if e != 0 {
		return nil, nil, 0, e
	}
	defer v.mu.Unlock()
	p, e := n.childPath(name)
	if e != 0 {
		return nil, nil, 0, e
	}
	abs := v.abs(p)
	if f.full {
		if _, err := os.Lstat(abs); os.IsNotExist(err) {
			return nil, nil, 0, syscall.ENOSPC
		}
	}
	fd, err := unix.Open(abs, unix.O_CREAT|unix.O_EXCL|unix.O_RDWR|unix.O_CLOEXEC, mode&07777)
	created := err == nil
	if err == unix.EEXIST && flags&syscall.O_EXCL == 0 {
		fd, err = unix.Open(abs, unix.O_RDWR|unix.O_CLOEXEC|unix.O_NOFOLLOW, 0)
	}
	if err != nil {
		return nil, nil, 0, errno(err)
	}
	if created {
		_ = unix.Fchmod(fd, mode&07777) // past our own umask
		preserveOwner(ctx, abs)
		v.logOp(&nsOp{kind: opCreate, a: p}, dirOf(p))
	}
	var st syscall.Stat_t
	if err := syscall.Fstat(fd, &st); err != nil {
		unix.Close(fd)
		return nil, nil, 0, errno(err)
	}
	h := &handle{fd: fd, key: keyOf(st.Dev, st.Ino), writable: true}
	if !created && flags&syscall.O_TRUNC != 0 {
		s, err := v.state(h.key, fd, p)
		if err != nil {
			unix.Close(fd)
			return nil, nil, 0, errno(err)
		}
		s.setSize(0)
	}
	child := n.newChild(ctx, &st, birthGen(fd, "", unix.AT_EMPTY_PATH))
	h.n = child.Operations().(*node)
	v.attr(&out.Attr, &st)
	return child, h, 0, 0
}

func dirOf(p string) string {
	if i := strings.LastIndexByte(p, '/'); i >= 0 {
		return p[:i]
	}
	return ""
}

// created finishes a mkdir, mknod, symlink or link: owner, log, inode.
func (n *node) created(ctx context.Context, v *volume, p string, dir, own bool, out *fuse.EntryOut) (*fs.Inode, syscall.Errno) {
	abs := v.abs(p)
	if own {
		preserveOwner(ctx, abs)
	}
	v.logOp(&nsOp{kind: opCreate, a: p, dir: dir}, dirOf(p))
	st, gen, err := lstatGen(abs)
	if err != nil {
		return nil, errno(err)
	}
	v.attr(&out.Attr, &st)
	return n.newChild(ctx, &st, gen), 0
}

func (n *node) Mkdir(ctx context.Context, name string, mode uint32, out *fuse.EntryOut) (*fs.Inode, syscall.Errno) {
	v, _, e := n.begin(true)
	if e != 0 {
		return nil, e
	}
	defer v.mu.Unlock()
	p, e := n.childPath(name)
	if e != 0 {
		return nil, e
	}
	if err := unix.Mkdir(v.abs(p), mode&07777); err != nil {
		return nil, errno(err)
	}
	_ = unix.Chmod(v.abs(p), mode&07777)
	return n.created(ctx, v, p, true, true, out)
}

func (n *node) Mknod(ctx context.Context, name string, mode, rdev uint32, out *fuse.EntryOut) (*fs.Inode, syscall.Errno) {
	v, _, e := n.begin(true)
	if e != 0 {
		return nil, e
	}
	defer v.mu.Unlock()
	p, e := n.childPath(name)
	if e != 0 {
		return nil, e
	}
	if err := unix.Mknod(v.abs(p), mode, int(rdev)); err != nil {
		return nil, errno(err)
	}
	return n.created(ctx, v, p, false, true, out)
}

func (n *node) Symlink(ctx context.Context, target, name string, out *fuse.EntryOut) (*fs.Inode, syscall.Errno) {
	v, _, e := n.begin(true)
	if e != 0 {
		return nil, e
	}
	defer v.mu.Unlock()
	p, e := n.childPath(name)
	if e != 0 {
		return nil, e
	}
	if err := unix.Symlink(target, v.abs(p)); err != nil {
		return nil, errno(err)
	}
	return n.created(ctx, v, p, false, true, out)
}

func (n *node) Link(ctx context.Context, target fs.InodeEmbedder, name string, out *fuse.EntryOut) (*fs.Inode, syscall.Errno) {
	t, ok := target.(*node)
	if !ok || t.vol != n.vol {
		return nil, syscall.EXDEV
	}
	v, _, e := n.begin(true)
	if e != 0 {
		return nil, e
	}
	defer v.mu.Unlock()
	p, e := n.childPath(name)
	if e != 0 {
		return nil, e
	}
	tp, e := t.rel()
	if e != 0 {
		return nil, e
	}
	if err := unix.Link(v.abs(tp), v.abs(p)); err != nil {
		return nil, errno(err)
	}
	return n.created(ctx, v, p, false, false, out)
}

func (n *node) Unlink(ctx context.Context, name string) syscall.Errno {
	return n.remove(name, false)
}

func (n *node) Rmdir(ctx context.Context, name string) syscall.Errno {
	return n.remove(name, true)
}

// remove sets the entry aside in the trash, so that a power cut can put
// it back, and logs it.
func (n *node) remove(name string, dir bool) syscall.Errno {
	v, _, e := n.begin(false)
	if e != 0 {
		return e
	}
	defer v.mu.Unlock()
	p, e := n.childPath(name)
	if e != 0 {
		return syscall.ENOENT
	}
	var st syscall.Stat_t
	if err := syscall.Lstat(v.abs(p), &st); err != nil {
		return errno(err)
	}
	if e := sameKind(dir, st.Mode&syscall.S_IFMT == syscall.S_IFDIR, v.abs(p)); e != 0 {
		return e
	}
	t, err := v.ns.setAside(p)
	if err != nil {
		return errno(err)
	}
	v.logOp(&nsOp{kind: opRemove, a: p, dir: dir, trash: t}, dirOf(p))
	return 0
}

// emptyDir is ENOTEMPTY unless the directory has no entry.
func emptyDir(abs string) syscall.Errno {
	f, err := os.Open(abs)
	if err != nil {
		return errno(err)
	}
	defer f.Close()
	names, err := f.Readdirnames(1)
	if len(names) > 0 {
		return syscall.ENOTEMPTY
	}
	if err != nil && !errors.Is(err, io.EOF) {
		return errno(err)
	}
	return 0
}

func (n *node) Rename(ctx context.Context, name string, newParent fs.InodeEmbedder, newName string, flags uint32) syscall.Errno {
	np, ok := newParent.(*node)
	if !ok || np.vol != n.vol {
		return syscall.EXDEV
	}
	if flags&^uint32(unix.RENAME_NOREPLACE|unix.RENAME_EXCHANGE) != 0 {
		return syscall.EINVAL
	}
	v, _, e := n.begin(false)
	if e != 0 {
		return e
	}
	defer v.mu.Unlock()
	src, e := n.childPath(name)
	if e != 0 {
		return e
	}
	dst, e := np.childPath(newName)
	if e != 0 {
		return e
	}
	var sst, dst2 syscall.Stat_t
	if err := syscall.Lstat(v.abs(src), &sst); err != nil {
		return errno(err)
	}
	if flags&unix.RENAME_EXCHANGE != 0 {
		if err := unix.Renameat2(unix.AT_FDCWD, v.abs(src), unix.AT_FDCWD, v.abs(dst), unix.RENAME_EXCHANGE); err != nil {
			return errno(err)
		}
		v.logOp(&nsOp{kind: opExchange, a: src, b: dst}, dirOf(src), dirOf(dst))
		return 0
	}
	err := syscall.Lstat(v.abs(dst), &dst2)
	if err != nil && err != syscall.ENOENT {
		return errno(err)
	}
	trash := ""
	if err == nil {
		if flags&unix.RENAME_NOREPLACE != 0 {
			return syscall.EEXIST
		}
		if sst.Dev == dst2.Dev && sst.Ino == dst2.Ino {
			return 0 // two names of one file: rename(2) does nothing
		}
		if e := sameKind(sst.Mode&syscall.S_IFMT == syscall.S_IFDIR, dst2.Mode&syscall.S_IFMT == syscall.S_IFDIR, v.abs(dst)); e != 0 {
			return e
		}
		if trash, err = v.ns.setAside(dst); err != nil {
			return errno(err)
		}
	}
	if err := renameNoReplace(v.abs(src), v.abs(dst)); err != nil {
		if trash != "" {
			_ = renameNoReplace(trash, v.abs(dst))
		}
		return errno(err)
	}
	v.logOp(&nsOp{kind: opRename, a: src, b: dst, trash: trash}, dirOf(src), dirOf(dst))
	return 0
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

// sameKind is what unlink, rmdir and rename(2) answer when a name of the
// kind isDir (at abs) is to go where one of the kind wantDir is asked:
// ENOTDIR or EISDIR when they differ, ENOTEMPTY for a directory that is
// not empty, 0 when it may go.
func sameKind(wantDir, isDir bool, abs string) syscall.Errno {
	switch {
	case wantDir && !isDir:
		return syscall.ENOTDIR
	case !wantDir && isDir:
		return syscall.EISDIR
	case isDir:
		return emptyDir(abs)
	}
	return 0
}
