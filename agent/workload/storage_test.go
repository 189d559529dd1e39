package workload

import (
	"io"
	"io/fs"
	"log/slog"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/grapnel-io/grapnel/agent/runtime"
	"github.com/grapnel-io/grapnel/agent/storage"
	"github.com/grapnel-io/grapnel/internal/clock"
	"github.com/grapnel-io/grapnel/internal/testwait"
	"github.com/grapnel-io/grapnel/state"
)

// runFolder is a storage.Guard of the harness's run folder on a clock of
// its own, whose probe fails until heal.
type runFolder struct {
	g   *storage.Guard
	clk *clock.Fake

	mu     sync.Mutex
	healed bool
}

func withRunFolder(rf *runFolder) option {
	return func(h *harness, c *Config) {
		rf.clk = clock.NewFake(time.Unix(1_700_000_000, 0))
		rf.g = storage.New(storage.Config{Dir: c.RunFolder, Clock: rf.clk, Logger: slog.New(slog.NewTextHandler(io.Discard, nil)),
			ProbeMin: time.Second, ProbeMax: time.Second, Probe: func(string) error {
				rf.mu.Lock()
				defer rf.mu.Unlock()
				if rf.healed {
					return nil
				}
				return syscall.EROFS
			}})
		h.t.Cleanup(rf.g.Close)
		c.Storage = rf.g
	}
}

// heal makes the next probe work and fires it.
func (rf *runFolder) heal(t *testing.T) {
	t.Helper()
	rf.mu.Lock()
	rf.healed = true
	rf.mu.Unlock()
	testwait.For(t, waitWithin, func() bool { return rf.clk.Pending() == 1 }, "the probe timer")
	rf.clk.Advance(time.Second)
	testwait.For(t, waitWithin, func() bool { return rf.g.Fault() == nil }, "the run folder to work again")
}

// Requirement (issue 29 point 3, agents): a create that fails because the
// run folder's storage failed is not retried on the backoff, nor reported
// as a retry: the instance says that it waits for the run folder (which
// one, and the errno), nothing else is created there meanwhile, and once
// the run folder works again it is created at once.
func TestCreateWaitsForTheRunFolder(t *testing.T) {
	rf := &runFolder{}
	h := newHarness(t, withFakeClock(), withRunFolder(rf))
	full := &fs.PathError{Op: "open", Path: filepath.Join(h.run, "workload-uids.json"), Err: syscall.ENOSPC}
	h.rt.failCreate = func(s runtime.Spec, n int) error {
		if s.Instance.WorkloadName == "first" && n == 1 {
			return full
		}
		return nil
	}
	first, second := workload("first", "cfg"), workload("second", "cfg")
	h.m.Update([]Added{first}, nil)
	want := waitingForRunFolder(&storage.Error{Dir: h.run, Err: full}, "it starts")
	h.waitLast(first.Instance, want)
	if info := want.AdditionalInfo; !strings.Contains(info, "run folder "+h.run+" failed") || !strings.Contains(info, "no space left on device") {
		t.Fatalf("the state does not name the run folder and the errno: %q", info)
	}

	// Nothing is tried while it fails: no backoff timer, no second
	// create, and a workload added meanwhile waits too, untried.
	h.m.Update([]Added{second}, nil)
	h.waitLast(second.Instance, want)
	h.clk.Advance(time.Hour)
	h.clk.Advance(time.Hour)
	if n, m := h.rt.createCount(first.Instance), h.rt.createCount(second.Instance); n != 1 || m != 0 {
		t.Fatalf("%d and %d creates while the run folder failed, want 1 and 0", n, m)
	}
	for _, s := range h.rec.history(first.Instance) {
		if strings.HasPrefix(s.AdditionalInfo, "Retry") {
			t.Fatalf("a failure of the run folder was reported as a retry: %v", h.rec.history(first.Instance))
		}
	}

	rf.heal(t)
	h.waitLast(first.Instance, state.RunningOk)
	h.waitLast(second.Instance, state.RunningOk)
	if n := h.rt.createCount(first.Instance); n != 2 {
		t.Fatalf("%d creates, want 2", n)
	}
}

