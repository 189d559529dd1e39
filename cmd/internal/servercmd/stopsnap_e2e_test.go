package servercmd

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/grapnel-io/grapnel/chaos/bench"
	"github.com/grapnel-io/grapnel/cluster"
)

// A replica stopped with SIGTERM (systemctl stop, ignition off) after
// more than cluster.StopSnapshotMin updates takes a snapshot before it
// exits, and its next start restores it with every update.
func TestSIGTERMTakesASnapshotBeforeTheExit(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and runs grapnel-server")
	}
	bin := e2eBuild(t, "grapnel-server")["grapnel-server"]
	dir := filepath.Join(t.TempDir(), "data")
	ports, err := bench.FreeAddrs(2)
	if err != nil {
		t.Fatal(err)
	}
	addr := ports[0]
	args := []string{"-k", "--name", "n1", "-a", addr, "--raft-address", ports[1], "--data-dir", dir}
	cmd, exited, out := runServer(t, bin, nil, args...)
	w, err := bench.NewWriter([]string{addr}, "stopsnap", bench.MinPayload, 5*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	defer w.Close()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	last := cluster.StopSnapshotMin + 6
	for i := 1; i <= last; i++ {
		if err := w.Update(ctx, i); err != nil {
			t.Fatalf("update %d: %v", i, err)
		}
	}
	if snaps := snapshotDirs(t, dir); len(snaps) != 0 {
		t.Fatalf("snapshots before the stop: %v", snaps)
	}
	terminate(t, cmd, exited)
	if !strings.Contains(out.String(), "snapshot taken before stopping") {
		t.Fatal("no snapshot logged at the stop")
	}
	if snaps := snapshotDirs(t, dir); len(snaps) != 1 {
		t.Fatalf("snapshots after the stop: %v, want one", snaps)
	}

	w.Close()
	runServer(t, bin, nil, args...)
	w2, err := bench.NewWriter([]string{addr}, "stopsnap", bench.MinPayload, 5*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	defer w2.Close()
	if seq, ok, err := w2.ReadSeq(ctx); err != nil || !ok || seq != last {
		t.Fatalf("after the restart the workload carries update %d (found %v, error %v), want %d", seq, ok, err, last)
	}
}

// snapshotDirs lists the snapshots Raft keeps under dir.
func snapshotDirs(t *testing.T, dir string) []string {
	t.Helper()
	entries, err := os.ReadDir(filepath.Join(dir, "snapshots"))
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, e := range entries {
		if e.IsDir() && !strings.HasSuffix(e.Name(), ".tmp") {
			out = append(out, e.Name())
		}
	}
	return out
}
