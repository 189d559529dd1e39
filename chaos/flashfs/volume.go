package flashfs

import (
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"sync"

	"github.com/hanwen/go-fuse/v2/fs"
	"golang.org/x/sys/unix"
)

// volume is one power-on of a mount: the volatile layer over the backing
// directory between two power cuts. A power cut kills it (every call on
// it fails with EIO from then on) and the mount starts a new one.
type volume struct {
	m         *Mount
	root      string    // the backing directory
	rootInode *fs.Inode // the mount's root

	mu     sync.Mutex
	dead   bool
	files  map[inoKey]*fileState
	ns     nslog
	seq    uint64 // numbers writes, to find the last one
	bootNo int
}

func newVolume(m *Mount, bootNo int) (*volume, error) {
	v := &volume{m: m, root: m.backing, files: map[inoKey]*fileState{}, bootNo: bootNo}
	v.ns = nslog{root: m.backing, trash: filepath.Join(m.backing, trashName), logf: m.g.logf}
	// Entries left aside by a run that died without a power cut or an
	// unmount: their removal stands.
	if err := os.RemoveAll(v.ns.trash); err != nil {
		return nil, err
	}
	if err := os.Mkdir(v.ns.trash, 0o700); err != nil {
		return nil, err
	}
	return v, nil
}

// enter locks the volume for one call; a dead volume answers EIO.
func (v *volume) enter() unix.Errno {
	v.mu.Lock()
	if v.dead {
		v.mu.Unlock()
		return unix.EIO
	}
	return 0
}

func (v *volume) abs(rel string) string { return filepath.Join(v.root, rel) }

// dirKey is the key of the backing directory rel.
func (v *volume) dirKey(rel string) (inoKey, error) {
	var st unix.Stat_t
	if err := unix.Stat(v.abs(rel), &st); err != nil {
		return inoKey{}, err
	}
	return keyOf(st.Dev, st.Ino), nil
}

// logOp records a namespace operation on entries of the directories
// dirs (relative paths) and makes it durable at once when the model
// needs no directory fsync for it.
func (v *volume) logOp(op *nsOp, dirs ...string) {
	for _, d := range dirs {
		k, err := v.dirKey(d)
		if err != nil {
			// The directory is gone from under us; nothing can sync it.
			v.m.g.logf("flashfs: %s: stat %s: %v", op, d, err)
			continue
		}
		if !slices.Contains(op.needs, k) {
			op.needs = append(op.needs, k)
		}
	}
	v.ns.add(op)
}

// state returns the file's volatile layer, making one (with its own
// descriptor, a duplicate of fd, which must be read-write) if needed.
func (v *volume) state(key inoKey, fd int, path string) (*fileState, error) {
	if s := v.files[key]; s != nil {
		return s, nil
	}
	dup, err := unix.FcntlInt(uintptr(fd), unix.F_DUPFD_CLOEXEC, 0)
	if err != nil {
		return nil, err
	}
	s, err := newFileState(dup, path)
	if err != nil {
		unix.Close(dup)
		return nil, err
	}
	v.files[key] = s
	return s, nil
}

// syncFile makes the file's data durable; under the journal model it
// also commits every namespace operation.
func (v *volume) syncFile(key inoKey) error {
	if s := v.files[key]; s != nil {
		if err := s.flush(); err != nil {
			return err
		}
		if s.clean() {
			unix.Close(s.fd)
			delete(v.files, key)
		}
	}
	if v.m.g.opts.Model == Journal {
		v.ns.syncedAll()
	}
	return nil
}

// syncDir makes the directory's entries durable.
func (v *volume) syncDir(key inoKey) {
	if v.m.g.opts.Model == Journal {
		v.ns.syncedAll()
		return
	}
	v.ns.synced(key)
}

// cut is the power cut: the last unsynced write torn if asked, every
// other unsynced byte dropped, every pending namespace operation undone.
// The volume is dead afterwards.
func (v *volume) cut(tear bool, keep int, pick func(n int) int) MountCut {
	r := MountCut{Name: v.m.name}
	v.dead = true
	if tear {
		var last *fileState
		for _, s := range v.files {
			if s.last != nil && (last == nil || s.last.seq > last.last.seq) {
				last = s
			}
		}
		if last != nil {
			w := last.last
			k := keep
			if k < 0 {
				k = pick(len(w.data))
			}
			k = min(k, len(w.data))
			t := &Tear{Path: last.path, Off: w.off, Len: len(w.data), Kept: k}
			if err := pwriteFull(last.fd, w.data[:k], w.off); err != nil {
				r.Problems = append(r.Problems, fmt.Sprintf("tear %s: %v", last.path, err))
			} else {
				r.Torn = t
				r.BytesDropped -= int64(k) // they reached the flash
			}
		}
	}
	keys := make([]inoKey, 0, len(v.files))
	for k := range v.files {
		keys = append(keys, k)
	}
	sort.Slice(keys, func(i, j int) bool { return keys[i].ino < keys[j].ino })
	for _, k := range keys {
		s := v.files[k]
		if b := s.ov.bytes(); b > 0 || s.size != s.backSize || s.hide != s.backSize {
			r.FilesDropped++
			r.BytesDropped += b
		}
		unix.Close(s.fd)
	}
	v.files = nil
	undone, problems := v.ns.undo()
	r.OpsUndone, r.Problems = undone, append(r.Problems, problems...)
	if err := os.RemoveAll(v.ns.trash); err != nil {
		r.Problems = append(r.Problems, fmt.Sprintf("clear %s: %v", v.ns.trash, err))
	}
	return r
}

// shutdown is a clean unmount: everything becomes durable, as umount(8)
// writes back all dirty data and metadata. The volume is dead afterwards.
func (v *volume) shutdown() error {
	var errs []error
	for k, s := range v.files {
		if err := s.flush(); err != nil {
			errs = append(errs, fmt.Errorf("write back %s: %w", s.path, err))
		}
		unix.Close(s.fd)
		delete(v.files, k)
	}
	v.ns.syncedAll()
	v.dead = true
	if err := os.RemoveAll(v.ns.trash); err != nil {
		errs = append(errs, err)
	}
	if len(errs) > 0 {
		return fmt.Errorf("flashfs: unmount %s: %v", v.m.name, errs)
	}
	return nil
}
