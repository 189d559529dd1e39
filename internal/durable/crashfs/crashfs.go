// Package crashfs is a file system in memory that knows what a power cut
// keeps, for tests of update sequences in the manner of ALICE (OSDI '14):
// run the sequence once, and after every system call it made list every
// state the disk may be in after a crash at that moment, write each out
// and check what the product's own reader finds there (Explore).
//
// The rules are a POSIX file system's, as Jepsen's lazyfs drops them:
//
//   - a file's data and mode are durable once the file is fsynced; until
//     then a crash leaves the durable content, the current one, or one
//     in between: half of what was written since, or as many zero bytes
//     (the size reached the disk, the data did not);
//   - a name created, linked, renamed or removed in a directory is
//     durable once the directory is fsynced; until then a crash keeps
//     any of those changes, those of one name in the order they were
//     made, and a rename whole or not at all;
//   - what no durable name leads to is lost with the directory above it.
//
// Renames and links are modelled within one directory, which is all
// package durable makes. For tests only: product code writes through
// durable.OS.
package crashfs

import (
	"fmt"
	"io/fs"
	"maps"
	"os"
	"path"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/grapnel-io/grapnel/internal/durable"
)

// maxCrashes bounds the states listed for one cut, so that a sequence
// too large for exhaustive listing fails loudly instead of running for
// hours.
const maxCrashes = 1 << 14

// FS is the model. Seed it, hand it to the sequence through
// durable.On, and list the crashes of each cut with Explore.
type FS struct {
	nodes  []*node // by inode number; 0 is the root directory
	calls  int
	failAt int // the call that fails with EIO; 0 for none
	seq    int // numbers the temporary files
	cuts   []cut
}

// node is a file or a directory, with what is durable of it beside what
// is current.
type node struct {
	dir bool
	// A file's content and mode, and what the last fsync made durable.
	data, synced     []byte
	mode, syncedMode fs.FileMode
	// A directory's names, those the last fsync made durable, and the
	// changes since then, in order.
	entries, syncedEntries map[string]int
	pending                []dirOp
}

// dirOp is one change to a directory's names.
type dirOp struct {
	kind string // create, mkdir, link, rename, remove
	name string // the name made, replaced or removed
	from string // rename: the old name; link: the name linked from
	node int
}

// names are the names whose order the change must keep.
func (o dirOp) names() []string {
	if o.from != "" {
		return []string{o.name, o.from}
	}
	return []string{o.name}
}

func (o dirOp) apply(m map[string]int) {
	switch o.kind {
	case "remove":
		delete(m, o.name)
	case "rename":
		delete(m, o.from)
		m[o.name] = o.node
	default:
		m[o.name] = o.node
	}
}

func (o dirOp) String() string {
	if o.from != "" {
		return o.kind + " " + o.from + "→" + o.name
	}
	return o.kind + " " + o.name
}

// cut is the model after one system call.
type cut struct {
	call  int
	last  string
	nodes []*node
}

// New returns a model holding only an empty, durable root directory.
func New() *FS {
	m := &FS{}
	m.nodes = []*node{{dir: true, mode: 0o700, syncedMode: 0o700, entries: map[string]int{}, syncedEntries: map[string]int{}}}
	return m
}

// Seed makes the file p with data and mode, durable, and its missing
// parent directories; it counts as no system call of the sequence.
func (m *FS) Seed(p string, data []byte, mode fs.FileMode) {
	dir := m.seedDir(path.Dir(p))
	n := m.add(&node{data: clone(data), synced: clone(data), mode: mode, syncedMode: mode})
	m.nodes[dir].entries[path.Base(p)] = n
	m.nodes[dir].syncedEntries[path.Base(p)] = n
}

// SeedDir makes the directory p and its missing parents, durable.
func (m *FS) SeedDir(p string) { m.seedDir(p) }

func (m *FS) seedDir(p string) int {
	cur := 0
	for _, part := range split(p) {
		n, ok := m.nodes[cur].entries[part]
		if !ok {
			n = m.add(&node{dir: true, mode: 0o700, syncedMode: 0o700, entries: map[string]int{}, syncedEntries: map[string]int{}})
			m.nodes[cur].entries[part] = n
			m.nodes[cur].syncedEntries[part] = n
		}
		cur = n
	}
	return cur
}

func (m *FS) add(n *node) int {
	m.nodes = append(m.nodes, n)
	return len(m.nodes) - 1
}

func split(p string) []string {
	p = path.Clean(p)
	if p == "/" {
		return nil
	}
	return strings.Split(strings.TrimPrefix(p, "/"), "/")
}

