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
	"bytes"
	"errors"
	"fmt"
	"io/fs"
	"maps"
	"os"
	"path"
	"path/filepath"
	"slices"
	"sort"
	"strconv"
	"strings"
	"syscall"
	"testing"
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

// entry is a file or directory of a disk after a crash.
type entry struct {
	dir  bool
	data []byte
	mode fs.FileMode
}

// disk is what a crash left: every reachable path, and what was kept.
type disk struct {
	entries map[string]entry
	kept    string
}

func (d disk) key() string {
	paths := slices.Sorted(maps.Keys(d.entries))
	var b strings.Builder
	for _, p := range paths {
		e := d.entries[p]
		fmt.Fprintf(&b, "%s|%v|%o|%x\n", p, e.dir, e.mode, e.data)
	}
	return b.String()
}

// crashes lists every disk a crash at c may leave, each once.
func crashes(nodes []*node) ([]disk, error) {
	// Which changes of each directory may have reached the disk.
	var dirs []int
	for i, n := range nodes {
		if n.dir && len(n.pending) > 0 {
			dirs = append(dirs, i)
		}
	}
	choices := make([][][]bool, len(dirs))
	for i, d := range dirs {
		choices[i] = keptSets(nodes[d].pending)
	}
	var out []disk
	seen := map[string]bool{}
	pick := make([][]bool, len(dirs))
	var walkDirs func(i int) error
	walkDirs = func(i int) error {
		if i < len(dirs) {
			for _, c := range choices[i] {
				pick[i] = c
				if err := walkDirs(i + 1); err != nil {
					return err
				}
			}
			return nil
		}
		return fileStates(nodes, dirs, pick, func(d disk) error {
			if k := d.key(); !seen[k] {
				seen[k] = true
				out = append(out, d)
				if len(out) > maxCrashes {
					return fmt.Errorf("crashfs: more than %d crash states at one cut; shorten the sequence", maxCrashes)
				}
			}
			return nil
		})
	}
	if err := walkDirs(0); err != nil {
		return nil, err
	}
	return out, nil
}

// keptSets lists the subsets of ops a crash may keep: each change only
// with every earlier one of the same name.
func keptSets(ops []dirOp) [][]bool {
	var sets [][]bool
	for mask := 0; mask < 1<<len(ops); mask++ {
		kept := make([]bool, len(ops))
		ok := true
		for i := range ops {
			kept[i] = mask&(1<<i) != 0
			if !kept[i] {
				continue
			}
			for j := 0; j < i && ok; j++ {
				if !kept[j] && shareName(ops[i], ops[j]) {
					ok = false
				}
			}
		}
		if ok {
			sets = append(sets, kept)
		}
	}
	return sets
}

func shareName(a, b dirOp) bool {
	for _, x := range a.names() {
		if slices.Contains(b.names(), x) {
			return true
		}
	}
	return false
}

// fileStates builds the names the crash kept, walks what they reach
// from the root, and yields a disk for every combination of the files'
// possible contents.
func fileStates(nodes []*node, dirs []int, pick [][]bool, yield func(disk) error) error {
	names := make(map[int]map[string]int, len(nodes))
	var kept []string
	for i, n := range nodes {
		if n.dir {
			names[i] = maps.Clone(n.syncedEntries)
		}
	}
	for i, d := range dirs {
		for j, o := range nodes[d].pending {
			if pick[i][j] {
				o.apply(names[d])
				kept = append(kept, o.String())
			}
		}
	}
	// A file linked under two names has one content under both.
	paths := map[int][]string{}
	var files []int
	tree := map[string]entry{}
	var walk func(p string, n int)
	walk = func(p string, n int) {
		nd := nodes[n]
		if !nd.dir {
			if len(paths[n]) == 0 {
				files = append(files, n)
			}
			paths[n] = append(paths[n], p)
			return
		}
		if p != "/" {
			tree[p] = entry{dir: true, mode: nd.syncedMode}
		}
		for _, name := range slices.Sorted(maps.Keys(names[n])) {
			walk(path.Join(p, name), names[n][name])
		}
	}
	walk("/", 0)
	desc := "names kept: none of the unsynced"
	if len(kept) > 0 {
		desc = "names kept: " + strings.Join(kept, ", ")
	}
	var each func(i int, desc string) error
	each = func(i int, desc string) error {
		if i == len(files) {
			return yield(disk{entries: maps.Clone(tree), kept: desc})
		}
		for _, v := range variants(nodes[files[i]]) {
			for _, p := range paths[files[i]] {
				tree[p] = v.entry
			}
			d := desc
			if v.what != "" {
				d += "; " + strings.Join(paths[files[i]], " = ") + ": " + v.what
			}
			if err := each(i+1, d); err != nil {
				return err
			}
		}
		return nil
	}
	return each(0, desc)
}

