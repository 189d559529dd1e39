package servercmd

import (
	"context"
	"io"
	"net/http"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/grapnel-io/grapnel/chaos/bench"
	"github.com/grapnel-io/grapnel/internal/sdnotify/sdnotifytest"
	"github.com/grapnel-io/grapnel/internal/testwait"
)

// setFileSizeLimit sets the RLIMIT_FSIZE soft limit of process pid and
// returns the limit it had.
func setFileSizeLimit(t *testing.T, pid int, cur uint64) unix.Rlimit {
	t.Helper()
	var old unix.Rlimit
	if err := unix.Prlimit(pid, unix.RLIMIT_FSIZE, nil, &old); err != nil {
		t.Fatal(err)
	}
	limit := old
	limit.Cur = cur
	if err := unix.Prlimit(pid, unix.RLIMIT_FSIZE, &limit, nil); err != nil {
		t.Fatal(err)
	}
	return old
}

// Requirement (issue 29 point 3), with the real binary: a replica whose
// storage refuses every write keeps running (no crash loop), says why in
// its log, in systemd STATUS and in /metrics, and once the storage works
// again executes itself in place (same process id, READY=1 again),
// reopens its data directory and serves what was committed before.
//
// The storage is failed from outside, by the kernel: the replica's
// RLIMIT_FSIZE soft limit set to 0 with prlimit(2) makes every write of
// the process fail with EFBIG ("file too large"; Go ignores the
// SIGXFSZ), and putting the limit back heals it. No root, no mount and no
// test hook in the binary are needed. The replica's log goes to a pipe
// (a regular file would refuse the log lines too).
func TestStorageFailureAndRestartInPlace(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and runs grapnel-server and grapnel")
	}
	bins := e2eBuild(t, "grapnel-server", "grapnel")
	ns := sdnotifytest.Listen(t)
	dir := t.TempDir()
	ports, err := bench.FreeAddrs(3)
	if err != nil {
		t.Fatal(err)
	}
	addr, raft, metricsAddr := ports[0], ports[1], ports[2]
	cmd, exited, out := runServer(t, bins["grapnel-server"], []string{"NOTIFY_SOCKET=" + ns.Path},
		"-k", "--name", "n1", "-a", addr, "--raft-address", raft,
		"--data-dir", filepath.Join(dir, "data"), "--metrics-address", metricsAddr, "--log-level", "info")
	pid := cmd.Process.Pid
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("messages: %q", ns.Messages())
		}
	})
	alive := func() {
		t.Helper()
		select {
		case err := <-exited:
			exited <- err
			t.Fatalf("grapnel-server exited: %v", err)
		default:
		}
	}
	statusWith := func(parts ...string) func() bool {
		return func() bool {
			for _, m := range ns.Messages() {
				ok := strings.HasPrefix(m, "STATUS=")
				for _, p := range parts {
					ok = ok && strings.Contains(m, p)
				}
				if ok {
					return true
				}
			}
			return false
		}
	}
	metric := func() string {
		resp, err := http.Get("http://" + metricsAddr + "/metrics")
		if err != nil {
			return ""
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return string(b)
	}
	cli := bins["grapnel"]
	addrs := []string{addr}
	testwait.For(t, 20*time.Second, statusWith("leader"), "STATUS=leader")
	e2eCLI(t, cli, addrs, "apply", e2eManifest(t, dir, "before.yaml", map[string]string{"before": "nginx"}))

	old := setFileSizeLimit(t, pid, 0)
	restored := false
	defer func() {
		if !restored {
			setFileSizeLimit(t, pid, old.Cur)
		}
	}()
	// The leader cannot store this entry; the CLI is answered with an
	// error (the server answers a proposal of a term that ended with
	// "not the leader").
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	during := exec.CommandContext(ctx, cli, "-k", "--no-wait", "--server-url", addr, "apply", e2eManifest(t, dir, "during.yaml", map[string]string{"during": "redis"}))
	duringOut, duringErr := during.CombinedOutput()
	cancel()
	if duringErr == nil {
		t.Fatalf("apply while the storage refuses every write succeeded: %s", duringOut)
	}
	testwait.For(t, 20*time.Second, statusWith("storage failed: append log entries", "file too large", "stepped down"), "STATUS naming the storage fault")
	testwait.For(t, 20*time.Second, func() bool { return strings.Contains(out.String(), "storage still fails") }, "a failed probe in the log")
	alive()
	log := out.String()
	if !strings.Contains(log, `level=ERROR msg="storage failed: this replica stores no more entries`) || !strings.Contains(log, "component=cluster") || !strings.Contains(log, "file too large") {
		t.Fatalf("the log does not say why the storage failed:\n%s", log)
	}
	if m := metric(); !strings.Contains(m, `grapnel_storage_failed{replica="n1"} 1`) || !strings.Contains(m, "grapnel_storage_errors_total") {
		t.Fatalf("/metrics does not show the fault:\n%s", m)
	}

	setFileSizeLimit(t, pid, old.Cur)
	restored = true
	testwait.For(t, 30*time.Second, func() bool {
		return ns.Count("READY=1") == 2 && strings.Count(out.String(), "grapnel-server started") == 2
	}, "the replica executed itself again and is ready")
	alive()
	if !strings.Contains(out.String(), "executing /proc/self/exe") || !statusWith("restarting in place")() {
		t.Fatalf("no restart in place in the log or STATUS: %q", ns.Messages())
	}
	if p := cmd.Process.Pid; p != pid {
		t.Fatalf("process id %d, want %d", p, pid)
	}
	// The new run's STATUS=leader may come before or after its READY=1.
	testwait.For(t, 20*time.Second, func() bool {
		got := ns.Messages()
		restart := slices.IndexFunc(got, func(m string) bool { return strings.Contains(m, "restarting in place") })
		return restart >= 0 && slices.Contains(got[restart:], "STATUS=leader")
	}, "STATUS=leader after the restart")
	e2eExpect(t, "after the restart in place", e2eWorkloads(t, cli, addrs), map[string]string{"before": "nginx"})
	e2eCLI(t, cli, addrs, "apply", e2eManifest(t, dir, "after.yaml", map[string]string{"after": "postgres"}))
	e2eExpect(t, "after the restart in place", e2eWorkloads(t, cli, addrs), map[string]string{"before": "nginx", "after": "postgres"})
	if m := metric(); !strings.Contains(m, `grapnel_storage_failed{replica="n1"} 0`) {
		t.Fatalf("/metrics after the restart:\n%s", m)
	}
	terminate(t, cmd, exited)
}
