package flashfs_test

import (
	"context"
	"os"
	"testing"
	"time"

	"github.com/grapnel-io/grapnel/chaos/bench"
	"github.com/grapnel-io/grapnel/chaos/flashfs"
)

// A replica whose data dir is on the flash file system keeps every
// acknowledged update across a SIGKILL and a power cut that tears the
// last unsynced write.
//
// Under the per-directory model too: the server makes its data dir and
// its wal and snapshots directories durable with their parents
// (internal/durable.MkdirAll); before it did, a cut took the whole log.
func TestGrapnelServerSurvivesPowerCut(t *testing.T) {
	if testing.Short() {
		t.Skip("end-to-end: builds grapnel-server")
	}
	if os.Getuid() != 0 {
		if os.Getenv("GRAPNEL_REQUIRE_FUSE") == "1" {
			t.Fatal("flashfs needs root and /dev/fuse to mount: not root (GRAPNEL_REQUIRE_FUSE=1)")
		}
		t.Skip("flashfs needs root and /dev/fuse to mount: not root")
	}
	if _, err := os.Stat("/dev/fuse"); err != nil {
		if os.Getenv("GRAPNEL_REQUIRE_FUSE") == "1" {
			t.Fatalf("flashfs needs /dev/fuse: %v (GRAPNEL_REQUIRE_FUSE=1)", err)
		}
		t.Skipf("flashfs needs /dev/fuse: %v", err)
	}
	bins, err := bench.BuildCommands(t.TempDir(), "grapnel-server")
	if err != nil {
		t.Fatal(err)
	}
	for _, model := range []flashfs.Model{flashfs.Journal, flashfs.PerDirectory} {
		t.Run(model.String(), func(t *testing.T) {
			backing, mp := t.TempDir(), t.TempDir()
			g := flashfs.NewGroup(flashfs.Options{Model: model, Seed: 1, Logf: t.Logf})
			if _, err := g.Mount("r1", backing, mp); err != nil {
				t.Fatal(err)
			}
			defer func() {
				if err := g.Close(); err != nil {
					t.Error(err)
				}
			}()
			ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
			defer cancel()
			gr, err := bench.StartGrapnel(bench.GrapnelConfig{Bin: bins["grapnel-server"], Dir: mp, Replicas: 1})
			if err != nil {
				t.Fatal(err)
			}
			defer gr.Close()
			if _, err := gr.WaitLeader(ctx); err != nil {
				t.Fatal(err)
			}
			w, err := bench.NewWriter(gr.Addrs(), "flash", 256, 5*time.Second)
			if err != nil {
				t.Fatal(err)
			}
			defer w.Close()
			const acked = 30
			for seq := 1; seq <= acked; seq++ {
				if err := w.Update(ctx, seq); err != nil {
					t.Fatalf("update %d: %v", seq, err)
				}
			}
			gr.Kill(0) // the power cut kills the process first
			rep, err := g.PowerCut(flashfs.PowerCutOptions{Tear: true, TearKeep: -1})
			if err != nil {
				t.Fatal(err)
			}
			t.Logf("power cut: %v", rep)
			if p := rep.Mounts[0].Problems; len(p) > 0 {
				t.Fatalf("power cut problems: %v", p)
			}
			if err := gr.Start(0); err != nil {
				t.Fatal(err)
			}
			if _, err := gr.WaitLeader(ctx); err != nil {
				t.Fatalf("the replica did not lead again after the power cut: %v", err)
			}
			seq, ok, err := w.ReadSeq(ctx)
			if err != nil || !ok || seq != acked {
				t.Fatalf("after the power cut the workload holds seq %d (present %v, %v), want the last acknowledged %d", seq, ok, err, acked)
			}
		})
	}
}
