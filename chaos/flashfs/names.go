// The namespace operations: what makes, renames and removes names, each
// logged with its undo until the directories it changed are fsynced.

package flashfs

import (
	"context"
	"errors"
	"io"
	"os"
	"strings"
	"syscall"

	"github.com/hanwen/go-fuse/v2/fs"
	"github.com/hanwen/go-fuse/v2/fuse"
	"golang.org/x/sys/unix"
)

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
