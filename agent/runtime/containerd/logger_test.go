package containerd

import (
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"github.com/grapnel-io/grapnel/agent/runtime/linelog"
)

// The shim sends the logger SIGTERM when the task is deleted, possibly
// before the logger has read the end of the pipes: the logger keeps
// draining, so a last line without a newline is still logged. (Dying at
// the signal lost it: TestLogs failed one run in four.)
func TestLoggerDrainsAfterSIGTERM(t *testing.T) {
	path := filepath.Join(t.TempDir(), "run", "out.log")
	outR, outW := pipe(t)
	errR, errW := pipe(t)
	readyR, readyW := pipe(t)
	cmd := exec.Command(os.Args[0], loggerArg, path) // TestMain runs the logger
	cmd.ExtraFiles = []*os.File{outR, errR, readyW}
	cmd.Stderr = os.Stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	outR.Close()
	errR.Close()
	readyW.Close()
	// The logger closes fd 5 once it holds the log and handles SIGTERM,
	// as the shim waits for before it starts the task.
	if _, err := io.Copy(io.Discard, readyR); err != nil {
		t.Fatal(err)
	}
	if _, err := io.WriteString(outW, "line\n"); err != nil {
		t.Fatal(err)
	}
	if err := cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	if _, err := io.WriteString(outW, "partial"); err != nil {
		t.Fatal(err)
	}
	outW.Close()
	errW.Close()
	if err := cmd.Wait(); err != nil {
		t.Fatalf("logger after SIGTERM: %v", err)
	}
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, line := range strings.SplitAfter(string(b), "\n") {
		if line == "" {
			continue
		}
		_, text, ok := linelog.ParseLine([]byte(line))
		if !ok {
			t.Fatalf("log line %q is not in the log format", line)
		}
		got = append(got, string(text))
	}
	if strings.Join(got, "|") != "line|partial" {
		t.Fatalf("logged %q, want line and partial", got)
	}
}

func pipe(t *testing.T) (r, w *os.File) {
	t.Helper()
	r, w, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { r.Close(); w.Close() })
	return r, w
}
