package campaign

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/grapnel-io/grapnel/chaos/netns"
	"github.com/grapnel-io/grapnel/internal/testwait"
)

// requireFUSE skips a test that mounts when this machine cannot (not
// root, no /dev/fuse), unless GRAPNEL_REQUIRE_FUSE=1 makes that a
// failure, as chaos/flashfs's tests do.
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
		t.Fatalf("the campaign's flash needs root and /dev/fuse: %s (GRAPNEL_REQUIRE_FUSE=1)", why)
	}
	t.Skipf("the campaign's flash needs root and /dev/fuse: %s (set GRAPNEL_REQUIRE_FUSE=1 to fail instead)", why)
}

func newTestFlash(t *testing.T, hosts int) (*flash, string) {
	t.Helper()
	requireFUSE(t)
	dir := t.TempDir()
	fl, err := newFlash(dir, hosts, 1, 0, t.Logf)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(fl.close)
	return fl, dir
}

// Each host gets its mount under the run directory; a mount point that
// has something on it is refused.
func TestFlashMountsPerHost(t *testing.T) {
	fl, dir := newTestFlash(t, 2)
	for i := range 2 {
		backing, mp := flashDirs(dir, i)
		if got := fl.mount(i).Mountpoint(); got != mp {
			t.Fatalf("host %d mounted on %s, want %s", i, got, mp)
		}
		if err := os.WriteFile(filepath.Join(mp, "f"), []byte("x"), 0o644); err != nil {
			t.Fatal(err)
		}
		if _, err := os.Stat(filepath.Join(backing, "f")); err != nil {
			t.Fatalf("host %d: the file is not in its backing directory: %v", i, err)
		}
		if err := mountedOver(mp); !errors.Is(err, ErrNoFlash) || !strings.Contains(err.Error(), "fuse.flashfs") {
			t.Fatalf("mountedOver a live flashfs mount: %v", err)
		}
		if err := mountedOver(filepath.Dir(mp)); err == nil {
			t.Fatal("mountedOver the parent of a mount: nil")
		}
	}
	if err := mountedOver(t.TempDir()); err != nil {
		t.Fatalf("mountedOver an empty directory: %v", err)
	}
	if err := mountedOver("/proc"); err == nil {
		t.Fatal("mountedOver /proc: nil")
	}
	if _, err := newFlash(dir, 2, 1, 0, t.Logf); err == nil {
		t.Fatal("a second group mounted over the first")
	}
}

