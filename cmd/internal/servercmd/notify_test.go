package servercmd

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/grapnel-io/grapnel/chaos/bench"
	"github.com/grapnel-io/grapnel/internal/sdnotify/sdnotifytest"
	"github.com/grapnel-io/grapnel/internal/syncbuf"
	"github.com/grapnel-io/grapnel/internal/testwait"
)

func indexOf(msgs []string, msg string) int {
	for i, m := range msgs {
		if m == msg {
			return i
		}
	}
	return -1
}

// The replica run as systemd runs a Type=notify unit with WatchdogSec:
// STATUS=follower first, READY=1 once it serves, STATUS=leader once the
// lone replica elects itself (a STATUS line only when it changes),
// WATCHDOG=1 while its loop answers, STOPPING=1 on SIGTERM.
func TestSystemdNotifyMessages(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and runs grapnel-server")
	}
	bin := e2eBuild(t, "grapnel-server")["grapnel-server"]
	ns := sdnotifytest.Listen(t)
	dir := t.TempDir()
	ports, err := bench.FreeAddrs(2)
	if err != nil {
		t.Fatal(err)
	}
	addr, raft := ports[0], ports[1]
	cmd, exited, _ := runServer(t, bin, []string{"NOTIFY_SOCKET=" + ns.Path, "WATCHDOG_USEC=1000000"},
		"-k", "--name", "n1", "-a", addr, "--raft-address", raft, "--data-dir", filepath.Join(dir, "data"))
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("messages: %q", ns.Messages())
		}
	})
	testwait.For(t, 20*time.Second, func() bool { return ns.Count("WATCHDOG=1") >= 2 }, "two WATCHDOG=1")
	msgs := ns.Messages()
	ready, follower, leader := indexOf(msgs, "READY=1"), indexOf(msgs, "STATUS=follower"), indexOf(msgs, "STATUS=leader")
	if ready < 0 || follower < 0 || leader < 0 {
		t.Fatalf("want READY=1, STATUS=follower and STATUS=leader in %q", msgs)
	}
	if follower > ready {
		t.Errorf("STATUS=follower after READY=1: %q", msgs)
	}
	if c := ns.Count("READY=1"); c != 1 {
		t.Errorf("READY=1 sent %d times", c)
	}
	terminate(t, cmd, exited)
	msgs = ns.Messages()
	if indexOf(msgs, "STOPPING=1") < 0 {
		t.Fatalf("no STOPPING=1 in %q", msgs)
	}
	last := ""
	for _, m := range msgs {
		if !strings.HasPrefix(m, "STATUS=") {
			continue
		}
		if m == last {
			t.Errorf("%s sent twice in a row: STATUS only on change: %q", m, msgs)
		}
		last = m
	}
}

// runServer starts grapnel-server bin with args and env added to this
// process's, its output collected (readable while it runs). The process
// is killed at the end of the test, which logs the output if it failed;
// exited receives its exit (terminate puts it back).
func runServer(t *testing.T, bin string, env []string, args ...string) (*exec.Cmd, chan error, *syncbuf.Buffer) {
	t.Helper()
	cmd := exec.Command(bin, args...)
	cmd.Env = append(os.Environ(), env...)
	out := &syncbuf.Buffer{}
	cmd.Stdout, cmd.Stderr = out, out
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	exited := make(chan error, 1)
	go func() { exited <- cmd.Wait() }()
	t.Cleanup(func() {
		_ = cmd.Process.Kill()
		<-exited
		if t.Failed() {
			t.Logf("server output:\n%s", out.String())
		}
	})
	return cmd, exited, out
}

// terminate sends SIGTERM to the server cmd runs and waits up to 20 s for
// its exit on exited, which it puts back for later readers; a non-zero
// exit is an error.
func terminate(t *testing.T, cmd *exec.Cmd, exited chan error) {
	t.Helper()
	if err := cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	select {
	case err := <-exited:
		exited <- err
		if err != nil {
			t.Errorf("exit after SIGTERM: %v", err)
		}
	case <-time.After(20 * time.Second):
		t.Fatal("no exit 20 s after SIGTERM")
	}
}
