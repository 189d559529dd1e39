package process

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/grapnel-io/grapnel/agent/runtime"
	"github.com/grapnel-io/grapnel/agent/runtime/pidfd"
	"github.com/grapnel-io/grapnel/internal/clock"
)

var _ runtime.Watcher = (*Runtime)(nil)

// errStarting is Watch's answer while the shim has not recorded the
// workload yet: no process ends when it does, so the caller polls.
var errStarting = errors.New("process runtime: the workload is still starting")

// Watch arms a pidfd on the process whose end changes the instance's
// state (see runtime.Watcher). While the workload runs that is the shim:
// it records the exit and then ends, so once it has ended State reads
// the exit. A shim that died before its workload (killed on its own)
// leaves the workload itself to be watched. An instance that has ended
// gives a nil channel, and so does one without a record unless a process
// State last saw for it still runs (see stateWithoutRecord).
func (r *Runtime) Watch(ctx context.Context, id runtime.ID) (<-chan struct{}, error) {
	if !pidfd.Supported() {
		return nil, pidfd.ErrUnsupported
	}
	dir, err := r.recordDir(id)
	if err != nil {
		return nil, nil // State says ErrNotFound, for good
	}
	rs, err := readRecords(dir, r.boot)
	switch {
	case errors.Is(err, runtime.ErrNotFound):
		// A record wiped behind the agent's back: the processes last
		// seen for it, while they run (see stateWithoutRecord).
		p, _ := r.recall(id)
		return r.notifyFirst(ctx, p.shim, p.child)
	case err != nil:
		return nil, err
	case rs.exit != nil:
		return nil, nil
	case rs.child == nil && rs.startErr == "" && rs.shim.alive(r.boot):
		return nil, errStarting
	case rs.child == nil:
		return nil, nil // it never started: Failed for good
	}
	return r.notifyFirst(ctx, rs.shim, rs.childRef())
}

// notifyFirst watches the first of the processes that still runs; nil
// when none does: what State reads now is how it ended.
func (r *Runtime) notifyFirst(ctx context.Context, ps ...*procRef) (<-chan struct{}, error) {
	for _, p := range ps {
		proc, err := r.openProc(p)
		if err != nil {
			return nil, err
		}
		if proc != nil {
			return pidfd.Notify(ctx, proc), nil
		}
	}
	return nil, nil
}

// openProc opens a pidfd on a recorded process, nil when it no longer
// runs. The process is checked after the pidfd is open, so that a pid
// reused before cannot be watched in its place.
func (r *Runtime) openProc(p *procRef) (*pidfd.Proc, error) {
	if p == nil || p.PID <= 0 || !sameBoot(p.BootID, r.boot) {
		return nil, nil
	}
	proc, err := pidfd.Open(p.PID)
	switch {
	case errors.Is(err, pidfd.ErrGone):
		return nil, nil
	case err != nil:
		return nil, fmt.Errorf("process runtime: %w", err)
	}
	if !p.alive(r.boot) {
		_ = proc.Close()
		return nil, nil
	}
	return proc, nil
}

// waitGone waits until none of the processes is alive; false when the
// time ran out or ctx ended first. It waits on pidfds where it can and
// polls otherwise.
func (r *Runtime) waitGone(ctx context.Context, d time.Duration, ps ...*procRef) bool {
	gone := func() bool {
		for _, p := range ps {
			if p.alive(r.boot) {
				return false
			}
		}
		return true
	}
	if !pidfd.Supported() {
		return r.waitFor(ctx, d, gone)
	}
	// The context's deadline is on the system clock, and so is this one.
	deadline := clock.Real().Now().Add(d)
	wctx, cancel := context.WithDeadline(ctx, deadline)
	defer cancel()
	for _, p := range ps {
		proc, err := r.openProc(p)
		if err != nil {
			return r.waitFor(ctx, clock.Until(clock.Real(), deadline), gone)
		}
		if proc != nil && proc.Wait(wctx) != nil {
			break // time is up, or ctx ended
		}
	}
	return ctx.Err() == nil && gone()
}

// waitShim waits until the shim, a child of this agent, has exited, so
// that reaping it then returns at once: a goroutine blocked in wait(2)
// holds an OS thread for the workload's whole life. Without a pidfd it
// returns at once and the caller's wait blocks.
func waitShim(pid int) {
	proc, err := pidfd.Open(pid) // an unreaped child: the pid is still its own
	if err != nil {
		return
	}
	_ = proc.Wait(context.Background())
}
