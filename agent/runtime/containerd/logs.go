package containerd

import (
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"time"

	"golang.org/x/sys/unix"

	"github.com/grapnel-io/grapnel/agent/runtime"
	"github.com/grapnel-io/grapnel/agent/runtime/linelog"
)

// followPoll is how often a following reader looks for new output and
// whether the task still runs.
const followPoll = 200 * time.Millisecond

// Logs returns the container's output lines, stdout and stderr merged in
// the order the logger (RunLoggerIfRequested) wrote them, without its
// timestamp and stream prefix. Tail applies to the lines left after
// Since and Until. With Follow the reader ends (io.EOF) once the
// container has no running task and its log is drained, once a line past
// Until is seen, or when ctx ends or the reader is closed.
func (r *Runtime) Logs(ctx context.Context, id runtime.ID, o runtime.LogOptions) (io.ReadCloser, error) {
	if !validID(string(id)) {
		return nil, fmt.Errorf("container id %q: %w", id, runtime.ErrNotFound)
	}
	info, err := r.info(ctx, string(id))
	if err != nil {
		return nil, err
	}
	path := info.Labels[labelLog]
	if path == "" {
		return nil, fmt.Errorf("containerd: container %s has no log label %s", id, labelLog)
	}
	f, err := os.Open(path)
	if errors.Is(err, fs.ErrNotExist) {
		// The logger creates the file before the task starts: a log
		// that is gone (a run folder emptied) is an empty one.
		f, err = os.Open(os.DevNull)
	}
	if err != nil {
		return nil, fmt.Errorf("containerd: %w", err)
	}
	return linelog.Reader(ctx, f, o, r.clk(), linelog.Follow{Every: followPoll, Ended: func() bool {
		// Look at the task and its logger before reading, so that the
		// read that follows sees everything they wrote.
		drained := !r.taskRunning(ctx, string(id)) && loggerDone(f)
		if !drained && r.taskStopped(ctx, string(id)) {
			// The shim holds the output pipes open until the task is
			// deleted: reap it (as State does), so that the logger
			// reads their end, writes a last line without a newline,
			// and exits.
			_ = r.reap(ctx, string(id))
			r.invalidate()
		}
		return drained
	}}), nil
}

// loggerDone reports whether no logger holds the log: the logger keeps
// an exclusive lock on it until both streams ended.
func loggerDone(f *os.File) bool {
	if err := unix.Flock(int(f.Fd()), unix.LOCK_SH|unix.LOCK_NB); err != nil {
		return false
	}
	_ = unix.Flock(int(f.Fd()), unix.LOCK_UN)
	return true
}

// taskStopped reports whether the container's task stopped and waits to
// be reaped.
func (r *Runtime) taskStopped(ctx context.Context, id string) bool {
	snap, err := r.look(ctx, r.clk().Now().Add(-followPoll))
	return err == nil && snap.tasks[id] == "STOPPED"
}

// taskRunning reports whether the container's task still runs (or
// containerd cannot say, so following goes on).
func (r *Runtime) taskRunning(ctx context.Context, id string) bool {
	snap, err := r.look(ctx, r.clk().Now().Add(-followPoll))
	if err != nil {
		return ctx.Err() == nil
	}
	switch snap.tasks[id] {
	case "RUNNING", "PAUSED", "PAUSING", "CREATED":
		return true
	}
	return false
}
