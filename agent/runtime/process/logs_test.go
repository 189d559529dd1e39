package process

import (
	"context"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/grapnel-io/grapnel/agent/runtime"
	"github.com/grapnel-io/grapnel/internal/syncbuf"
	"github.com/grapnel-io/grapnel/internal/testwait"
	"github.com/grapnel-io/grapnel/state"
)

// writeRecord lays down the record of an ended instance whose log holds
// line1..line5 written one second apart from t0.
func writeRecord(t *testing.T, h *harness, t0 time.Time) runtime.ID {
	t.Helper()
	s := h.spec("written", "command: true")
	id := runtime.ID(s.Instance.String())
	dir, _ := h.rt.recordDir(id)
	if err := os.MkdirAll(dir, 0o700); err != nil {
		t.Fatal(err)
	}
	if err := writeJSON(filepath.Join(dir, specFile), specRecord{Instance: string(id), Command: "true"}); err != nil {
		t.Fatal(err)
	}
	if err := writeJSON(filepath.Join(dir, exitFile), exitRecord{}); err != nil {
		t.Fatal(err)
	}
	var b strings.Builder
	for i := 1; i <= 5; i++ {
		stream := "stdout"
		if i == 3 {
			stream = "stderr"
		}
		fmt.Fprintf(&b, "%s %s line%d\n", t0.Add(time.Duration(i)*time.Second).Format(time.RFC3339Nano), stream, i)
		if i == 4 {
			b.WriteString("garbage without a timestamp\n")
		}
	}
	b.WriteString(t0.Format(time.RFC3339Nano) + " stdout half a li") // being written
	if err := os.WriteFile(filepath.Join(dir, logFile), []byte(b.String()), 0o600); err != nil {
		t.Fatal(err)
	}
	return id
}

func TestLogsSelect(t *testing.T) {
	t.Parallel()
	h := newHarness(t, Config{})
	t0 := time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)
	id := writeRecord(t, h, t0)
	at := func(s int) time.Time { return t0.Add(time.Duration(s) * time.Second) }
	tests := []struct {
		name string
		o    runtime.LogOptions
		want string
	}{
		{"all", runtime.LogOptions{Tail: -1}, "line1\nline2\nline3\nline4\nline5\n"},
		{"tail 2", runtime.LogOptions{Tail: 2}, "line4\nline5\n"},
		{"tail 0", runtime.LogOptions{Tail: 0}, ""},
		{"tail beyond", runtime.LogOptions{Tail: 50}, "line1\nline2\nline3\nline4\nline5\n"},
		{"since", runtime.LogOptions{Tail: -1, Since: at(3)}, "line3\nline4\nline5\n"},
		{"until", runtime.LogOptions{Tail: -1, Until: at(2)}, "line1\nline2\n"},
		{"since and until", runtime.LogOptions{Tail: -1, Since: at(2), Until: at(4)}, "line2\nline3\nline4\n"},
		{"tail after since", runtime.LogOptions{Tail: 1, Since: at(1), Until: at(3)}, "line3\n"},
		{"nothing in range", runtime.LogOptions{Tail: -1, Since: at(10)}, ""},
		// The instance has ended, so following ends after the log.
		{"follow ended", runtime.LogOptions{Tail: 1, Follow: true}, "line5\n"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			h := h.with(t) // fail this subtest, not its parent
			if got := h.logs(id, tt.o); got != tt.want {
				t.Fatalf("got %q, want %q", got, tt.want)
			}
		})
	}
}

func TestLogsOfRealWorkload(t *testing.T) {
	t.Parallel()
	h := newHarness(t, Config{})
	id := h.create(h.spec("talker", `command: sh
args: ['-c', 'echo out1; echo err1 >&2; echo out2; printf "no newline"']`))
	h.waitState(id, state.SucceededOk)
	got := h.logs(id, runtime.LogOptions{Tail: -1})
	lines := strings.Split(strings.TrimSuffix(got, "\n"), "\n")
	// stdout and stderr are read separately, so only each stream's own
	// order is fixed.
	var out []string
	hasErr := false
	for _, l := range lines {
		if l == "err1" {
			hasErr = true
		} else {
			out = append(out, l)
		}
	}
	if !hasErr || strings.Join(out, ",") != "out1,out2,no newline" || !strings.HasSuffix(got, "\n") {
		t.Fatalf("log %q", got)
	}
	if got := h.logs(id, runtime.LogOptions{Tail: 1}); got != lines[len(lines)-1]+"\n" {
		t.Fatalf("tail 1: %q of %q", got, lines)
	}
	if _, err := h.rt.Logs(context.Background(), "nobody.abc.agentA", runtime.LogOptions{}); !isNotFound(err) {
		t.Fatalf("Logs of an unknown instance: %v", err)
	}
}

