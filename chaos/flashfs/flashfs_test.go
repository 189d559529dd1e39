package flashfs

import (
	"bytes"
	"errors"
	"math/bits"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"golang.org/x/sys/unix"
)

// requireFUSE skips a test that needs to mount when this machine cannot
// (not root, no /dev/fuse), unless GRAPNEL_REQUIRE_FUSE=1 makes that a
// failure.
func requireFUSE(t *testing.T) {
	t.Helper()
	why := ""
	if os.Getuid() != 0 {
		why = "not root"
	} else if _, err := os.Stat("/dev/fuse"); err != nil {
		why = "no /dev/fuse"
	}
	if why == "" {
		return
	}
	if os.Getenv("GRAPNEL_REQUIRE_FUSE") == "1" {
		t.Fatalf("flashfs needs root and /dev/fuse to mount: %s (GRAPNEL_REQUIRE_FUSE=1)", why)
	}
	t.Skipf("flashfs needs root and /dev/fuse to mount: %s (set GRAPNEL_REQUIRE_FUSE=1 to fail instead)", why)
}

type fixture struct {
	g           *Group
	m           *Mount
	mp, backing string
}

func mount(t *testing.T, opts Options) *fixture {
	t.Helper()
	requireFUSE(t)
	backing, mp := t.TempDir(), t.TempDir()
	opts.Logf = t.Logf
	g := NewGroup(opts)
	m, err := g.Mount("t", backing, mp)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := g.Close(); err != nil {
			t.Error(err)
		}
	})
	return &fixture{g: g, m: m, mp: mp, backing: backing}
}

func (x *fixture) path(rel string) string { return filepath.Join(x.mp, rel) }

// write makes the file rel hold data, synced or not; dirSync also syncs
// its directory, so the name is durable too.
func (x *fixture) write(t *testing.T, rel string, data string, sync, dirSync bool) {
	t.Helper()
	f, err := os.OpenFile(x.path(rel), os.O_CREATE|os.O_TRUNC|os.O_WRONLY, 0o644)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := f.WriteString(data); err != nil {
		t.Fatal(err)
	}
	if sync {
		if err := f.Sync(); err != nil {
			t.Fatal(err)
		}
	}
	if err := f.Close(); err != nil {
		t.Fatal(err)
	}
	if dirSync {
		x.syncDir(t, filepath.Dir(rel))
	}
}

func (x *fixture) syncDir(t *testing.T, rel string) {
	t.Helper()
	d, err := os.Open(x.path(rel))
	if err != nil {
		t.Fatal(err)
	}
	defer d.Close()
	if err := d.Sync(); err != nil {
		t.Fatal(err)
	}
}

func (x *fixture) cut(t *testing.T, o PowerCutOptions) PowerCutReport {
	t.Helper()
	rep, err := x.g.PowerCut(o)
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range rep.Mounts {
		if len(c.Problems) > 0 {
			t.Fatalf("power cut problems: %v", c.Problems)
		}
	}
	return rep
}

// read returns the file's content through the mount, or "<absent>".
func (x *fixture) read(t *testing.T, rel string) string {
	t.Helper()
	b, err := os.ReadFile(x.path(rel))
	if errors.Is(err, os.ErrNotExist) {
		return "<absent>"
	}
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

func (x *fixture) readBacking(t *testing.T, rel string) string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(x.backing, rel))
	if errors.Is(err, os.ErrNotExist) {
		return "<absent>"
	}
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

func want(t *testing.T, what, got, want string) {
	t.Helper()
	if got != want {
		t.Fatalf("%s = %q, want %q", what, got, want)
	}
}

// Unsynced bytes read back before the cut and are gone after it; synced
// bytes stay. The backing directory holds only what was durable.
func TestPowerCutDropsUnsyncedData(t *testing.T) {
	x := mount(t, Options{})
	x.write(t, "a", "synced", true, true)
	f, err := os.OpenFile(x.path("a"), os.O_WRONLY|os.O_APPEND, 0)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := f.WriteString("+unsynced"); err != nil {
		t.Fatal(err)
	}
	f.Close()
	x.write(t, "b", "never synced", false, true) // a durable name, no data
	want(t, "a before the cut", x.read(t, "a"), "synced+unsynced")
	want(t, "b before the cut", x.read(t, "b"), "never synced")
	want(t, "backing a before the cut", x.readBacking(t, "a"), "synced")
	rep := x.cut(t, PowerCutOptions{})
	want(t, "a after the cut", x.read(t, "a"), "synced")
	want(t, "b after the cut", x.read(t, "b"), "")
	if c := rep.Mounts[0]; c.FilesDropped != 2 || c.BytesDropped != int64(len("+unsynced")+len("never synced")) {
		t.Fatalf("report %v: want 2 files and %d bytes dropped", c, len("+unsynced")+len("never synced"))
	}
}

