package bench

import (
	"flag"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/grapnel-io/grapnel/internal/testwait"
)

// TestStopEndsAFrozenProcess: a frozen process gets SIGCONT with its
// SIGTERM, so it ends by the SIGTERM, not by the SIGKILL after the grace.
func TestStopEndsAFrozenProcess(t *testing.T) {
	p := frozenSleeper(t)
	err := p.StopWithin(5 * time.Second)
	if err == nil || !strings.Contains(err.Error(), "stopped with SIGTERM, ended with signal: terminated") {
		t.Fatalf("StopWithin of a frozen process: %v, want it ended by the SIGTERM", err)
	}
}

// TestFreezeAndThaw: Freeze stops the process (state T), Thaw lets it run.
func TestFreezeAndThaw(t *testing.T) {
	p := frozenSleeper(t)
	if err := p.Thaw(); err != nil {
		t.Fatal(err)
	}
	waitState(t, p.Pid(), 'S')
}

// frozenSleeper starts a sleep(1) process and freezes it (state T),
// killed when the test ends.
func frozenSleeper(t *testing.T) *Process {
	t.Helper()
	if runtime.GOOS != "linux" {
		t.Skip("process groups and /proc are Linux's")
	}
	sleep, err := exec.LookPath("sleep")
	if err != nil {
		t.Skip("no sleep binary")
	}
	p, err := StartProcess("sleeper", sleep, []string{"600"}, filepath.Join(t.TempDir(), "sleeper.log"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(p.Kill)
	if err := p.Freeze(); err != nil {
		t.Fatal(err)
	}
	waitState(t, p.Pid(), 'T')
	return p
}

// waitState waits until process pid is in state want (/proc/PID/stat).
func waitState(t *testing.T, pid int, want byte) {
	t.Helper()
	var got byte
	testwait.For(t, 10*time.Second, func() bool {
		st, err := procState(pid)
		got = st
		return err == nil && st == want
	}, "pid %d in state %c (last seen %q)", pid, want, testwait.Lazy(func() string { return string(got) }))
}

// procState is the state letter of process pid from /proc/PID/stat, the
// field after the command name (which may itself hold spaces and
// parentheses, hence the last one).
func procState(pid int) (byte, error) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return 0, err
	}
	s := string(b)
	i := strings.LastIndexByte(s, ')')
	if i < 0 || i+2 >= len(s) {
		return 0, fmt.Errorf("/proc/%d/stat: no state in %q", pid, s)
	}
	return s[i+2], nil
}

// TestChildren: the processes this test starts are listed as its
// children, and one that ended is not.
func TestChildren(t *testing.T) {
	var started []int
	for range 2 {
		c := exec.Command("sleep", "60")
		if err := c.Start(); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = c.Process.Kill(); _ = c.Wait() })
		started = append(started, c.Process.Pid)
	}
	ended := exec.Command("true")
	if err := ended.Run(); err != nil {
		t.Fatal(err)
	}
	got, err := Children(os.Getpid())
	if err != nil {
		t.Fatal(err)
	}
	for _, pid := range started {
		if !slices.Contains(got, pid) {
			t.Errorf("children %v lack %d", got, pid)
		}
	}
	if slices.Contains(got, ended.Process.Pid) {
		t.Errorf("children %v hold %d, which ended", got, ended.Process.Pid)
	}
}

// The benches' -replica-timer-slack: the unit's slack by default, any
// duration from 0 up, never a negative one.
func TestTimerSlackFlag(t *testing.T) {
	for _, c := range []struct {
		args []string
		want time.Duration
		ok   bool
	}{{nil, UnitTimerSlack, true}, {[]string{"-replica-timer-slack", "0"}, 0, true},
		{[]string{"-replica-timer-slack", "4ms"}, 4 * time.Millisecond, true}, {[]string{"-replica-timer-slack", "-1ms"}, 0, false}} {
		fs := flag.NewFlagSet("bench", flag.ContinueOnError)
		fs.SetOutput(io.Discard)
		var got time.Duration
		TimerSlackFlag(fs, &got)
		err := fs.Parse(c.args)
		if (err == nil) != c.ok || c.ok && got != c.want {
			t.Errorf("%q: %v, %v; want %v, accepted %t", c.args, got, err, c.want, c.ok)
		}
	}
}
