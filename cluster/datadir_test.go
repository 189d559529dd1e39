package cluster_test

import (
	"bytes"
	"io/fs"
	"os"
	"path/filepath"
	"testing"

	"github.com/grapnel-io/grapnel/cluster/clustertest"
)

// TestDataDirModes: issue 17, point 5. A snapshot's files (state.bin,
// meta.json) are 0600 in 0700 directories as soon as it is taken, even
// in a process whose umask would let hashicorp/raft make them 0644; and a
// data directory an earlier release left 0755 with 0644 files is made
// private when the replica starts.
func TestDataDirModes(t *testing.T) {
	c := clustertest.New(t, 1)
	c.WaitLeader(waitLong)
	applyAgents(t, c, "modes", 3)
	var snap bytes.Buffer
	if _, err := c.Node("n1").SaveSnapshot(&snap); err != nil {
		t.Fatalf("SaveSnapshot: %v", err)
	}
	dir := c.Replica("n1").DataDir
	assertPrivate(t, dir, "after a snapshot")

	c.Stop("n1")
	if err := filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() {
			return os.Chmod(p, 0o755)
		}
		return os.Chmod(p, 0o644)
	}); err != nil {
		t.Fatal(err)
	}
	c.Restart("n1")
	c.WaitLeader(waitLong)
	assertPrivate(t, dir, "after a start with a 0755 data directory")
}

// assertPrivate fails unless every directory under dir is 0700 and every
// file 0600 or tighter, and there is a state.bin among them.
func assertPrivate(t *testing.T, dir, when string) {
	t.Helper()
	sawState := false
	err := filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		fi, err := d.Info()
		if err != nil {
			return err
		}
		switch perm := fi.Mode().Perm(); {
		case d.Type()&fs.ModeSymlink != 0:
		case d.IsDir() && perm != 0o700:
			t.Errorf("%s: directory %s is %v, want 0700", when, p, perm)
		case !d.IsDir() && perm&0o077 != 0:
			t.Errorf("%s: file %s is %v, want 0600", when, p, perm)
		}
		sawState = sawState || d.Name() == "state.bin"
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if !sawState {
		t.Fatalf("%s: no state.bin under %s", when, dir)
	}
}