type variant struct {
	entry
	what string
}

// variants are the contents a crash may leave in a file.
func variants(n *node) []variant {
	if n.synced != nil && bytes.Equal(n.data, n.synced) && n.mode == n.syncedMode {
		return []variant{{entry: entry{data: n.data, mode: n.mode}}}
	}
	durable := variant{entry{data: n.synced, mode: n.syncedMode}, "unsynced data lost"}
	if n.synced == nil {
		durable = variant{entry{data: []byte{}, mode: n.syncedMode}, "never synced: empty"}
		if durable.mode == 0 {
			durable.mode = n.mode
		}
	}
	vs := []variant{durable, {entry{data: n.data, mode: n.mode}, "all written reached the disk"}}
	base := n.synced
	if bytes.HasPrefix(n.data, base) && len(n.data) > len(base) {
		extra := len(n.data) - len(base)
		vs = append(vs,
			variant{entry{data: clone(n.data[:len(base)+extra/2]), mode: n.mode}, "torn: half of the unsynced write"},
			variant{entry{data: append(clone(base), make([]byte, extra)...), mode: n.mode}, "torn: size kept, unsynced data zero"})
	} else if len(n.data) > 1 {
		vs = append(vs, variant{entry{data: clone(n.data[:len(n.data)/2]), mode: n.mode}, "torn: half of the content"})
	}
	return vs
}

// write puts d under root.
func (d disk) write(root string) error {
	paths := slices.Sorted(maps.Keys(d.entries))
	for _, p := range paths {
		e := d.entries[p]
		real := filepath.Join(root, filepath.FromSlash(p))
		if e.dir {
			if err := os.MkdirAll(real, 0o700); err != nil {
				return err
			}
			continue
		}
		if err := os.MkdirAll(filepath.Dir(real), 0o700); err != nil {
			return err
		}
		if err := os.WriteFile(real, e.data, 0o600); err != nil {
			return err
		}
		if err := os.Chmod(real, e.mode.Perm()); err != nil {
			return err
		}
	}
	return nil
}

// Crash is one disk a power cut may leave, written out under Root.
type Crash struct {
	// Root is the real directory that stands for the model's "/".
	Root string
	// After is the number of system calls made before the cut; Last
	// the last of them ("" before the first).
	After int
	Last  string
	// Done says the sequence had returned nil before the cut: what it
	// wrote must be there.
	Done bool
	// Kept says which unsynced changes reached the disk.
	Kept string
}

// Path is where the model's path p is on the real disk.
func (c Crash) Path(p string) string { return filepath.Join(c.Root, filepath.FromSlash(p)) }

func (c Crash) String() string {
	when := "before the first call"
	if c.After > 0 {
		when = fmt.Sprintf("after call %d (%s)", c.After, c.Last)
	}
	if c.Done {
		when += ", once the sequence had returned"
	}
	return "crash " + when + "; " + c.Kept
}

// Violation is a crash whose disk the check refused.
type Violation struct {
	Crash Crash
	Err   error
}

func (v Violation) String() string { return v.Crash.String() + ": " + v.Err.Error() }

// Sequence is an update to check: Seed prepares the model (the old
// content), Run makes the update on it (through durable.On(m), or
// through m's own calls to check a sequence written without package
// durable), Check reads the disk a crash left as the product reads it
// and says what is wrong with it.
type Sequence struct {
	Seed  func(m *FS)
	Run   func(m *FS) error
	Check func(c Crash) error
}

