package cli

import (
	"context"
	"errors"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/grapnel-io/grapnel/chaos/bench"
	"github.com/grapnel-io/grapnel/internal/errs"
	"github.com/grapnel-io/grapnel/internal/syncbuf"
	"github.com/grapnel-io/grapnel/rpc"
	"github.com/grapnel-io/grapnel/rpc/client"
)

// serverProcess is a grapnel-server process on a data directory that
// outlives it, so that a test can restart the replica.
type serverProcess struct {
	cmd    *exec.Cmd
	exited chan struct{}
	logs   *syncbuf.Buffer
}

// buildServer returns grapnel-server, built once per test process
// (bench.BuildCommands); it skips the test when the server does not
// build, as startServer does.
func buildServer(t *testing.T) string {
	t.Helper()
	if testing.Short() {
		t.Skip("end-to-end test")
	}
	bins, err := bench.BuildCommands(t.TempDir(), "grapnel-server")
	if err != nil && os.Getenv(bench.BinDirEnv) != "" {
		t.Fatal(err) // not a build failure: the directory make test passes lacks it
	} else if err != nil {
		t.Skipf("grapnel-server does not build: %v", err)
	}
	return bins["grapnel-server"]
}

func startServerProcess(t *testing.T, bin, dataDir, addr, raftAddr string) *serverProcess {
	t.Helper()
	p := &serverProcess{exited: make(chan struct{}), logs: &syncbuf.Buffer{}}
	p.cmd = exec.Command(bin, "-k", "--data-dir", dataDir, "-a", addr, "--raft-address", raftAddr, "--log-level", "warn")
	p.cmd.Stdout, p.cmd.Stderr = p.logs, p.logs
	if err := p.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go func() {
		_ = p.cmd.Wait()
		close(p.exited)
	}()
	t.Cleanup(func() {
		p.stop()
		if t.Failed() {
			t.Logf("server log:\n%s", p.logs.String())
		}
	})
	return p
}

func (p *serverProcess) stop() {
	_ = p.cmd.Process.Kill()
	<-p.exited
}

func (p *serverProcess) running() bool {
	select {
	case <-p.exited:
		return false
	default:
		return true
	}
}

// `grapnel cluster snapshot restore` of random bytes and of a cut
// snapshot, against a grapnel-server process: both are refused with the
// reason, the process keeps serving, and it starts again on its data
// directory with its state. Before the check, the first restore panicked
// the server and left the bad snapshot in snapshots/, after which it
// refused to start ("failed to load any existing snapshots").
func TestSnapshotRestoreRefusedEndToEnd(t *testing.T) {
	bin := buildServer(t)
	dataDir, addr, raftAddr := t.TempDir(), freeAddr(t), freeAddr(t)
	p := startServerProcess(t, bin, dataDir, addr, raftAddr)
	s, _ := e2eSession(t, addr)
	s.NoWait = true
	ctx := context.Background()
	run := func(s *Session, name string) {
		t.Helper()
		if err := s.RunWorkload(ctx, RunSpec{Name: name, Agent: "agent_A", Runtime: "podman", RuntimeConfig: "image: " + name}); err != nil {
			t.Fatal(err)
		}
	}
	run(s, "kept")
	cc, _, closeFn, err := client.DialCluster(ctx, client.Options{Addrs: []string{addr}, Insecure: true})
	if err != nil {
		t.Fatal(err)
	}
	defer closeFn()
	c := &Cluster{Client: cc, Out: &syncbuf.Buffer{}, Err: &syncbuf.Buffer{}}
	dir := t.TempDir()
	saved := filepath.Join(dir, "saved.snap")
	if err := c.SnapshotSave(ctx, saved); err != nil {
		t.Fatal(err)
	}
	good, err := os.ReadFile(saved)
	if err != nil {
		t.Fatal(err)
	}
	random := make([]byte, 2000)
	rng := rand.New(rand.NewPCG(7, 7))
	for i := range random {
		random[i] = byte(rng.Uint32())
	}
	for _, tc := range []struct {
		name, want string
		data       []byte
	}{
		{"random", "snapshot restore: not a valid Grapnel snapshot: bad magic", random},
		{"cut", "snapshot restore: not a valid Grapnel snapshot: truncated", good[:len(good)/2]},
	} {
		file := filepath.Join(dir, tc.name+".snap")
		if err := os.WriteFile(file, tc.data, 0o600); err != nil {
			t.Fatal(err)
		}
		err := c.SnapshotRestore(ctx, file)
		if status.Code(err) != codes.InvalidArgument || !errors.Is(rpc.FromStatus(err), errs.ErrBadSnapshot) ||
			!strings.Contains(err.Error(), tc.want) {
			t.Fatalf("restore of %s: %v; want InvalidArgument saying %q", tc.name, err, tc.want)
		}
	}
	if !p.running() {
		t.Fatal("the server exited after the refused restores")
	}
	entries, err := os.ReadDir(filepath.Join(dataDir, "snapshots"))
	if err != nil || len(entries) != 1 {
		t.Fatalf("snapshots directory: %d entries (%v), want only the saved one", len(entries), err)
	}
	run(s, "later")

	p.stop()
	p = startServerProcess(t, bin, dataDir, addr, raftAddr)
	s2, _ := e2eSession(t, addr)
	cs, err := s2.CompleteState(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	workloads, _ := cs["desiredState"].(map[string]any)["workloads"].(map[string]any)
	if workloads["kept"] == nil || workloads["later"] == nil {
		t.Fatalf("after a restart the server holds workloads %v", workloads)
	}
	if !p.running() || strings.Contains(p.logs.String(), "panic") {
		t.Fatalf("the restarted server stopped or panicked")
	}
}