// Each storage fault fails what it should on the replica's data dir, and
// its heal undoes it.
func TestInjectStorage(t *testing.T) {
	fl, _ := newTestFlash(t, 1)
	d := dataDir{mount: fl.mount(0), rel: "r1"}
	wal := filepath.Join(d.path(), "wal")
	if err := os.MkdirAll(wal, 0o755); err != nil {
		t.Fatal(err)
	}
	writeSync := func(name string) error {
		f, err := os.OpenFile(filepath.Join(wal, name), os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
		if err != nil {
			return err
		}
		defer f.Close()
		if _, err := f.Write([]byte("entry")); err != nil {
			return err
		}
		return f.Sync()
	}
	for _, tc := range []struct {
		kind      Kind
		file      string
		want      syscall.Errno
		otherFile string // fails not, when set
	}{
		{DiskFull, "1.wal", syscall.ENOSPC, ""},
		{ReadOnly, "1.wal", syscall.EROFS, ""},
		{FsyncError, "1.wal", syscall.EIO, "other.log"},
		{FsyncError, "wal-meta.db", syscall.EIO, ""},
	} {
		t.Run(string(tc.kind)+" "+tc.file, func(t *testing.T) {
			if err := writeSync(tc.file); err != nil {
				t.Fatalf("before the fault: %v", err)
			}
			_, heal, err := injectStorage(tc.kind, d)
			if err != nil {
				t.Fatal(err)
			}
			if err := writeSync(tc.file); !errors.Is(err, tc.want) {
				heal()
				t.Fatalf("during the fault: %v, want %v", err, tc.want)
			}
			if tc.otherFile != "" {
				if err := writeSync(tc.otherFile); err != nil {
					heal()
					t.Fatalf("a file the fault does not name: %v", err)
				}
			}
			heal()
			if err := writeSync(tc.file); err != nil {
				t.Fatalf("after the heal: %v", err)
			}
		})
	}
	if _, _, err := injectStorage(LeaderKill, d); !errors.Is(err, ErrConfig) {
		t.Fatalf("a leader kill as a storage fault: %v", err)
	}
}

// testCluster is one replica on host namespace ns whose binary sleeps,
// with its data dir on fl's mount.
func testCluster(t *testing.T, fl *flash, dir, ns string) *cluster {
	t.Helper()
	bin := filepath.Join(t.TempDir(), "replica")
	if err := os.WriteFile(bin, []byte("#!/bin/sh\nexec sleep 60\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	c := &cluster{net: &netns.Net{}, bins: map[string]string{"grapnel-server": bin}, dir: dir, flash: fl,
		removedAt: map[string]uint32{}, logf: t.Logf}
	h := &netns.Host{Name: "h1", NS: ns, Addr: "10.0.0.1"}
	c.reps = []*replica{{host: h, name: "r1", dataDir: filepath.Join(c.storeRoot(0), "r1"), logPath: filepath.Join(dir, "r1.log")}}
	t.Cleanup(func() { c.killReplica(0) })
	return c
}

// whileStopped runs its act with the replica gone and starts it again
// on the same data dir.
func TestWhileStopped(t *testing.T) {
	fl, dir := newTestFlash(t, 1)
	c := testCluster(t, fl, dir, "/proc/self/ns/net")
	if err := c.startReplica(0); err != nil {
		t.Fatal(err)
	}
	first := c.replicaProc(0)
	if first == nil {
		t.Fatal("the replica does not run")
	}
	err := whileStopped(c, 0, func(d dataDir) error {
		if c.replicaProc(0) != nil || first.alive() {
			return errors.New("the replica runs during the act")
		}
		if d.rel != "r1" || d.mount != fl.mount(0) {
			return fmt.Errorf("data dir %+v", d)
		}
		return os.WriteFile(filepath.Join(d.path(), "acted"), nil, 0o644)
	})
	if err != nil {
		t.Fatal(err)
	}
	again := c.replicaProc(0)
	if again == nil || again == first {
		t.Fatal("the replica was not started again")
	}
	if _, err := os.Stat(filepath.Join(dir, "mnt", "h1", "r1", "acted")); err != nil {
		t.Fatalf("the act did not reach the data dir on the mount: %v", err)
	}
	// An act that fails: the replica still starts again, the error is
	// returned.
	boom := errors.New("boom")
	if err := whileStopped(c, 0, func(dataDir) error { return boom }); !errors.Is(err, boom) || c.replicaProc(0) == nil {
		t.Fatalf("a failed act: %v, running %v", err, c.replicaProc(0) != nil)
	}
	// Without flash there is no data dir to act on.
	c.flash = nil
	if err := whileStopped(c, 0, func(dataDir) error { return nil }); !errors.Is(err, ErrNoFlash) {
		t.Fatalf("without flash: %v", err)
	}
}

// powerOff ends every process of the hosts' namespaces, the children the
// campaign did not start among them, and nothing outside.
func TestPowerOffEndsEveryProcessOfTheHosts(t *testing.T) {
	if os.Getuid() != 0 {
		t.Skip("needs root for a network namespace")
	}
	// A host: a network namespace with a shell and two children, as an
	// agent with its shim and workload.
	host := exec.Command("unshare", "--net", "--", "sh", "-c", "sleep 60 & sleep 60 & wait")
	if err := host.Start(); err != nil {
		t.Skipf("unshare --net: %v", err)
	}
	t.Cleanup(func() { _ = host.Process.Kill(); _ = host.Wait() })
	outside := exec.Command("sleep", "60")
	if err := outside.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = outside.Process.Kill(); _ = outside.Wait() })
	ns := fmt.Sprintf("/proc/%d/ns/net", host.Process.Pid)
	own, err := nsInode("/proc/self/ns/net")
	if err != nil {
		t.Fatal(err)
	}
	// Until unshare has made its namespace, the child is in ours: a
	// power off of it is refused.
	c := &cluster{reps: []*replica{{host: &netns.Host{Name: "h1", NS: "/proc/self/ns/net"}, name: "r1"}}}
	if n, _, err := c.powerOff(nil); err == nil || n != 0 {
		t.Fatalf("a power off of this process's own namespace: %d processes, %v", n, err)
	}
	var ino uint64
	testwait.For(t, 5*time.Second, func() bool {
		if ino, err = nsInode(ns); err != nil {
			t.Fatal(err)
		}
		return ino != own
	}, "unshare to make a network namespace")
	var in []int
	testwait.For(t, 5*time.Second, func() bool { in = pidsIn(map[uint64]bool{ino: true}); return len(in) >= 3 },
		"3 processes in the host's namespace, the shell and two sleeps (%v)", testwait.Lazy(func() string { return fmt.Sprint(in) }))
	if len(in) != 3 {
		t.Fatalf("%d processes in the host's namespace, want 3 (the shell and two sleeps): %v", len(in), in)
	}
	done := make(chan error, 1)
	go func() { done <- host.Wait() }()
	c = &cluster{reps: []*replica{{host: &netns.Host{Name: "h1", NS: ns}, name: "r1"}}}
	// Nothing in flight until the third freeze: the processes are
	// thawed twice and frozen again.
	asked := 0
	n, freezes, err := c.powerOff(func() bool { asked++; return asked == 3 })
	if err != nil || n != 3 || freezes != 3 {
		t.Fatalf("powerOff: %d processes, %d freezes, %v; want 3 and 3", n, freezes, err)
	}
	// powerOff returns once no process is in the host's namespace; a
	// killed one leaves it (exit_task_namespaces) a moment before it is a
	// zombie, with its files already closed.
	for _, pid := range in {
		testwait.For(t, 5*time.Second, func() bool { return zombie(pid) }, "process %d of the host to end", pid)
	}
	select {
	case <-done:
	case <-time.After(5 * time.Second):
		t.Fatal("the host's shell was not killed")
	}
	if zombie(outside.Process.Pid) {
		t.Fatal("a process outside the hosts was killed")
	}
}