// Explore runs s once, then cuts it before its first system call and
// after each, lists every disk a crash there may leave, writes each
// under a fresh directory in dir and checks it. It returns the crashes
// the check refused; an error says the exploration itself failed (the
// sequence failed on the model, or a disk could not be written).
func Explore(dir string, s Sequence) ([]Violation, error) {
	m := New()
	if s.Seed != nil {
		s.Seed(m)
	}
	start := cut{nodes: m.copyNodes()}
	if err := s.Run(m); err != nil {
		return nil, fmt.Errorf("crashfs: the sequence failed with no fault injected: %w", err)
	}
	cuts := append([]cut{start}, m.cuts...)
	var out []Violation
	for i, c := range cuts {
		vs, err := check(dir, c, i == len(cuts)-1, s.Check)
		if err != nil {
			return out, err
		}
		out = append(out, vs...)
	}
	return out, nil
}

// ExploreFailures runs s once for each system call it makes, failing
// that call with EIO. The sequence must return an error each time, and
// every crash after it (the program stopping there included) must pass
// the check as one before the sequence returned: old content or new.
func ExploreFailures(dir string, s Sequence) ([]Violation, error) {
	clean := New()
	if s.Seed != nil {
		s.Seed(clean)
	}
	if err := s.Run(clean); err != nil {
		return nil, fmt.Errorf("crashfs: the sequence failed with no fault injected: %w", err)
	}
	var out []Violation
	for k := 1; k <= clean.calls; k++ {
		m := New()
		if s.Seed != nil {
			s.Seed(m)
		}
		m.failAt = k
		err := s.Run(m)
		last := m.cuts[len(m.cuts)-1]
		if err == nil {
			out = append(out, Violation{Crash: Crash{After: k, Last: m.cuts[k-1].last},
				Err: errors.New("the failed call was not reported: the sequence returned nil")})
			continue
		}
		if !errors.Is(err, syscall.EIO) {
			out = append(out, Violation{Crash: Crash{After: k, Last: m.cuts[k-1].last},
				Err: fmt.Errorf("the sequence's error does not wrap the failure (EIO): %v", err)})
		}
		vs, cerr := check(dir, last, false, s.Check)
		if cerr != nil {
			return out, cerr
		}
		out = append(out, vs...)
	}
	return out, nil
}

// check writes out and checks every disk a crash at c may leave.
func check(dir string, c cut, done bool, fn func(Crash) error) ([]Violation, error) {
	disks, err := crashes(c.nodes)
	if err != nil {
		return nil, err
	}
	var out []Violation
	for i, d := range disks {
		root := filepath.Join(dir, fmt.Sprintf("cut%d-crash%d", c.call, i))
		if err := d.write(root); err != nil {
			return out, fmt.Errorf("crashfs: writing a crash state: %w", err)
		}
		cr := Crash{Root: root, After: c.call, Last: c.last, Done: done, Kept: d.kept}
		if err := fn(cr); err != nil {
			out = append(out, Violation{Crash: cr, Err: err})
		}
		if err := os.RemoveAll(root); err != nil {
			return out, err
		}
	}
	return out, nil
}

// Report formats violations for a test failure: the first few, and how
// many there were.
func Report(vs []Violation) string {
	sort.SliceStable(vs, func(i, j int) bool { return vs[i].Crash.After < vs[j].Crash.After })
	var b strings.Builder
	fmt.Fprintf(&b, "%d crash states refused", len(vs))
	for i, v := range vs {
		if i == 8 {
			fmt.Fprintf(&b, "\n  … and %d more", len(vs)-i)
			break
		}
		b.WriteString("\n  " + v.String())
	}
	return b.String()
}

// Check explores s with a cut after every call (Explore) and with each
// call failing (ExploreFailures), and fails t with every refused crash.
func Check(t testing.TB, s Sequence) {
	t.Helper()
	for _, run := range []struct {
		name    string
		explore func(string, Sequence) ([]Violation, error)
	}{{"a cut after each call", Explore}, {"each call failing", ExploreFailures}} {
		vs, err := run.explore(t.TempDir(), s)
		if err != nil {
			t.Fatal(err)
		}
		if len(vs) > 0 {
			t.Errorf("%s: %s", run.name, Report(vs))
		}
	}
}