// lookup finds p by the current names: its parent directory, its base
// name, and its node (-1 when absent).
func (m *FS) lookup(p string) (parent int, name string, n int, err error) {
	if !path.IsAbs(p) {
		return 0, "", 0, fmt.Errorf("crashfs: %q is not an absolute path", p)
	}
	parts := split(p)
	if len(parts) == 0 {
		return 0, "", 0, nil
	}
	cur := 0
	for _, part := range parts[:len(parts)-1] {
		next, ok := m.nodes[cur].entries[part]
		if !ok {
			return 0, "", 0, syscall.ENOENT
		}
		if !m.nodes[next].dir {
			return 0, "", 0, syscall.ENOTDIR
		}
		cur = next
	}
	name = parts[len(parts)-1]
	if next, ok := m.nodes[cur].entries[name]; ok {
		return cur, name, next, nil
	}
	return cur, name, -1, nil
}

// do counts one system call: it fails it with EIO when it is the one
// chosen, else runs it, and keeps the model as it stands after it.
func (m *FS) do(desc string, call func() error) error {
	m.calls++
	var err error
	if m.calls == m.failAt {
		err = syscall.EIO
	} else {
		err = call()
	}
	if err != nil {
		desc += " (failed: " + err.Error() + ")"
	}
	m.cuts = append(m.cuts, cut{call: m.calls, last: desc, nodes: m.copyNodes()})
	return err
}

func (m *FS) copyNodes() []*node {
	out := make([]*node, len(m.nodes))
	for i, n := range m.nodes {
		c := *n
		c.data, c.synced = clone(n.data), clone(n.synced)
		c.entries, c.syncedEntries = maps.Clone(n.entries), maps.Clone(n.syncedEntries)
		c.pending = slices.Clone(n.pending)
		out[i] = &c
	}
	return out
}

func clone(b []byte) []byte {
	if b == nil {
		return nil
	}
	return append([]byte{}, b...)
}

var _ durable.FS = (*FS)(nil)

// CreateTemp implements durable.FS.
func (m *FS) CreateTemp(dir, pattern string) (durable.File, error) {
	m.seq++
	name := pattern + strconv.Itoa(m.seq)
	if i := strings.LastIndex(pattern, "*"); i >= 0 {
		name = pattern[:i] + strconv.Itoa(m.seq) + pattern[i+1:]
	}
	p := path.Join(dir, name)
	var f *file
	err := m.do("create "+p, func() error {
		parent, base, n, err := m.lookup(p)
		switch {
		case err != nil:
			return &fs.PathError{Op: "open", Path: p, Err: err}
		case n >= 0:
			return &fs.PathError{Op: "open", Path: p, Err: syscall.EEXIST}
		}
		n = m.add(&node{mode: 0o600})
		m.link(parent, dirOp{kind: "create", name: base, node: n})
		f = &file{m: m, node: n, name: p}
		return nil
	})
	if err != nil {
		return nil, err
	}
	return f, nil
}

// CreateExclusive creates the file p, mode perm, failing when it exists:
// open(2) with O_CREAT|O_EXCL, for sequences written without package
// durable.
func (m *FS) CreateExclusive(p string, perm fs.FileMode) (durable.File, error) {
	var f *file
	err := m.do("create "+p+" (exclusive)", func() error {
		parent, base, n, err := m.lookup(p)
		switch {
		case err != nil:
			return &fs.PathError{Op: "open", Path: p, Err: err}
		case n >= 0:
			return &fs.PathError{Op: "open", Path: p, Err: syscall.EEXIST}
		}
		n = m.add(&node{mode: perm})
		m.link(parent, dirOp{kind: "create", name: base, node: n})
		f = &file{m: m, node: n, name: p}
		return nil
	})
	if err != nil {
		return nil, err
	}
	return f, nil
}

// link makes the change o in the directory parent.
func (m *FS) link(parent int, o dirOp) {
	d := m.nodes[parent]
	o.apply(d.entries)
	d.pending = append(d.pending, o)
}

// sameDir refuses what the model does not cover.
func sameDir(a, b string) error {
	if path.Dir(path.Clean(a)) != path.Dir(path.Clean(b)) {
		return fmt.Errorf("crashfs: %s and %s are in different directories, which the model does not cover", a, b)
	}
	return nil
}

// Rename implements durable.FS.
func (m *FS) Rename(oldpath, newpath string) error {
	return m.do("rename "+oldpath+" "+newpath, func() error {
		if err := sameDir(oldpath, newpath); err != nil {
			return err
		}
		parent, from, n, err := m.lookup(oldpath)
		if err == nil && n < 0 {
			err = syscall.ENOENT
		}
		if err != nil {
			return &os.LinkError{Op: "rename", Old: oldpath, New: newpath, Err: err}
		}
		_, to, old, _ := m.lookup(newpath)
		if old >= 0 && m.nodes[old].dir {
			return &os.LinkError{Op: "rename", Old: oldpath, New: newpath, Err: syscall.EISDIR}
		}
		m.link(parent, dirOp{kind: "rename", name: to, from: from, node: n})
		return nil
	})
}

