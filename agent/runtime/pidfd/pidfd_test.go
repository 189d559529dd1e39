package pidfd

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	goruntime "runtime"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/grapnel-io/grapnel/internal/testwait"
)

// bound is how long a test waits for an event that should come at once.
const bound = 10 * time.Second

func skipUnsupported(t *testing.T) {
	t.Helper()
	if !Supported() {
		t.Skip("no pidfd_open on this kernel")
	}
}

// start runs a command and reaps it when the test ends.
func start(t *testing.T, name string, args ...string) *exec.Cmd {
	t.Helper()
	cmd := exec.Command(name, args...)
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = cmd.Process.Kill()
		_ = cmd.Wait()
	})
	return cmd
}

func TestWaitReturnsOnExit(t *testing.T) {
	skipUnsupported(t)
	tests := []struct {
		name string
		args []string
		end  func(t *testing.T, cmd *exec.Cmd)
	}{
		{"exits", []string{"sh", "-c", "read x; exit 3"}, nil},
		{"killed", []string{"sleep", "60"}, func(t *testing.T, cmd *exec.Cmd) {
			if err := cmd.Process.Signal(syscall.SIGKILL); err != nil {
				t.Fatal(err)
			}
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			cmd := exec.Command(tt.args[0], tt.args[1:]...)
			stdin, err := cmd.StdinPipe()
			if err != nil {
				t.Fatal(err)
			}
			if err := cmd.Start(); err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { _ = cmd.Process.Kill(); _ = cmd.Wait() })
			p, err := Open(cmd.Process.Pid)
			if err != nil {
				t.Fatal(err)
			}
			if p.Exited() {
				t.Fatal("Exited before the process ended")
			}
			done := make(chan error, 1)
			go func() { done <- p.Wait(context.Background()) }()
			select {
			case err := <-done:
				t.Fatalf("Wait returned %v before the process ended", err)
			default:
			}
			if tt.end != nil {
				tt.end(t, cmd)
			} else {
				stdin.Close() // read gets EOF, the shell exits
			}
			select {
			case err := <-done:
				if err != nil {
					t.Fatalf("Wait: %v", err)
				}
			case <-time.After(bound):
				t.Fatal("Wait did not return after the exit")
			}
		})
	}
}

// A process that exited before Open, but is not reaped yet, is seen as
// exited at once.
func TestWaitOnZombie(t *testing.T) {
	skipUnsupported(t)
	cmd := start(t, "true")
	pid := cmd.Process.Pid
	testwait.For(t, bound, func() bool { return zombie(pid) }, "true to exit")
	p, err := Open(pid)
	if err != nil {
		t.Fatal(err)
	}
	if !p.Exited() {
		t.Fatal("a zombie is not Exited")
	}
	ctx, cancel := context.WithTimeout(context.Background(), bound)
	defer cancel()
	if err := p.Wait(ctx); err != nil {
		t.Fatalf("Wait on a zombie: %v", err)
	}
}

func zombie(pid int) bool {
	data, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return false
	}
	s := string(data)
	f := strings.Fields(s[strings.LastIndexByte(s, ')')+1:])
	return len(f) > 0 && f[0] == "Z"
}

func TestOpenGone(t *testing.T) {
	skipUnsupported(t)
	cmd := exec.Command("true")
	if err := cmd.Run(); err != nil {
		t.Fatal(err)
	}
	// Reaped: the pid names nothing (until the kernel hands it out again,
	// which takes a full turn of pid_max).
	if _, err := Open(cmd.Process.Pid); !errors.Is(err, ErrGone) {
		t.Fatalf("Open of a reaped pid: %v, want ErrGone", err)
	}
}

func TestWaitEndsWithContextAndClosesTheFD(t *testing.T) {
	skipUnsupported(t)
	cmd := start(t, "sleep", "60")
	before := openFDs(t)
	p, err := Open(cmd.Process.Pid)
	if err != nil {
		t.Fatal(err)
	}
	if openFDs(t) != before+1 {
		t.Fatalf("fds %d after Open, want %d", openFDs(t), before+1)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- p.Wait(ctx) }()
	cancel()
	select {
	case err := <-done:
		if !errors.Is(err, context.Canceled) {
			t.Fatalf("Wait: %v, want context.Canceled", err)
		}
	case <-time.After(bound):
		t.Fatal("Wait did not end with its context")
	}
	// The close that ends the wait may still be finishing on the
	// context's goroutine when Wait returns; it must happen, soon.
	testwait.For(t, bound, func() bool { return openFDs(t) == before },
		"%d fds after Wait (%v; more is a leaked pidfd)", before, testwait.Lazy(func() string { return fmt.Sprint(openFDs(t)) }))
	if err := p.Close(); err != nil {
		t.Fatalf("second Close: %v", err)
	}
}

// openFDs counts this process's pidfds. Only those: the runtime and
// the test framework open and close other descriptors at their own pace
// (a count of all of them once came out one high under load).
func openFDs(t *testing.T) int {
	t.Helper()
	es, err := os.ReadDir("/proc/self/fd")
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	for _, e := range es {
		if link, err := os.Readlink("/proc/self/fd/" + e.Name()); err == nil && link == "anon_inode:[pidfd]" {
			n++
		}
	}
	return n
}

// Waiting parks goroutines in the netpoller: many waits do not cost an
// OS thread each, as a blocking wait(2) would.
func TestNotifyHoldsNoThread(t *testing.T) {
	skipUnsupported(t)
	const n = 40
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	var cmds []*exec.Cmd
	var chans []<-chan struct{}
	before := threads(t)
	for range n {
		cmd := start(t, "sleep", "60")
		p, err := Open(cmd.Process.Pid)
		if err != nil {
			t.Fatal(err)
		}
		cmds = append(cmds, cmd)
		chans = append(chans, Notify(ctx, p))
	}
	goruntime.Gosched()
	if grown := threads(t) - before; grown >= n/2 {
		t.Fatalf("%d waits added %d threads", n, grown)
	}
	for _, c := range chans {
		select {
		case <-c:
			t.Fatal("Notify fired while the process runs")
		default:
		}
	}
	// One exit fires its own channel only.
	if err := cmds[0].Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	select {
	case <-chans[0]:
	case <-time.After(bound):
		t.Fatal("Notify did not fire after the exit")
	}
	select {
	case <-chans[1]:
		t.Fatal("another process's channel fired")
	default:
	}
}

func threads(t *testing.T) int {
	t.Helper()
	data, err := os.ReadFile("/proc/self/status")
	if err != nil {
		t.Fatal(err)
	}
	for _, line := range strings.Split(string(data), "\n") {
		if v, ok := strings.CutPrefix(line, "Threads:"); ok {
			n, err := strconv.Atoi(strings.TrimSpace(v))
			if err != nil {
				t.Fatal(err)
			}
			return n
		}
	}
	t.Fatal("no Threads in /proc/self/status")
	return 0
}

// Cancelling the context ends the goroutine and leaves the channel open.
func TestNotifyEndsWithContext(t *testing.T) {
	skipUnsupported(t)
	cmd := start(t, "sleep", "60")
	before := goruntime.NumGoroutine()
	p, err := Open(cmd.Process.Pid)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	ch := Notify(ctx, p)
	cancel()
	testwait.For(t, bound, func() bool { return goruntime.NumGoroutine() <= before },
		"%d goroutines (%v)", before, testwait.Lazy(func() string { return fmt.Sprint(goruntime.NumGoroutine()) }))
	select {
	case <-ch:
		t.Fatal("a cancelled Notify fired")
	default:
	}
}
