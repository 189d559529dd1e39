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
	"strings"
	"syscall"
	"testing"
)

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
