package flashfs

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"path"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/hanwen/go-fuse/v2/fs"
	"github.com/hanwen/go-fuse/v2/fuse"
)

// Model is the rule that makes namespace operations durable.
type Model int

const (
	// PerDirectory is the model of ALICE and lazyfs: a create, link,
	// mkdir, unlink, rmdir or rename is durable once each directory
	// whose entries it changed has been fsynced after it. The strict
	// reading of POSIX; the default.
	PerDirectory Model = iota
	// Journal is ext4's ordered journal: an fsync of any file or
	// directory commits every namespace operation made before it.
	Journal
)

func (m Model) String() string {
	if m == Journal {
		return "journal"
	}
	return "per-directory"
}

// ParseModel reads "per-directory" (or "dir") and "journal".
func ParseModel(s string) (Model, error) {
	switch s {
	case "per-directory", "dir", "":
		return PerDirectory, nil
	case "journal":
		return Journal, nil
	}
	return 0, fmt.Errorf("model %q: want per-directory or journal", s)
}

// Options are a group's settings.
type Options struct {
	Model Model
	// Seed draws the random tears and flips: the same seed, the same
	// choices.
	Seed uint64
	// Logf receives what the file system cannot return as an error
	// (a set-aside entry it could not drop, say). Nil discards it.
	Logf func(format string, args ...any)
}

// Group is a set of mounts that lose power together: the flash of every
// compute unit of a vehicle.
type Group struct {
	opts Options

	mu     sync.Mutex
	mounts []*Mount
	rng    *rand.Rand
}

// NewGroup returns an empty group.
func NewGroup(opts Options) *Group {
	return &Group{opts: opts, rng: rand.New(rand.NewPCG(opts.Seed, opts.Seed^0x9e3779b97f4a7c15))}
}

func (g *Group) logf(format string, args ...any) {
	if g.opts.Logf != nil {
		g.opts.Logf(format, args...)
	}
}

// Mount is one backing directory served at a mount point.
type Mount struct {
	g                         *Group
	name, backing, mountpoint string
	fault                     atomic.Pointer[faults]

	mu     sync.Mutex // guards vol, server and boots
	vol    *volume
	server *fuse.Server
	boots  int
}

// faults are a mount's injected faults; a value is never changed, only
// replaced.
type faults struct {
	full, readonly bool
	eio            []EIORule
}

// EIORule makes calls on the files whose path (relative to the mount
// root) matches Glob (path.Match syntax: * does not cross a /) fail with
// EIO.
type EIORule struct {
	Glob  string
	Read  bool // read(2) fails
	Fsync bool // fsync(2) and fdatasync(2) fail, and lose the unsynced data
}

func (f *faults) eioOn(p string, fsync bool) bool {
	for _, r := range f.eio {
		if (fsync && r.Fsync || !fsync && r.Read) && matches(r.Glob, p) {
			return true
		}
	}
	return false
}

func matches(glob, p string) bool {
	ok, _ := path.Match(glob, p)
	return ok
}

func (m *Mount) faults() *faults { return m.fault.Load() }

