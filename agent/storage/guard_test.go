package storage

import (
	"bytes"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/grapnel-io/grapnel/internal/clock"
	"github.com/grapnel-io/grapnel/internal/durable"
	"github.com/grapnel-io/grapnel/internal/testwait"
)

// syncBuf is a log sink read while the guard writes it.
type syncBuf struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuf) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuf) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// Requirement (issue 29 point 3, agents): only a failure of the run
// folder's storage is a fault. A missing file, a refused permission, a
// full disk elsewhere or an error that lost its errno is the caller's
// business, and comes back as it was.
func TestCheckTellsStorageFailuresFromOthers(t *testing.T) {
	dir := t.TempDir()
	in := filepath.Join(dir, "agent_A_io", "w.1.agent_A", "process", "spec.json")
	tests := []struct {
		name string
		err  error
		want bool
	}{
		{"a durable write that found the disk full", &durable.Error{Op: "replace", Path: in, Step: "create a temporary file", Err: syscall.ENOSPC}, true},
		{"a removal on a read-only file system", &fs.PathError{Op: "unlinkat", Path: in, Err: syscall.EROFS}, true},
		{"an fsync that failed, wrapped by the runtime", fmt.Errorf("process runtime: writing the record: %w", &durable.Error{Op: "replace", Path: in, Step: "fsync", Err: syscall.EIO}), true},
		{"a quota", &fs.PathError{Op: "write", Path: in, Err: syscall.EDQUOT}, true},
		{"a file size limit", &fs.PathError{Op: "write", Path: in, Err: syscall.EFBIG}, true},
		{"an errno without a file", fmt.Errorf("mkfifo: %w", syscall.ENOSPC), true},
		{"the run folder itself", &fs.PathError{Op: "mkdir", Path: dir, Err: syscall.EROFS}, true},
		{"a full disk elsewhere", &fs.PathError{Op: "open", Path: "/var/log/x", Err: syscall.ENOSPC}, false},
		{"a sibling of the run folder", &fs.PathError{Op: "open", Path: dir + "-other/x", Err: syscall.ENOSPC}, false},
		{"a missing file", &fs.PathError{Op: "open", Path: in, Err: syscall.ENOENT}, false},
		{"a refused permission", &fs.PathError{Op: "open", Path: in, Err: syscall.EACCES}, false},
		{"the errno lost to text", fmt.Errorf("recording: %v", &fs.PathError{Op: "open", Path: in, Err: syscall.ENOSPC}), false},
		{"no error", nil, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			g := New(Config{Dir: dir, Logger: slog.New(slog.NewTextHandler(&syncBuf{}, nil)), Clock: clock.NewFake(time.Unix(0, 0)),
				Probe: func(string) error { return syscall.EROFS }})
			defer g.Close()
			if got := g.IsFailure(tt.err); got != tt.want {
				t.Fatalf("IsFailure(%v) = %v, want %v", tt.err, got, tt.want)
			}
			got := g.Check(tt.err)
			if !tt.want {
				if got != tt.err || g.Fault() != nil {
					t.Fatalf("Check(%v) = %v with fault %v; want the error as it was and no fault", tt.err, got, g.Fault())
				}
				return
			}
			var se *Error
			if !errors.As(got, &se) || !errors.Is(got, ErrFailed) || !errors.Is(got, tt.err) || se.Dir != dir {
				t.Fatalf("Check(%v) = %v; want an *Error of %s wrapping ErrFailed and the error", tt.err, got, dir)
			}
			if !strings.HasPrefix(got.Error(), "run folder "+dir+" failed: ") {
				t.Fatalf("the error does not name the run folder: %q", got)
			}
			if g.Fault() == nil {
				t.Fatal("no fault recorded")
			}
		})
	}
}

// guardHarness is a Guard on a fake clock whose probe the test answers.
type guardHarness struct {
	t   *testing.T
	g   *Guard
	clk *clock.Fake
	log *syncBuf

	mu     sync.Mutex
	probes int
	probe  error // what the next probes return
}

func newGuardHarness(t *testing.T) *guardHarness {
	h := &guardHarness{t: t, clk: clock.NewFake(time.Unix(1_700_000_000, 0)), log: &syncBuf{}, probe: syscall.ENOSPC}
	h.g = New(Config{Dir: t.TempDir(), Logger: slog.New(slog.NewTextHandler(h.log, nil)), Clock: h.clk,
		ProbeMin: time.Second, ProbeMax: 4 * time.Second, Probe: func(string) error {
			h.mu.Lock()
			defer h.mu.Unlock()
			h.probes++
			return h.probe
		}})
	t.Cleanup(h.g.Close)
	return h
}

