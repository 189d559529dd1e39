package servercmd

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/grapnel-io/grapnel/chaos/bench"
)

// Issue 32 point 6: --raft-log-store bolt keeps the Raft log in raft.db
// and serves; the same data directory started with the WAL (the default)
// moves raft.db into wal/ and keeps the state; started with bolt again it
// is refused with an error naming the flag, not started with an empty
// log, and the WAL is left as it was.
func TestRaftLogStore_BoltServesMigratesToTheWALAndIsNotMovedBack(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and runs grapnel-server")
	}
	bins := e2eBuild(t, "grapnel-server", "grapnel")
	server, cli := bins["grapnel-server"], bins["grapnel"]
	dir := t.TempDir()
	g := e2eGrapnel(t, bench.GrapnelConfig{Bin: server, Dir: dir, Replicas: 1, Extra: []string{"--raft-log-store", "bolt"}}, 30)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if _, err := g.WaitHealthy(ctx); err != nil {
		t.Fatal(err)
	}
	want := map[string]string{"kept": "img:1"}
	e2eCLI(t, cli, g.Addrs(), "apply", e2eManifest(t, dir, "m.yaml", want))
	r := g.Replicas[0]
	exists := func(name string) bool { _, err := os.Stat(filepath.Join(r.DataDir, name)); return err == nil }
	if err := g.Stop(0, 10*time.Second); err != nil {
		t.Fatal(err)
	}
	if !exists("raft.db") || exists("wal") {
		t.Fatalf("on bolt: raft.db there %t, wal/ there %t; want raft.db only", exists("raft.db"), exists("wal"))
	}

	g.SetBinary(0, server, nil) // the default: the WAL
	if err := g.Start(0); err != nil {
		t.Fatal(err)
	}
	if _, err := g.WaitHealthy(ctx); err != nil {
		t.Fatal(err)
	}
	e2eExpect(t, "the desired state after the move to the WAL", e2eWorkloads(t, cli, g.Addrs()), want)
	if err := g.Stop(0, 10*time.Second); err != nil {
		t.Fatal(err)
	}
	if exists("raft.db") || !exists("wal") {
		t.Fatalf("on the WAL: raft.db there %t, wal/ there %t; want wal/ only", exists("raft.db"), exists("wal"))
	}

	cmd := exec.CommandContext(ctx, server, "-k", "--name", r.Name, "-a", r.Addr, "--raft-address", r.RaftAddr,
		"--data-dir", r.DataDir, "--raft-log-store", "bolt")
	out, err := cmd.CombinedOutput()
	if err == nil || !strings.Contains(string(out), "--raft-log-store bolt") || !strings.Contains(string(out), "wal/") {
		t.Fatalf("bolt on a WAL: %v\n%s\nwant a failed start naming --raft-log-store bolt and wal/", err, out)
	}
	if exists("raft.db") {
		t.Fatal("the refused start made a raft.db")
	}
	if err := g.Start(0); err != nil {
		t.Fatal(err)
	}
	if _, err := g.WaitHealthy(ctx); err != nil {
		t.Fatal(err)
	}
	e2eExpect(t, "the desired state after the refused start", e2eWorkloads(t, cli, g.Addrs()), want)
}