// A write through an O_DSYNC descriptor is durable when write returns.
func TestOSyncWriteIsDurable(t *testing.T) {
	x := mount(t, Options{})
	x.write(t, "log", "", true, true)
	f, err := os.OpenFile(x.path("log"), os.O_WRONLY|os.O_APPEND|syscall.O_DSYNC, 0)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := f.WriteString("acknowledged"); err != nil {
		t.Fatal(err)
	}
	f.Close()
	x.cut(t, PowerCutOptions{})
	want(t, "log after the cut", x.read(t, "log"), "acknowledged")
}

// The write-then-rename of a file: without an fsync of the directory the
// rename (and the create) are undone, and the file it replaced is back;
// with it, the new file stands.
func TestRenameNeedsDirectorySync(t *testing.T) {
	x := mount(t, Options{})
	x.write(t, "state", "old", true, true)
	x.write(t, "state.tmp", "new", true, false)
	if err := os.Rename(x.path("state.tmp"), x.path("state")); err != nil {
		t.Fatal(err)
	}
	want(t, "state before the cut", x.read(t, "state"), "new")
	rep := x.cut(t, PowerCutOptions{})
	want(t, "state after a cut without dir fsync", x.read(t, "state"), "old")
	want(t, "state.tmp after the cut", x.read(t, "state.tmp"), "<absent>")
	if rep.Mounts[0].OpsUndone != 2 {
		t.Fatalf("report %v: want 2 operations undone (create, rename)", rep.Mounts[0])
	}

	x.write(t, "state.tmp", "new", true, false)
	if err := os.Rename(x.path("state.tmp"), x.path("state")); err != nil {
		t.Fatal(err)
	}
	x.syncDir(t, ".")
	x.cut(t, PowerCutOptions{})
	want(t, "state after a cut with dir fsync", x.read(t, "state"), "new")
	want(t, "state.tmp after the cut", x.read(t, "state.tmp"), "<absent>")
	if ents, _ := os.ReadDir(filepath.Join(x.backing, trashName)); len(ents) != 0 {
		t.Fatalf("trash holds %d entries after durable operations", len(ents))
	}
}