func (h *guardHarness) setProbe(err error) {
	h.mu.Lock()
	h.probe = err
	h.mu.Unlock()
}

func (h *guardHarness) probeCount() int {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.probes
}

// next waits until the probe loop armed its timer, checks that it is due
// in want, and fires it.
func (h *guardHarness) next(want time.Duration) {
	h.t.Helper()
	testwait.For(h.t, 5*time.Second, func() bool { return h.clk.Pending() == 1 }, "the probe loop to arm its timer")
	at, _ := h.clk.Next()
	if got := at.Sub(h.clk.Now()); got != want {
		h.t.Fatalf("next probe in %v, want %v", got, want)
	}
	n := h.probeCount()
	h.clk.Advance(want)
	testwait.For(h.t, 5*time.Second, func() bool { return h.probeCount() == n+1 }, "probe %d", n+1)
}

// Requirement (issue 29 point 3, agents): the first failure is the fault,
// logged once at ERROR and signalled; the run folder is probed with a
// backoff that doubles up to its cap; the writes that failed are made
// again, whole, before the fault is cleared, and one that fails again
// keeps the run folder failed; once everything works the waiters wake.
func TestGuardKeepsTheFirstFaultProbesAndResumes(t *testing.T) {
	h := newGuardHarness(t)
	g := h.g
	changes, cancel := g.Changes()
	defer cancel()
	if healed, err := g.Failed(); err != nil || !isClosed(healed) {
		t.Fatalf("a new guard is failed: %v", err)
	}
	first := &durable.Error{Op: "replace", Path: filepath.Join(g.Dir(), "workload-uids.json"), Step: "create a temporary file", Err: syscall.ENOSPC}
	g.Check(first)
	g.Check(&fs.PathError{Op: "unlinkat", Path: filepath.Join(g.Dir(), "x"), Err: syscall.EROFS})
	healed, failed := g.Failed()
	if !errors.Is(failed, syscall.ENOSPC) || isClosed(healed) {
		t.Fatalf("Failed() = %v, healed %v; want the first fault (ENOSPC) and an open channel", failed, isClosed(healed))
	}
	if got, want := g.Short(), "replace workload-uids.json: no space left on device"; got != want {
		t.Fatalf("Short() = %q, want %q", got, want)
	}
	expectSignal(t, changes, "the fault")
	if n := strings.Count(h.log.String(), "level=ERROR"); n != 1 {
		t.Fatalf("%d ERROR lines for two failures, want 1:\n%s", n, h.log.String())
	}

	// Backoff: 1 s, 2 s, 4 s, 4 s; the still-failing probe is logged
	// once while its error stays the same.
	h.next(time.Second)
	h.next(2 * time.Second)
	h.next(4 * time.Second)
	h.next(4 * time.Second)
	if n := strings.Count(h.log.String(), "run folder still fails"); n != 1 {
		t.Fatalf("%d lines for four failed probes with one error, want 1", n)
	}

	// The probe works, but a write to make again still fails: still
	// failed, and that write is made again after the next probe.
	var redos []string
	fail := true
	g.Redo("incarnation", func() error {
		redos = append(redos, "incarnation")
		if fail {
			fail = false
			return &fs.PathError{Op: "open", Path: filepath.Join(g.Dir(), "a.incarnation"), Err: syscall.EIO}
		}
		return nil
	})
	g.Redo("a first", func() error { redos = append(redos, "a first"); return nil })
	h.setProbe(nil)
	h.next(4 * time.Second)
	if _, err := g.Failed(); err == nil {
		t.Fatal("healed although a write to make again failed")
	}
	h.next(4 * time.Second)
	testwait.For(t, 5*time.Second, func() bool { return isClosed(healed) }, "the waiters to wake")
	if _, err := g.Failed(); err != nil || g.Short() != "" {
		t.Fatalf("after the heal: %v, %q", err, g.Short())
	}
	if want := "a first incarnation incarnation"; strings.Join(redos, " ") != want {
		t.Fatalf("writes made again: %v, want %s (in key order, the failed one again)", redos, want)
	}
	expectSignal(t, changes, "the heal")
	if n := h.clk.Pending(); n != 0 {
		t.Fatalf("%d timers armed after the heal: the probe loop did not end", n)
	}

	// Failing again at once: the backoff goes on where it was, so that a
	// run folder that flaps is not probed faster.
	h.setProbe(syscall.EROFS)
	g.Check(first)
	h.next(4 * time.Second)
	h.setProbe(nil)
	h.next(4 * time.Second)
	testwait.For(t, 5*time.Second, func() bool { return g.Fault() == nil }, "the second heal")
	// After working for ProbeMax it starts over.
	h.clk.Advance(4 * time.Second)
	g.Check(first)
	h.next(time.Second)
}

