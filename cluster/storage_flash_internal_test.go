package cluster

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/grapnel-io/grapnel/chaos/flashfs"
)

// The probe that decides whether failed storage works again fsyncs the
// WAL's own files: with fsyncs of the segments failing, a new file still
// works, and a probe of a new file alone made the replica restart in
// place at every probe (the chaos campaign's fsync-error fault).
func TestProbeFsyncsTheWALFiles(t *testing.T) {
	if _, err := os.Stat("/dev/fuse"); err != nil || os.Geteuid() != 0 {
		if os.Getenv("GRAPNEL_REQUIRE_FUSE") == "1" {
			t.Fatalf("flashfs needs root and /dev/fuse: %v", err)
		}
		t.Skip("flashfs needs root and /dev/fuse")
	}
	backing, mp := t.TempDir(), t.TempDir()
	g := flashfs.NewGroup(flashfs.Options{Model: flashfs.PerDirectory, Seed: 1, Logf: t.Logf})
	m, err := g.Mount("r1", backing, mp)
	if err != nil {
		t.Fatal(err)
	}
	defer g.Close()
	if err := os.MkdirAll(filepath.Join(mp, walDir), 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(mp, walDir, "00001.wal"), []byte("segment"), 0o600); err != nil {
		t.Fatal(err)
	}
	guard := newStorageGuard(mp, time.Now, nil)
	if err := guard.probe(0); err != nil {
		t.Fatalf("probe of working storage: %v", err)
	}
	if err := m.AddEIO(flashfs.EIORule{Glob: walDir + "/*.wal", Fsync: true}); err != nil {
		t.Fatal(err)
	}
	err = guard.probe(0)
	if err == nil || !strings.Contains(err.Error(), "00001.wal") {
		t.Fatalf("probe with the segments' fsyncs failing: %v, want an error naming the segment", err)
	}
	m.Heal()
	if err := guard.probe(0); err != nil {
		t.Fatalf("probe after the heal: %v", err)
	}
}