// An unlink without a directory fsync is undone with the file's content;
// a rename across directories needs both directories synced.
func TestUnlinkAndCrossDirectoryRename(t *testing.T) {
	x := mount(t, Options{})
	if err := os.Mkdir(x.path("d1"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.Mkdir(x.path("d2"), 0o755); err != nil {
		t.Fatal(err)
	}
	x.syncDir(t, ".")
	x.write(t, "d1/f", "content", true, true)
	x.write(t, "d1/g", "gone", true, true)
	if err := os.Remove(x.path("d1/g")); err != nil {
		t.Fatal(err)
	}
	for i, synced := range []string{"d2", "d1"} { // one of the two: not durable
		if err := os.Rename(x.path("d1/f"), x.path("d2/f")); err != nil {
			t.Fatal(err)
		}
		x.syncDir(t, synced)
		x.cut(t, PowerCutOptions{})
		if i == 0 {
			want(t, "d1/g after the cut", x.read(t, "d1/g"), "gone")
		}
		want(t, "d1/f after a cut with only "+synced+" synced", x.read(t, "d1/f"), "content")
		want(t, "d2/f after a cut with only "+synced+" synced", x.read(t, "d2/f"), "<absent>")
	}

	if err := os.Rename(x.path("d1/f"), x.path("d2/f")); err != nil {
		t.Fatal(err)
	}
	x.syncDir(t, "d2")
	x.syncDir(t, "d1")
	x.cut(t, PowerCutOptions{})
	want(t, "d1/f after the synced rename", x.read(t, "d1/f"), "<absent>")
	want(t, "d2/f after the synced rename", x.read(t, "d2/f"), "content")
}

// A durable rename over a name carries an older pending rename to that
// name with it: undoing the older one would move the wrong file.
func TestLaterDurableRenameCarriesEarlier(t *testing.T) {
	x := mount(t, Options{})
	for _, d := range []string{"d1", "d2", "d3"} {
		if err := os.Mkdir(x.path(d), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	x.syncDir(t, ".")
	x.write(t, "d1/f", "f", true, true)
	x.write(t, "d3/g", "g", true, true)
	if err := os.Rename(x.path("d1/f"), x.path("d2/f")); err != nil { // waits for d1 and d2
		t.Fatal(err)
	}
	if err := os.Rename(x.path("d3/g"), x.path("d2/f")); err != nil { // waits for d3 and d2
		t.Fatal(err)
	}
	x.syncDir(t, "d2")
	x.syncDir(t, "d3")
	x.cut(t, PowerCutOptions{}) // fails on an undo it could not do
	want(t, "d2/f", x.read(t, "d2/f"), "g")
	want(t, "d1/f", x.read(t, "d1/f"), "<absent>")
	want(t, "d3/g", x.read(t, "d3/g"), "<absent>")
}

// hashicorp/raft's snapshot store writes files in a new directory,
// fsyncs them, renames the directory and fsyncs its parent, never the
// new directory itself. The per-directory model loses the files; the
// journal model keeps them.
func TestDirectoryRenamePattern(t *testing.T) {
	for _, tc := range []struct {
		model Model
		want  string
	}{{PerDirectory, "<absent>"}, {Journal, "state"}} {
		t.Run(tc.model.String(), func(t *testing.T) {
			x := mount(t, Options{Model: tc.model})
			if err := os.Mkdir(x.path("snap.tmp"), 0o755); err != nil {
				t.Fatal(err)
			}
			x.write(t, "snap.tmp/state.bin", "state", true, false)
			if err := os.Rename(x.path("snap.tmp"), x.path("snap")); err != nil {
				t.Fatal(err)
			}
			x.syncDir(t, ".")
			x.cut(t, PowerCutOptions{})
			if _, err := os.Stat(x.path("snap")); err != nil {
				t.Fatalf("snap after the cut: %v (its rename was durable)", err)
			}
			want(t, "snap/state.bin after the cut", x.read(t, "snap/state.bin"), tc.want)
		})
	}
}

// A torn write keeps a prefix of the last unsynced write and nothing of
// the earlier ones.
func TestTornWriteKeepsPrefix(t *testing.T) {
	x := mount(t, Options{Seed: 7})
	x.write(t, "seg", strings.Repeat("A", 64), true, true)
	f, err := os.OpenFile(x.path("seg"), os.O_WRONLY, 0)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := f.WriteAt([]byte(strings.Repeat("x", 8)), 40); err != nil { // an earlier unsynced write
		t.Fatal(err)
	}
	if _, err := f.WriteAt([]byte(strings.Repeat("B", 32)), 0); err != nil {
		t.Fatal(err)
	}
	f.Close()
	rep := x.cut(t, PowerCutOptions{Tear: true, TearKeep: 10})
	want(t, "seg after a torn cut", x.read(t, "seg"), strings.Repeat("B", 10)+strings.Repeat("A", 54))
	if tr := rep.Mounts[0].Torn; tr == nil || tr.Kept != 10 || tr.Len != 32 || tr.Off != 0 || tr.Path != "seg" {
		t.Fatalf("tear reported %+v, want 10 of 32 bytes at 0 of seg", tr)
	}

	// At random: a proper prefix, at least one byte.
	f, err = os.OpenFile(x.path("seg"), os.O_WRONLY, 0)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := f.WriteAt([]byte(strings.Repeat("C", 32)), 16); err != nil {
		t.Fatal(err)
	}
	f.Close()
	rep = x.cut(t, PowerCutOptions{Tear: true, TearKeep: -1})
	k := rep.Mounts[0].Torn.Kept
	if k < 1 || k >= 32 {
		t.Fatalf("random tear kept %d of 32 bytes, want 1..31", k)
	}
	want(t, "seg after a random tear", x.read(t, "seg"), strings.Repeat("B", 10)+strings.Repeat("A", 6)+strings.Repeat("C", k)+strings.Repeat("A", 48-k))
}

// Full: writes, fallocate and new entries fail with ENOSPC, reads and
// fsync of what was written before work; heal ends it.
func TestFull(t *testing.T) {
	x := mount(t, Options{})
	x.write(t, "a", "before", false, true)
	f, err := os.OpenFile(x.path("a"), os.O_WRONLY|os.O_APPEND, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	x.m.SetFull(true)
	if _, err := f.WriteString("more"); !errors.Is(err, syscall.ENOSPC) {
		t.Fatalf("write on a full mount: %v, want ENOSPC", err)
	}
	if err := unix.Fallocate(int(f.Fd()), 0, 0, 1<<20); !errors.Is(err, syscall.ENOSPC) {
		t.Fatalf("fallocate on a full mount: %v, want ENOSPC", err)
	}
	if _, err := os.Create(x.path("new")); !errors.Is(err, syscall.ENOSPC) {
		t.Fatalf("create on a full mount: %v, want ENOSPC", err)
	}
	var st syscall.Statfs_t
	if err := syscall.Statfs(x.mp, &st); err != nil || st.Bavail != 0 {
		t.Fatalf("statfs on a full mount: %v, %d blocks available, want 0", err, st.Bavail)
	}
	if err := f.Sync(); err != nil {
		t.Fatalf("fsync of data written before the disk filled: %v", err)
	}
	want(t, "a on a full mount", x.read(t, "a"), "before")
	x.m.Heal()
	if _, err := f.WriteString("more"); err != nil {
		t.Fatalf("write after heal: %v", err)
	}
	want(t, "a after heal", x.read(t, "a"), "beforemore")
}

// Read-only: every change fails with EROFS, as does an fsync with
// something to write; reads work; heal ends it.
func TestReadOnly(t *testing.T) {
	x := mount(t, Options{})
	x.write(t, "a", "data", true, true)
	w, err := os.OpenFile(x.path("a"), os.O_WRONLY, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer w.Close()
	if _, err := w.WriteAt([]byte("DA"), 0); err != nil {
		t.Fatal(err)
	}
	x.m.SetReadOnly(true)
	checks := map[string]error{}
	_, checks["write"] = w.WriteAt([]byte("x"), 0)
	checks["fsync with unsynced data"] = w.Sync()
	_, checks["open for writing"] = os.OpenFile(x.path("a"), os.O_WRONLY, 0)
	_, checks["create"] = os.Create(x.path("b"))
	checks["mkdir"] = os.Mkdir(x.path("d"), 0o755)
	checks["rename"] = os.Rename(x.path("a"), x.path("c"))
	checks["unlink"] = os.Remove(x.path("a"))
	checks["chmod"] = os.Chmod(x.path("a"), 0o600)
	checks["truncate"] = os.Truncate(x.path("a"), 1)
	for what, err := range checks {
		if !errors.Is(err, syscall.EROFS) {
			t.Errorf("%s on a read-only mount: %v, want EROFS", what, err)
		}
	}
	want(t, "a on a read-only mount", x.read(t, "a"), "DAta")
	x.m.Heal()
	if err := w.Sync(); err != nil {
		t.Fatalf("fsync after heal: %v", err)
	}
	x.cut(t, PowerCutOptions{})
	want(t, "a after heal, fsync and a cut", x.read(t, "a"), "DAta")
}

// EIO on the fsyncs of chosen files: the fsync fails, the data still
// reads back but is lost for good; other files sync. EIO on reads.
func TestEIO(t *testing.T) {
	x := mount(t, Options{})
	if err := os.Mkdir(x.path("wal"), 0o755); err != nil {
		t.Fatal(err)
	}
	x.syncDir(t, ".")
	x.write(t, "wal/1.wal", "", true, true)
	x.write(t, "wal/meta", "", true, true)
	if err := x.m.AddEIO(EIORule{Glob: "wal/*.wal", Fsync: true}); err != nil {
		t.Fatal(err)
	}
	f, err := os.OpenFile(x.path("wal/1.wal"), os.O_WRONLY, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if _, err := f.WriteString("entry"); err != nil {
		t.Fatal(err)
	}
	if err := f.Sync(); !errors.Is(err, syscall.EIO) {
		t.Fatalf("fsync of wal/1.wal: %v, want EIO", err)
	}
	x.write(t, "wal/meta", "m", true, false) // not matched: syncs
	want(t, "wal/1.wal after the failed fsync", x.read(t, "wal/1.wal"), "entry")
	x.m.Heal()
	if err := f.Sync(); err != nil {
		t.Fatalf("fsync after heal: %v", err)
	}
	f.Close()
	x.cut(t, PowerCutOptions{})
	want(t, "wal/1.wal after the cut", x.read(t, "wal/1.wal"), "\x00\x00\x00\x00\x00") // the size made it, the bytes not
	want(t, "wal/meta after the cut", x.read(t, "wal/meta"), "m")

	if err := x.m.AddEIO(EIORule{Glob: "wal/meta", Read: true}); err != nil {
		t.Fatal(err)
	}
	if _, err := os.ReadFile(x.path("wal/meta")); !errors.Is(err, syscall.EIO) {
		t.Fatalf("read of wal/meta: %v, want EIO", err)
	}
	x.m.Heal()
	want(t, "wal/meta after heal", x.read(t, "wal/meta"), "m")
	if err := x.m.AddEIO(EIORule{Glob: "[", Read: true}); err == nil {
		t.Fatal("a bad glob was accepted")
	}
}

// flip changes exactly the bits asked, in the durable copy.
func TestFlip(t *testing.T) {
	x := mount(t, Options{Seed: 3})
	orig := bytes.Repeat([]byte{0x5a}, 256)
	x.write(t, "seg", string(orig), true, true)
	before := x.read(t, "seg") // now in the kernel's page cache
	want(t, "seg", before, string(orig))
	if err := x.m.Flip("seg", []int64{0, 9, 100*8 + 7}); err != nil {
		t.Fatal(err)
	}
	got := []byte(x.read(t, "seg"))
	exp := bytes.Clone(orig)
	exp[0] ^= 1
	exp[1] ^= 2
	exp[100] ^= 0x80
	if !bytes.Equal(got, exp) {
		t.Fatalf("after flip: % x\nwant % x", got, exp)
	}
	flipped, err := x.m.FlipRandom("seg", 5)
	if err != nil {
		t.Fatal(err)
	}
	after := []byte(x.read(t, "seg"))
	diff := 0
	for i := range after {
		diff += bits.OnesCount8(after[i] ^ got[i])
	}
	if diff != 5 || len(flipped) != 5 {
		t.Fatalf("random flip changed %d bits and reported %v, want 5", diff, flipped)
	}
	for _, b := range flipped {
		if (after[b/8]^got[b/8])&(1<<(b%8)) == 0 {
			t.Fatalf("reported bit %d is not flipped", b)
		}
	}
	if err := x.m.Flip("seg", []int64{256 * 8}); err == nil {
		t.Fatal("a bit past the end was flipped")
	}
	if err := x.m.Flip("../etc/passwd", []int64{0}); err == nil {
		t.Fatal("a path outside the mount was accepted")
	}
}

// mmap: a read-only shared mapping sees pwrite's bytes, as bbolt (the
// raft-wal metadata store) reads them. The mapping is made by a child
// process: a page fault on the mount in this process could wait on the
// server's goroutines while the garbage collector stops them.
func TestMmapSeesWrites(t *testing.T) {
	x := mount(t, Options{})
	x.write(t, "db", strings.Repeat("\x00", 8192), true, true)
	cmd := exec.Command(os.Args[0], "-test.run=^TestMmapHelper$")
	cmd.Env = append(os.Environ(), "FLASHFS_MMAP_HELPER="+x.path("db"))
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("mmap helper: %v\n%s", err, out)
	}
	want(t, "backing after fdatasync", x.readBacking(t, "db")[4096:4101], "page1")
}

// TestMmapHelper is TestMmapSeesWrites's child: it maps the file, writes
// a page with pwrite, fdatasyncs and reads the page through the mapping.
func TestMmapHelper(t *testing.T) {
	p := os.Getenv("FLASHFS_MMAP_HELPER")
	if p == "" {
		t.Skip("the child of TestMmapSeesWrites")
	}
	f, err := os.OpenFile(p, os.O_RDWR, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	m, err := unix.Mmap(int(f.Fd()), 0, 8192, unix.PROT_READ, unix.MAP_SHARED)
	if err != nil {
		t.Fatalf("mmap: %v", err)
	}
	defer unix.Munmap(m)
	if _, err := f.WriteAt([]byte("page1"), 4096); err != nil {
		t.Fatal(err)
	}
	if err := unix.Fdatasync(int(f.Fd())); err != nil {
		t.Fatal(err)
	}
	want(t, "mapped page", string(m[4096:4101]), "page1")
}

// fallocate grows the size in the volatile layer; a cut takes it back.
func TestFallocate(t *testing.T) {
	x := mount(t, Options{})
	x.write(t, "seg", "", true, true)
	f, err := os.OpenFile(x.path("seg"), os.O_RDWR, 0)
	if err != nil {
		t.Fatal(err)
	}
	if err := unix.Fallocate(int(f.Fd()), 0, 0, 1<<20); err != nil {
		t.Fatalf("fallocate: %v", err)
	}
	st, _ := f.Stat()
	f.Close()
	if st.Size() != 1<<20 {
		t.Fatalf("size after fallocate %d, want %d", st.Size(), 1<<20)
	}
	x.cut(t, PowerCutOptions{})
	st2, err := os.Stat(x.path("seg"))
	if err != nil || st2.Size() != 0 {
		t.Fatalf("after the cut: %v, size %d, want 0", err, st2.Size())
	}
}

// The trash is hidden and cannot be reached or made.
func TestTrashHidden(t *testing.T) {
	x := mount(t, Options{})
	ents, err := os.ReadDir(x.mp)
	if err != nil || len(ents) != 0 {
		t.Fatalf("a fresh mount lists %v (%v), want nothing", ents, err)
	}
	if _, err := os.Stat(x.path(trashName)); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("stat of the trash: %v, want ENOENT", err)
	}
	if err := os.Mkdir(x.path(trashName), 0o755); err == nil {
		t.Fatal("mkdir of the trash's name succeeded")
	}
}

// The control language over a unix socket.
func TestControlSocket(t *testing.T) {
	x := mount(t, Options{})
	sock := filepath.Join(t.TempDir(), "ctl")
	l, err := net.Listen("unix", sock)
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	go x.g.Serve(l)
	x.write(t, "a", "x", true, true)
	if out, err := Command(sock, "full t"); err != nil || out != "full on t" {
		t.Fatalf("full t: %q, %v", out, err)
	}
	if err := os.WriteFile(x.path("a"), []byte("y"), 0o644); !errors.Is(err, syscall.ENOSPC) {
		t.Fatalf("write after full: %v, want ENOSPC", err)
	}
	if out, err := Command(sock, "status"); err != nil || !strings.Contains(out, "t: ") || !strings.Contains(out, "full") {
		t.Fatalf("status: %q, %v", out, err)
	}
	if _, err := Command(sock, "heal"); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(x.path("a"), []byte("unsynced"), 0o644); err != nil {
		t.Fatal(err)
	}
	out, err := Command(sock, "powercut tear=3")
	if err != nil || !strings.Contains(out, "keeping 3") {
		t.Fatalf("powercut tear=3: %q, %v", out, err)
	}
	want(t, "a after the cut", x.read(t, "a"), "uns") // O_TRUNC pending, then torn
	for _, bad := range []string{"bogus", "full", "full nosuch", "eio t sometimes *", "flip t a bits=x", "powercut tear=-1"} {
		if _, err := Command(sock, bad); err == nil {
			t.Errorf("%q was accepted", bad)
		}
	}
}

// Files unlinked without a sync of their directory, whose directory is
// then removed durably (os.RemoveAll, then a sync of the parent, as
// hashicorp/raft reaps an old snapshot): the power cut leaves the
// directory gone, with no problem reported.
func TestRemoveAllThenParentSync(t *testing.T) {
	x := mount(t, Options{})
	if err := os.Mkdir(x.path("snap"), 0o755); err != nil {
		t.Fatal(err)
	}
	x.syncDir(t, ".")
	x.write(t, "snap/state.bin", "state", true, true)
	x.write(t, "snap/meta.json", "meta", true, true)
	if err := os.RemoveAll(x.path("snap")); err != nil {
		t.Fatal(err)
	}
	x.syncDir(t, ".")
	x.cut(t, PowerCutOptions{}) // fails on any problem
	want(t, "snap/state.bin after the cut", x.read(t, "snap/state.bin"), "<absent>")
	if _, err := os.Stat(x.path("snap")); !os.IsNotExist(err) {
		t.Fatalf("snap after the cut: %v, want it gone", err)
	}
}