// Requirement: the guard sees the kernel refuse a write in the run folder
// through internal/durable, as the agent's own writes meet it: with the
// process's file size limit at 0 every write fails with EFBIG (Go ignores
// SIGXFSZ). DefaultProbe then fails too, and works once the limit is back.
func TestGuardSeesTheKernelRefuseAWrite(t *testing.T) {
	dir := t.TempDir()
	g := New(Config{Dir: dir, Logger: slog.New(slog.NewTextHandler(&syncBuf{}, nil)), Clock: clock.NewFake(time.Unix(0, 0))})
	defer g.Close()
	var old unix.Rlimit
	if err := unix.Getrlimit(unix.RLIMIT_FSIZE, &old); err != nil {
		t.Fatal(err)
	}
	limited := old
	limited.Cur = 0
	if err := unix.Setrlimit(unix.RLIMIT_FSIZE, &limited); err != nil {
		t.Fatal(err)
	}
	werr := durable.WriteFile(filepath.Join(dir, "workload-uids.json"), []byte("{}\n"), 0o600)
	perr := DefaultProbe(dir)
	if err := unix.Setrlimit(unix.RLIMIT_FSIZE, &old); err != nil {
		t.Fatal(err)
	}
	err := g.Check(werr)
	if !errors.Is(err, ErrFailed) || !errors.Is(err, syscall.EFBIG) {
		t.Fatalf("a write under RLIMIT_FSIZE 0: %v, want ErrFailed and EFBIG", err)
	}
	if f := g.Fault(); f == nil || f.Path != "workload-uids.json" || f.Cause() != syscall.EFBIG.Error() {
		t.Fatalf("fault %+v, want workload-uids.json and EFBIG", f)
	}
	if !g.IsFailure(perr) {
		t.Fatalf("the probe under the limit: %v, want a failure of the storage", perr)
	}
	if err := DefaultProbe(dir); err != nil {
		t.Fatalf("the probe once the limit is back: %v", err)
	}
	if left, _ := filepath.Glob(filepath.Join(dir, ".*")); len(left) > 0 {
		t.Fatalf("files left in the run folder: %v", left)
	}
	// A run folder that is not there is made by the probe.
	missing := filepath.Join(dir, "gone", "run")
	if err := DefaultProbe(missing); err != nil {
		t.Fatalf("probe of a missing run folder: %v", err)
	}
	if fi, err := os.Stat(missing); err != nil || !fi.IsDir() {
		t.Fatalf("the probe did not make the run folder: %v", err)
	}
}

// A nil guard, as the workload Manager has without one, passes errors
// through and is never failed.
func TestNilGuard(t *testing.T) {
	var g *Guard
	err := &fs.PathError{Op: "open", Path: "/x", Err: syscall.ENOSPC}
	if g.Check(err) != err || g.IsFailure(err) || g.Fault() != nil || g.Short() != "" {
		t.Fatal("a nil guard changed an error or has a fault")
	}
	if healed, f := g.Failed(); f != nil || !isClosed(healed) {
		t.Fatal("a nil guard is failed")
	}
	g.Close()
}

func TestTruncate(t *testing.T) {
	if got := Truncate("abc", 3); got != "abc" {
		t.Fatalf("%q", got)
	}
	long := strings.Repeat("é", 100) // 200 bytes
	got := Truncate(long, MaxFaultLen)
	if len(got) > MaxFaultLen || !strings.HasSuffix(got, "…") || !strings.HasPrefix(long, strings.TrimSuffix(got, "…")) {
		t.Fatalf("Truncate: %q (%d bytes)", got, len(got))
	}
}

func isClosed(ch <-chan struct{}) bool {
	select {
	case <-ch:
		return true
	default:
		return false
	}
}

func expectSignal(t *testing.T, ch <-chan struct{}, what string) {
	t.Helper()
	select {
	case <-ch:
	case <-time.After(5 * time.Second):
		t.Fatalf("no change signalled for %s", what)
	}
}
