package runtime

import (
	"os"
	"path/filepath"
	"syscall"
	"testing"
)

func ctime(t *testing.T, path string) syscall.Timespec {
	t.Helper()
	fi, err := os.Lstat(path)
	if err != nil {
		t.Fatal(err)
	}
	return fi.Sys().(*syscall.Stat_t).Ctim
}

// Requirement (issue 29 point 3, agents): making ready what is ready
// already changes nothing, not even metadata, so that an agent adopting
// its workloads on a read-only run folder still serves their control
// interfaces; what differs is changed as before. A chmod or chown moves
// the file's ctime even when it sets what was there, so an unchanged
// ctime shows that none was made.
func TestOwnChangesOnlyWhatDiffers(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "inst")
	if err := PrepareRunDir(dir, nil); err != nil {
		t.Fatal(err)
	}
	fifo := filepath.Join(dir, "input")
	if err := syscall.Mkfifo(fifo, 0o600); err != nil {
		t.Fatal(err)
	}
	if err := GiveFile(fifo, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	var o *Owner
	if os.Geteuid() == 0 {
		o = &Owner{UID: 61234, GID: 61234}
		if err := PrepareRunDir(dir, o); err != nil {
			t.Fatal(err)
		}
		if err := GiveFile(fifo, o, 0o600); err != nil {
			t.Fatal(err)
		}
	}
	dirBefore, fifoBefore := ctime(t, dir), ctime(t, fifo)
	if err := PrepareRunDir(dir, o); err != nil {
		t.Fatal(err)
	}
	if err := GiveFile(fifo, o, 0o600); err != nil {
		t.Fatal(err)
	}
	if ctime(t, dir) != dirBefore || ctime(t, fifo) != fifoBefore {
		t.Fatal("making ready what was ready changed its metadata")
	}
	if err := GiveFile(fifo, o, 0o400); err != nil {
		t.Fatal(err)
	}
	if fi, err := os.Lstat(fifo); err != nil || fi.Mode().Perm() != 0o400 {
		t.Fatalf("a different mode was not set: %v, %v", fi.Mode(), err)
	}
	if o != nil {
		st, _ := os.Lstat(dir)
		if s := st.Sys().(*syscall.Stat_t); int(s.Uid) != os.Geteuid() || s.Gid != o.GID || st.Mode().Perm() != runDirMode {
			t.Fatalf("run directory %v uid %d gid %d", st.Mode(), s.Uid, s.Gid)
		}
	}
}