// Mount serves the backing directory at mountpoint, as a new member of
// the group. name identifies it in commands and reports. The backing
// directory must exist; the mount point is made if missing (and a stale
// FUSE mount left there by a killed run is detached first).
func (g *Group) Mount(name, backing, mountpoint string) (*Mount, error) {
	if name == "" || strings.ContainsAny(name, " \t\n,") || name == "all" {
		return nil, fmt.Errorf("flashfs: mount name %q: want a word other than \"all\"", name)
	}
	b, err := filepath.Abs(backing)
	if err != nil {
		return nil, err
	}
	mp, err := filepath.Abs(mountpoint)
	if err != nil {
		return nil, err
	}
	if st, err := os.Stat(b); err != nil || !st.IsDir() {
		return nil, fmt.Errorf("flashfs: backing directory %s: not a directory (%v)", b, err)
	}
	if mp == b || strings.HasPrefix(mp, b+"/") || strings.HasPrefix(b, mp+"/") {
		return nil, fmt.Errorf("flashfs: mount point %s and backing directory %s must not contain each other", mp, b)
	}
	if _, err := os.Stat(mp); errors.Is(err, syscall.ENOTCONN) {
		_ = syscall.Unmount(mp, syscall.MNT_DETACH)
	}
	if err := os.MkdirAll(mp, 0o755); err != nil {
		return nil, err
	}
	m := &Mount{g: g, name: name, backing: b, mountpoint: mp}
	m.fault.Store(&faults{})
	g.mu.Lock()
	defer g.mu.Unlock()
	for _, o := range g.mounts {
		if o.name == name {
			return nil, fmt.Errorf("flashfs: a mount named %q exists", name)
		}
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	if err := m.boot(); err != nil {
		return nil, err
	}
	g.mounts = append(g.mounts, m)
	return m, nil
}

// boot mounts a fresh volume. m.mu is held.
func (m *Mount) boot() error {
	m.boots++
	v, err := newVolume(m, m.boots)
	if err != nil {
		return err
	}
	root := &node{vol: v}
	v.rootInode = &root.Inode
	// Names and attributes may be cached: only the kernel changes them
	// between power cuts, and a power cut remounts.
	sec := time.Second
	server, err := fs.Mount(m.mountpoint, root, &fs.Options{
		EntryTimeout: &sec,
		AttrTimeout:  &sec,
		MountOptions: fuse.MountOptions{
			AllowOther:    os.Getuid() == 0, // workloads run under their own users
			DirectMount:   true,
			FsName:        "flashfs:" + m.name,
			Name:          "flashfs",
			Options:       []string{"default_permissions"},
			DisableXAttrs: true,
			MaxWrite:      1 << 20,
		},
	})
	if err != nil {
		return fmt.Errorf("flashfs: mount %s on %s: %w", m.backing, m.mountpoint, err)
	}
	m.vol, m.server = v, server
	return nil
}

// unmount takes the FUSE mount away; processes that still hold a file
// keep a detached mount that answers EIO. m.mu is held.
func (m *Mount) unmount() error {
	if m.server == nil {
		return nil
	}
	srv := m.server
	m.server = nil
	err := syscall.Unmount(m.mountpoint, 0)
	if err == syscall.EBUSY {
		err = syscall.Unmount(m.mountpoint, syscall.MNT_DETACH)
		go srv.Wait() // ends when the last holder closes
		return err
	}
	if err != nil {
		return fmt.Errorf("flashfs: unmount %s: %w", m.mountpoint, err)
	}
	srv.Wait()
	return nil
}

// Name, Backing and Mountpoint describe the mount.
func (m *Mount) Name() string       { return m.name }
func (m *Mount) Backing() string    { return m.backing }
func (m *Mount) Mountpoint() string { return m.mountpoint }

// Mounts returns the group's mounts in the order they were made.
func (g *Group) Mounts() []*Mount {
	g.mu.Lock()
	defer g.mu.Unlock()
	return slices.Clone(g.mounts)
}

// Get returns the mount named name, or nil.
func (g *Group) Get(name string) *Mount {
	g.mu.Lock()
	defer g.mu.Unlock()
	for _, m := range g.mounts {
		if m.name == name {
			return m
		}
	}
	return nil
}

func (m *Mount) setFaults(change func(f *faults)) {
	for {
		old := m.fault.Load()
		f := *old
		f.eio = slices.Clone(old.eio)
		change(&f)
		if m.fault.CompareAndSwap(old, &f) {
			return
		}
	}
}

// SetFull makes every write, fallocate and new entry fail with ENOSPC
// (and statfs report no free block) while on.
func (m *Mount) SetFull(on bool) { m.setFaults(func(f *faults) { f.full = on }) }

// SetReadOnly makes every call that would change the file system fail
// with EROFS while on, as ext4 does once it remounts read-only after an
// error: writes, opens for writing, new entries, removals, renames,
// attribute changes, fallocate, and an fsync that has data or entries to
// write.
func (m *Mount) SetReadOnly(on bool) { m.setFaults(func(f *faults) { f.readonly = on }) }

// AddEIO adds an EIO rule. A read rule drops the kernel's cached pages
// of the matching files, so that reads reach the file system and fail.
func (m *Mount) AddEIO(r EIORule) error {
	if _, err := path.Match(r.Glob, ""); err != nil || r.Glob == "" {
		return fmt.Errorf("flashfs: eio glob %q: not a pattern (path.Match syntax)", r.Glob)
	}
	if !r.Read && !r.Fsync {
		return fmt.Errorf("flashfs: eio rule %q: fails neither reads nor fsyncs", r.Glob)
	}
	m.setFaults(func(f *faults) { f.eio = append(f.eio, r) })
	if r.Read {
		m.invalidate(func(p string) bool { return matches(r.Glob, p) })
	}
	return nil
}

// Heal clears the mount's faults: writes, renames, fsyncs and reads work
// again. Data an fsync lost stays lost.
func (m *Mount) Heal() { m.fault.Store(&faults{}) }

// invalidate drops the kernel's cached pages of the loaded files whose
// path matches. Called without the volume's lock: the kernel may wait on
// a read in flight.
func (m *Mount) invalidate(match func(string) bool) {
	m.mu.Lock()
	v := m.vol
	m.mu.Unlock()
	if v == nil {
		return
	}
	var walk func(n *fs.Inode, p string)
	walk = func(n *fs.Inode, p string) {
		for name, c := range n.Children() {
			cp := join(p, name)
			if c.IsDir() {
				walk(c, cp)
			} else if match(cp) {
				c.NotifyContent(0, 0)
			}
		}
	}
	walk(v.rootInode, "")
}

// Flip flips the bits at the given bit offsets (byte*8 + bit, bit 0 the
// least significant) of the durable copy of the file at p (relative to
// the mount root): flash that decayed at rest. Unsynced bytes over them,
// if any, still read as written.
func (m *Mount) Flip(p string, bits []int64) error {
	if len(bits) == 0 {
		return fmt.Errorf("flashfs: flip %s: no bit offsets", p)
	}
	m.mu.Lock()
	v := m.vol
	m.mu.Unlock()
	rel, err := cleanRel(p)
	if err != nil {
		return err
	}
	if e := v.enter(); e != 0 {
		return fmt.Errorf("flashfs: flip %s: the mount is down", p)
	}
	err = flipBits(v.abs(rel), bits)
	v.mu.Unlock()
	if err != nil {
		return fmt.Errorf("flashfs: flip %s: %w", p, err)
	}
	m.invalidate(func(q string) bool { return q == rel })
	return nil
}

// FlipRandom flips n distinct random bits of the durable copy of the file
// at p and returns their offsets, sorted.
func (m *Mount) FlipRandom(p string, n int) ([]int64, error) {
	rel, err := cleanRel(p)
	if err != nil {
		return nil, err
	}
	st, err := os.Lstat(filepath.Join(m.backing, rel))
	if err != nil {
		return nil, fmt.Errorf("flashfs: flip %s: %w", p, err)
	}
	total := st.Size() * 8
	if n <= 0 || int64(n) > total {
		return nil, fmt.Errorf("flashfs: flip %s: %d random bits of a file of %d bytes", p, n, st.Size())
	}
	m.g.mu.Lock()
	seen := map[int64]bool{}
	for len(seen) < n {
		seen[m.g.rng.Int64N(total)] = true
	}
	m.g.mu.Unlock()
	bits := make([]int64, 0, n)
	for b := range seen {
		bits = append(bits, b)
	}
	slices.Sort(bits)
	return bits, m.Flip(p, bits)
}

func cleanRel(p string) (string, error) {
	c := path.Clean(strings.TrimPrefix(p, "/"))
	if c == "." || c == ".." || strings.HasPrefix(c, "../") || c == trashName || strings.HasPrefix(c, trashName+"/") {
		return "", fmt.Errorf("flashfs: path %q: want a file below the mount root", p)
	}
	return c, nil
}

func flipBits(abs string, bits []int64) error {
	f, err := os.OpenFile(abs, os.O_RDWR, 0)
	if err != nil {
		return err
	}
	defer f.Close()
	st, err := f.Stat()
	if err != nil {
		return err
	}
	if !st.Mode().IsRegular() {
		return fmt.Errorf("not a regular file")
	}
	for _, b := range bits {
		if b < 0 || b/8 >= st.Size() {
			return fmt.Errorf("bit %d: past the end of the durable file (%d bytes)", b, st.Size())
		}
	}
	for _, b := range bits {
		var one [1]byte
		if _, err := f.ReadAt(one[:], b/8); err != nil {
			return err
		}
		one[0] ^= 1 << (b % 8)
		if _, err := f.WriteAt(one[:], b/8); err != nil {
			return err
		}
	}
	return nil
}

// PowerCutOptions shape a power cut.
type PowerCutOptions struct {
	// Mounts are the names of the mounts that lose power; none means
	// every mount of the group.
	Mounts []string
	// Tear tears each mount's last unsynced write: its first TearKeep
	// bytes reach the flash, the rest do not. TearKeep < 0 draws the
	// kept length at random, shorter than the write.
	Tear     bool
	TearKeep int
}

// PowerCutReport says what each mount lost.
type PowerCutReport struct{ Mounts []MountCut }

// MountCut is what one mount lost in a power cut.
type MountCut struct {
	Name         string
	FilesDropped int   // files whose unsynced data or size was dropped
	BytesDropped int64 // unsynced bytes dropped
	OpsUndone    int   // namespace operations undone
	Torn         *Tear
	// Problems are undo steps that could not be done (see the package
	// documentation); empty in a correct run.
	Problems []string
}

// Tear is the torn last write: Kept of its Len bytes at Off reached the
// flash. Path is the file's path at its first unsynced change.
type Tear struct {
	Path      string
	Off       int64
	Len, Kept int
}

func (c MountCut) String() string {
	s := fmt.Sprintf("%s: dropped %d bytes in %d files, undid %d namespace operations", c.Name, c.BytesDropped, c.FilesDropped, c.OpsUndone)
	if c.Torn != nil {
		s += fmt.Sprintf(", tore the write of %d bytes at %d in %s keeping %d", c.Torn.Len, c.Torn.Off, c.Torn.Path, c.Torn.Kept)
	}
	for _, p := range c.Problems {
		s += "; " + p
	}
	return s
}

func (r PowerCutReport) String() string {
	var parts []string
	for _, c := range r.Mounts {
		parts = append(parts, c.String())
	}
	return strings.Join(parts, "; ")
}

// PowerCut cuts the power of the chosen mounts at one instant: from then
// on every call on them fails with EIO. Each then loses its volatile
// layer (unsynced data, pending truncates, namespace operations not made
// durable), so that the backing directory holds only what was durable,
// and is mounted again, fresh, as after a reboot. Kill the processes
// using the mounts first (a power cut kills them too); a process that
// still holds a file keeps a detached mount that answers EIO.
func (g *Group) PowerCut(o PowerCutOptions) (PowerCutReport, error) {
	g.mu.Lock()
	var ms []*Mount
	for _, m := range g.mounts {
		if len(o.Mounts) == 0 || slices.Contains(o.Mounts, m.name) {
			ms = append(ms, m)
		}
	}
	g.mu.Unlock()
	if len(ms) == 0 {
		return PowerCutReport{}, fmt.Errorf("flashfs: power cut: no mount named %v", o.Mounts)
	}
	for _, m := range ms {
		m.mu.Lock()
		defer m.mu.Unlock()
	}
	// The instant of the cut: every volume dies before any is changed.
	for _, m := range ms {
		m.vol.mu.Lock()
		m.vol.dead = true
	}
	var rep PowerCutReport
	pick := func(n int) int {
		if n < 2 {
			return 0
		}
		g.mu.Lock()
		defer g.mu.Unlock()
		return 1 + g.rng.IntN(n-1)
	}
	for _, m := range ms {
		rep.Mounts = append(rep.Mounts, m.vol.cut(o.Tear, o.TearKeep, pick))
		m.vol.mu.Unlock()
	}
	var errs []error
	for _, m := range ms {
		if err := m.unmount(); err != nil {
			errs = append(errs, err)
			continue
		}
		if err := m.boot(); err != nil {
			errs = append(errs, err)
		}
	}
	for _, c := range rep.Mounts {
		for _, p := range c.Problems {
			g.logf("flashfs: power cut %s: %s", c.Name, p)
		}
	}
	return rep, errors.Join(errs...)
}

// Heal clears the faults of every mount.
func (g *Group) Heal() {
	for _, m := range g.Mounts() {
		m.Heal()
	}
}

// Unmount is a clean shutdown: every unsynced byte and namespace
// operation becomes durable first, as umount(8) writes everything back.
// The mount leaves the group.
func (m *Mount) Unmount() error {
	m.mu.Lock()
	defer m.mu.Unlock()
	var errs []error
	if v := m.vol; v != nil {
		v.mu.Lock()
		if !v.dead {
			errs = append(errs, v.shutdown())
		}
		v.mu.Unlock()
	}
	errs = append(errs, m.unmount())
	m.g.mu.Lock()
	m.g.mounts = slices.DeleteFunc(m.g.mounts, func(o *Mount) bool { return o == m })
	m.g.mu.Unlock()
	return errors.Join(errs...)
}

// Close unmounts every mount of the group cleanly.
func (g *Group) Close() error {
	var errs []error
	for _, m := range g.Mounts() {
		errs = append(errs, m.Unmount())
	}
	return errors.Join(errs...)
}

// Status is a mount's volatile layer and faults at one moment.
type Status struct {
	Name, Backing, Mountpoint string
	Boots                     int // mounts so far: 1 + power cuts
	PendingFiles              int
	PendingBytes              int64
	PendingOps                int
	// Pending lists the pending namespace operations, oldest first (at
	// most 50).
	Pending        []string
	Full, ReadOnly bool
	EIO            []EIORule
}

func (s Status) String() string {
	out := fmt.Sprintf("%s: %s on %s, boot %d, pending %d bytes in %d files and %d namespace operations",
		s.Name, s.Backing, s.Mountpoint, s.Boots, s.PendingBytes, s.PendingFiles, s.PendingOps)
	if len(s.Pending) > 0 {
		out += " (" + strings.Join(s.Pending, ", ") + ")"
	}
	if s.Full {
		out += ", full"
	}
	if s.ReadOnly {
		out += ", read-only"
	}
	for _, r := range s.EIO {
		var on []string
		if r.Read {
			on = append(on, "read")
		}
		if r.Fsync {
			on = append(on, "fsync")
		}
		out += fmt.Sprintf(", eio on %s of %s", strings.Join(on, "+"), r.Glob)
	}
	return out
}

// Status reports the mount's state.
func (m *Mount) Status() Status {
	f := m.faults()
	s := Status{Name: m.name, Backing: m.backing, Mountpoint: m.mountpoint, Full: f.full, ReadOnly: f.readonly, EIO: slices.Clone(f.eio)}
	m.mu.Lock()
	defer m.mu.Unlock()
	s.Boots = m.boots
	v := m.vol
	v.mu.Lock()
	defer v.mu.Unlock()
	for _, f := range v.files {
		if !f.clean() {
			s.PendingFiles++
			s.PendingBytes += f.ov.bytes()
		}
	}
	s.PendingOps = v.ns.pending()
	for _, op := range v.ns.ops {
		if !op.durable && len(s.Pending) < 50 {
			s.Pending = append(s.Pending, op.String())
		}
	}
	return s
}