// Requirement (issue 29 point 3, agents): a delete whose runtime could
// not remove what it keeps of the instance (a read-only run folder) is
// Stopping(DeleteFailed) naming the run folder, is not retried on the
// backoff while the run folder fails, and completes once it works again.
func TestDeleteWaitsForTheRunFolder(t *testing.T) {
	rf := &runFolder{}
	h := newHarness(t, withFakeClock(), withRunFolder(rf))
	a := workload("svc", "cfg")
	h.m.Update([]Added{a}, nil)
	h.waitState(a.Instance, state.RunningOk)
	ro := &fs.PathError{Op: "unlinkat", Path: filepath.Join(h.run, testAgent+"_io", a.Instance.String(), "process", "shim.json"), Err: syscall.EROFS}
	h.rt.failDelete = func(id runtime.ID, n int) error {
		if n == 1 {
			return ro
		}
		return nil
	}
	h.m.Update(nil, []Deleted{{Instance: a.Instance}})
	want := state.ExecutionState{State: state.StateStopping, SubState: state.SubDeleteFailed,
		AdditionalInfo: (&storage.Error{Dir: h.run, Err: ro}).Error() + "; deleted once the run folder works again"}
	h.waitLast(a.Instance, want)
	h.clk.Advance(time.Hour)
	if n := h.rt.deleteCount(); n != 1 {
		t.Fatalf("%d deletes while the run folder failed, want 1", n)
	}
	rf.heal(t)
	h.waitLast(a.Instance, state.Removed)
	if n := h.rt.deleteCount(); n != 2 {
		t.Fatalf("%d deletes, want 2", n)
	}
}

// A failure of the run folder's storage is never a permanent one, even
// where the same step's other errors are: a workload file that cannot be
// written is Pending(StartingFailed) for good, unless the storage is what
// failed. The kernel refuses the write here: with the process's file size
// limit at 0 every write fails with EFBIG (Go ignores SIGXFSZ).
func TestRunFolderFailureIsNotPermanent(t *testing.T) {
	rf := &runFolder{}
	h := newHarness(t, withFakeClock(), withRunFolder(rf))
	a := workload("svc", "cfg", func(w *state.Workload) { w.Files = []state.File{{MountPoint: "/etc/app.conf", Content: "x"}} })
	var old unix.Rlimit
	if err := unix.Getrlimit(unix.RLIMIT_FSIZE, &old); err != nil {
		t.Fatal(err)
	}
	limited := old
	limited.Cur = 0
	if err := unix.Setrlimit(unix.RLIMIT_FSIZE, &limited); err != nil {
		t.Fatal(err)
	}
	restored := false
	restore := func() {
		if !restored {
			restored = true
			if err := unix.Setrlimit(unix.RLIMIT_FSIZE, &old); err != nil {
				t.Fatal(err)
			}
		}
	}
	defer restore()
	h.m.Update([]Added{a}, nil)
	var last state.ExecutionState
	testwait.For(t, waitWithin, func() bool {
		last, _ = h.rec.last(a.Instance)
		return last.Is(state.StatePending, state.SubStarting) && strings.Contains(last.AdditionalInfo, "once the run folder works again") ||
			last.Is(state.StatePending, state.SubStartingFailed)
	}, "the file's failure to be reported")
	restore()
	if !last.Is(state.StatePending, state.SubStarting) || !strings.Contains(last.AdditionalInfo, "file too large") {
		t.Fatalf("a workload file the kernel refused: %v, want Pending(Starting) waiting for the run folder", last)
	}
	if n := h.rt.createCount(a.Instance); n != 0 {
		t.Fatalf("%d creates without the workload's files", n)
	}
	rf.heal(t)
	h.waitLast(a.Instance, state.RunningOk)
}
