package controlif

import (
	"os"
	"path/filepath"
	"syscall"
	"testing"

	"golang.org/x/sys/unix"

	"github.com/grapnel-io/grapnel/agent/runtime"
)

// TestFIFOModes: issue 17, point 5. The FIFOs are 0600 and belong to the
// workload; their directory is the agent's, entered only by the
// workload's group (0750), or by nobody but the agent without an owner
// (0700). FIFOs an earlier agent left with other modes are fixed.
func TestFIFOModes(t *testing.T) {
	check := func(path string, uid, gid uint32, mode os.FileMode) {
		t.Helper()
		fi, err := os.Lstat(path)
		if err != nil {
			t.Fatal(err)
		}
		st := fi.Sys().(*syscall.Stat_t)
		if st.Uid != uid || st.Gid != gid || fi.Mode().Perm() != mode {
			t.Errorf("%s: %d:%d %v, want %d:%d %v", path, st.Uid, st.Gid, fi.Mode().Perm(), uid, gid, mode)
		}
	}
	me, mygid := uint32(os.Geteuid()), uint32(os.Getegid())

	c, _ := newTestInterfaces(t, newForwarder())
	dir, err := c.Open(testInst, readAccess, nil)
	if err != nil {
		t.Fatal(err)
	}
	check(dir, me, mygid, 0o700)
	check(filepath.Join(dir, "input"), me, mygid, 0o600)
	check(filepath.Join(dir, "output"), me, mygid, 0o600)

	if os.Geteuid() != 0 {
		t.Skip("needs root to give the FIFOs to another uid")
	}
	// An earlier agent's FIFOs, 0700 and the agent's, in a 0755 directory.
	c2, run := newTestInterfaces(t, newForwarder())
	old := c2.Dir(testInst)
	if err := os.MkdirAll(old, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := unix.Mkfifo(filepath.Join(old, "output"), 0o700); err != nil {
		t.Fatal(err)
	}
	owner := &runtime.Owner{UID: 61300, GID: 61300}
	dir, err = c2.Open(testInst, readAccess, owner)
	if err != nil {
		t.Fatal(err)
	}
	check(filepath.Dir(dir), 0, owner.GID, 0o710)
	check(dir, 0, owner.GID, 0o750)
	check(filepath.Join(dir, "input"), owner.UID, owner.GID, 0o600)
	check(filepath.Join(dir, "output"), owner.UID, owner.GID, 0o600)
	_ = run
}