func TestLogsSplitsLongLines(t *testing.T) {
	t.Parallel()
	h := newHarness(t, Config{})
	const n = 150000
	id := h.create(h.spec("long", fmt.Sprintf(`command: sh
args: ['-c', 'head -c %d /dev/zero | tr "\0" a; echo']`, n)))
	h.waitState(id, state.SucceededOk)
	got := h.logs(id, runtime.LogOptions{Tail: -1})
	lines := strings.Split(strings.TrimSuffix(got, "\n"), "\n")
	if len(lines) < 3 || strings.Join(lines, "") != strings.Repeat("a", n) {
		t.Fatalf("%d lines, %d bytes", len(lines), len(got))
	}
	for _, l := range lines {
		if len(l) > maxLine {
			t.Fatalf("line of %d bytes", len(l))
		}
	}
}

func TestLogsFollowEndsWithProcess(t *testing.T) {
	t.Parallel()
	h := newHarness(t, Config{})
	id := h.create(h.spec("slow", `command: sh
args: ['-c', 'echo a; sleep 0.3; echo b; sleep 0.3; echo c']`))
	rc, err := h.rt.Logs(context.Background(), id, runtime.LogOptions{Tail: -1, Follow: true})
	if err != nil {
		t.Fatal(err)
	}
	defer rc.Close()
	got, err := io.ReadAll(rc)
	if err != nil {
		t.Fatal(err)
	}
	if string(got) != "a\nb\nc\n" {
		t.Fatalf("followed %q", got)
	}
	if st := h.state(id); st != state.SucceededOk {
		t.Fatalf("follow ended while the workload is %v", st)
	}
}

func TestLogsFollowStops(t *testing.T) {
	t.Parallel()
	h := newHarness(t, Config{})
	id := h.create(h.spec("forever", `command: sh
args: ['-c', 'echo one; echo two; while true; do sleep 0.05; echo tick; done']`))
	h.waitLog(id, "two\n")

	// readAll follows rc into a buffer the test can look at while it
	// reads, and sends the whole of it when the reader ends.
	readAll := func(rc io.ReadCloser) (*syncbuf.Buffer, chan string) {
		var buf syncbuf.Buffer
		done := make(chan string, 1)
		go func() {
			_, _ = io.Copy(&buf, rc)
			done <- buf.String()
		}()
		return &buf, done
	}
	wait := func(what string, done chan string) string {
		t.Helper()
		select {
		case s := <-done:
			return s
		case <-time.After(5 * time.Second):
			t.Fatalf("%s: the reader did not end", what)
			return ""
		}
	}

	t.Run("close", func(t *testing.T) {
		rc, err := h.rt.Logs(context.Background(), id, runtime.LogOptions{Tail: -1, Follow: true})
		if err != nil {
			t.Fatal(err)
		}
		buf, done := readAll(rc)
		testwait.For(t, 10*time.Second, func() bool { return strings.Contains(buf.String(), "tick\n") }, "a tick followed")
		rc.Close()
		if got := wait("Close", done); !strings.HasPrefix(got, "one\ntwo\n") {
			t.Fatalf("followed %q", got)
		}
	})
	t.Run("context", func(t *testing.T) {
		ctx, cancel := context.WithCancel(context.Background())
		rc, err := h.rt.Logs(ctx, id, runtime.LogOptions{Tail: 0, Follow: true})
		if err != nil {
			t.Fatal(err)
		}
		defer rc.Close()
		buf, done := readAll(rc)
		testwait.For(t, 10*time.Second, func() bool { return strings.Contains(buf.String(), "tick\n") }, "a tick followed")
		cancel()
		got := wait("cancel", done)
		if strings.Contains(got, "one") || !strings.Contains(got, "tick\n") {
			t.Fatalf("tail 0 then follow gave %q", got)
		}
	})
	t.Run("until", func(t *testing.T) {
		rc, err := h.rt.Logs(context.Background(), id, runtime.LogOptions{Tail: -1, Follow: true, Until: time.Now()})
		if err != nil {
			t.Fatal(err)
		}
		defer rc.Close()
		_, done := readAll(rc)
		if got := wait("until", done); !strings.HasPrefix(got, "one\ntwo\n") {
			t.Fatalf("followed %q", got)
		}
	})
	t.Run("delete", func(t *testing.T) {
		rc, err := h.rt.Logs(context.Background(), id, runtime.LogOptions{Tail: 1, Follow: true})
		if err != nil {
			t.Fatal(err)
		}
		defer rc.Close()
		_, done := readAll(rc)
		if err := h.rt.Delete(context.Background(), id); err != nil {
			t.Fatal(err)
		}
		wait("delete", done)
	})
}