// A flash that cannot be mounted turns the flash off with the reason,
// said in the log, unless it is required; Flash off mounts nothing.
func TestMountFlashFallsBack(t *testing.T) {
	file := filepath.Join(t.TempDir(), "not-a-dir")
	if err := os.WriteFile(file, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	var logged []string
	cfg := Config{Dir: file, Flash: true, Previous: &Previous{Commit: "c", Server: "s"}, Logf: func(f string, a ...any) { logged = append(logged, fmt.Sprintf(f, a...)) }}
	fl, err := cfg.mountFlash()
	if err != nil || fl != nil {
		t.Fatalf("mountFlash = %v, %v; want no flash and no error", fl, err)
	}
	if cfg.Flash || !strings.Contains(cfg.NoFlash, "could not be mounted") ||
		len(logged) != 1 || !strings.HasPrefix(logged[0], "NO FLASH: ") || !strings.Contains(logged[0], "power-cut") {
		t.Fatalf("Flash %v, NoFlash %q, logged %q", cfg.Flash, cfg.NoFlash, logged)
	}
	if sk := cfg.skipped(); len(sk) != len(FlashKinds) || !strings.Contains(sk[0], "could not be mounted") {
		t.Fatalf("skipped %q", sk)
	}
	cfg = Config{Dir: file, Flash: true, RequireFlash: true, Logf: t.Logf}
	if _, err := cfg.mountFlash(); !errors.Is(err, ErrNoFlash) {
		t.Fatalf("required: %v, want ErrNoFlash", err)
	}
	cfg = Config{Dir: file, Logf: t.Logf}
	if fl, err := cfg.mountFlash(); fl != nil || err != nil {
		t.Fatalf("Flash off: %v, %v", fl, err)
	}
}
