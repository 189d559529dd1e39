package bench

import (
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"
)

// A process started with a timer slack runs with it, as under
// TimerSlackNSec=; the bench's own threads keep theirs.
func TestStartProcessWithTimerSlack(t *testing.T) {
	want := readSlack(t, "/proc/self/timerslack_ns") + 3*time.Millisecond
	p, err := StartProcessWith("sleeper", "sleep", []string{"30"}, filepath.Join(t.TempDir(), "log"), want)
	if err != nil {
		t.Fatal(err)
	}
	defer p.Kill()
	if got := readSlack(t, "/proc/"+strconv.Itoa(p.Pid())+"/timerslack_ns"); got != want {
		t.Errorf("the child's timer slack is %v, want %v", got, want)
	}
	if got := readSlack(t, "/proc/self/timerslack_ns"); got == want {
		t.Errorf("the bench's main thread took the child's timer slack %v", got)
	}
}

func readSlack(t *testing.T, path string) time.Duration {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Skipf("no timer slack to read: %v", err)
	}
	ns, err := strconv.ParseInt(strings.TrimSpace(string(b)), 10, 64)
	if err != nil {
		t.Fatal(err)
	}
	return time.Duration(ns)
}