// Link implements durable.FS.
func (m *FS) Link(oldname, newname string) error {
	return m.do("link "+oldname+" "+newname, func() error {
		if err := sameDir(oldname, newname); err != nil {
			return err
		}
		parent, from, n, err := m.lookup(oldname)
		if err == nil && n < 0 {
			err = syscall.ENOENT
		}
		if err != nil {
			return &os.LinkError{Op: "link", Old: oldname, New: newname, Err: err}
		}
		if _, _, exist, _ := m.lookup(newname); exist >= 0 {
			return &os.LinkError{Op: "link", Old: oldname, New: newname, Err: syscall.EEXIST}
		}
		m.link(parent, dirOp{kind: "link", name: path.Base(newname), from: from, node: n})
		return nil
	})
}

// Remove implements durable.FS.
func (m *FS) Remove(p string) error {
	return m.do("remove "+p, func() error {
		parent, name, n, err := m.lookup(p)
		if err == nil && n < 0 {
			err = syscall.ENOENT
		}
		if err == nil && m.nodes[n].dir && len(m.nodes[n].entries) > 0 {
			err = syscall.ENOTEMPTY
		}
		if err != nil {
			return &fs.PathError{Op: "remove", Path: p, Err: err}
		}
		m.link(parent, dirOp{kind: "remove", name: name, node: n})
		return nil
	})
}

// Mkdir implements durable.FS.
func (m *FS) Mkdir(p string, perm fs.FileMode) error {
	return m.do("mkdir "+p, func() error {
		parent, name, n, err := m.lookup(p)
		if err == nil && n >= 0 {
			err = syscall.EEXIST
		}
		if err != nil {
			return &fs.PathError{Op: "mkdir", Path: p, Err: err}
		}
		n = m.add(&node{dir: true, mode: perm, syncedMode: perm, entries: map[string]int{}, syncedEntries: map[string]int{}})
		m.link(parent, dirOp{kind: "mkdir", name: name, node: n})
		return nil
	})
}

// Stat implements durable.FS; it reads, so it is no cut.
func (m *FS) Stat(p string) (fs.FileInfo, error) {
	_, name, n, err := m.lookup(p)
	if err == nil && n < 0 {
		err = syscall.ENOENT
	}
	if err != nil {
		return nil, &fs.PathError{Op: "stat", Path: p, Err: err}
	}
	nd := m.nodes[n]
	mode := nd.mode
	if nd.dir {
		mode |= fs.ModeDir
	}
	return info{name: name, size: int64(len(nd.data)), mode: mode}, nil
}

// SyncDir implements durable.FS.
func (m *FS) SyncDir(dir string) error {
	return m.do("fsync "+dir+"/", func() error {
		_, _, n, err := m.lookup(dir)
		if err == nil && (n < 0 || !m.nodes[n].dir) {
			err = syscall.ENOTDIR
		}
		if err != nil {
			return &fs.PathError{Op: "sync", Path: dir, Err: err}
		}
		d := m.nodes[n]
		d.syncedEntries = maps.Clone(d.entries)
		d.pending = nil
		return nil
	})
}

// file is an open file of the model.
type file struct {
	m      *FS
	node   int
	name   string
	closed bool
}

func (f *file) Name() string { return f.name }

func (f *file) check(op string) error {
	if f.closed {
		return &fs.PathError{Op: op, Path: f.name, Err: fs.ErrClosed}
	}
	return nil
}

func (f *file) Write(p []byte) (int, error) {
	err := f.m.do(fmt.Sprintf("write %s (%d bytes)", f.name, len(p)), func() error {
		if err := f.check("write"); err != nil {
			return err
		}
		n := f.m.nodes[f.node]
		n.data = append(n.data, p...)
		return nil
	})
	if err != nil {
		return 0, &fs.PathError{Op: "write", Path: f.name, Err: err}
	}
	return len(p), nil
}

func (f *file) Chmod(mode fs.FileMode) error {
	return f.m.do(fmt.Sprintf("chmod %s %#o", f.name, mode), func() error {
		if err := f.check("chmod"); err != nil {
			return err
		}
		f.m.nodes[f.node].mode = mode
		return nil
	})
}

func (f *file) Sync() error {
	return f.m.do("fsync "+f.name, func() error {
		if err := f.check("sync"); err != nil {
			return err
		}
		n := f.m.nodes[f.node]
		n.synced, n.syncedMode = clone(n.data), n.mode
		if n.synced == nil {
			n.synced = []byte{}
		}
		return nil
	})
}

func (f *file) Close() error {
	return f.m.do("close "+f.name, func() error {
		if err := f.check("close"); err != nil {
			return err
		}
		f.closed = true
		return nil
	})
}

type info struct {
	name string
	size int64
	mode fs.FileMode
}

func (i info) Name() string       { return i.name }
func (i info) Size() int64        { return i.size }
func (i info) Mode() fs.FileMode  { return i.mode }
func (i info) ModTime() time.Time { return time.Time{} }
func (i info) IsDir() bool        { return i.mode.IsDir() }
func (i info) Sys() any           { return nil }
