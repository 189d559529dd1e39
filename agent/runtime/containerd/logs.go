package containerd

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"time"

	"golang.org/x/sys/unix"

	"github.com/grapnel-io/grapnel/agent/runtime"
	"github.com/grapnel-io/grapnel/internal/clock"
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
	ctx, cancel := context.WithCancel(ctx)
	pr, pw := io.Pipe()
	context.AfterFunc(ctx, func() { pw.Close() })
	go func() {
		defer f.Close()
		s := &logStream{r: r, id: string(id), opts: o, w: pw, ctx: ctx}
		pw.CloseWithError(s.run(f))
	}()
	return &logReader{PipeReader: pr, cancel: cancel}, nil
}

type logReader struct {
	*io.PipeReader
	cancel context.CancelFunc
}

// Close ends the streaming goroutine.
func (l *logReader) Close() error {
	l.cancel()
	return l.PipeReader.Close()
}

// logStream copies the selected lines of one log file to w.
type logStream struct {
	r    *Runtime
	id   string
	opts runtime.LogOptions
	w    io.Writer
	ctx  context.Context
	// partial holds the start of a line the logger is still writing.
	partial []byte
	// pastUntil is set once a line later than Until was read.
	pastUntil bool
}

func (s *logStream) run(f *os.File) error {
	br := bufio.NewReader(f)
	var tail [][]byte
	if err := s.readLines(br, func(text []byte) error {
		if s.opts.Tail < 0 {
			return s.emit(text)
		}
		if s.opts.Tail > 0 {
			tail = append(tail, bytes.Clone(text))
			if len(tail) > s.opts.Tail {
				tail = tail[1:]
			}
		}
		return nil
	}); err != nil {
		return err
	}
	for _, text := range tail {
		if err := s.emit(text); err != nil {
			return err
		}
	}
	if !s.opts.Follow {
		return nil
	}
	clk := s.r.clk()
	for {
		// Look at the task and its logger before reading, so that the
		// read that follows sees everything they wrote.
		drained := !s.r.taskRunning(s.ctx, s.id) && loggerDone(f)
		if !drained && s.r.taskStopped(s.ctx, s.id) {
			// The shim holds the output pipes open until the task is
			// deleted: reap it (as State does), so that the logger
			// reads their end, writes a last line without a newline,
			// and exits.
			_ = s.r.reap(s.ctx, s.id)
			s.r.invalidate()
		}
		if err := s.readLines(br, s.emit); err != nil {
			return err
		}
		if drained || s.pastUntil || (!s.opts.Until.IsZero() && clk.Now().After(s.opts.Until)) {
			return nil
		}
		select {
		case <-s.ctx.Done():
			return nil
		case <-clock.After(clk, followPoll):
		}
	}
}

// readLines reads the complete lines up to the end of the file and hands
// the text of those within Since and Until to fn.
func (s *logStream) readLines(br *bufio.Reader, fn func([]byte) error) error {
	for !s.pastUntil {
		b, err := br.ReadSlice('\n')
		if len(b) > 0 {
			if errors.Is(err, io.EOF) || errors.Is(err, bufio.ErrBufferFull) {
				s.partial = append(s.partial, b...)
			} else {
				line := b
				if len(s.partial) > 0 {
					line = append(s.partial, b...)
					s.partial = s.partial[:0]
				}
				if err := s.filter(line, fn); err != nil {
					return err
				}
			}
		}
		switch {
		case err == nil, errors.Is(err, bufio.ErrBufferFull):
		case errors.Is(err, io.EOF):
			return nil
		default:
			return err
		}
	}
	return nil
}

func (s *logStream) filter(line []byte, fn func([]byte) error) error {
	at, text, ok := parseLogLine(line)
	switch {
	case !ok:
		return nil
	case !s.opts.Since.IsZero() && at.Before(s.opts.Since):
		return nil
	case !s.opts.Until.IsZero() && at.After(s.opts.Until):
		s.pastUntil = true // the log is in time order
		return nil
	}
	return fn(text)
}

// emit writes one line of text, '\n'-terminated.
func (s *logStream) emit(text []byte) error {
	out := make([]byte, 0, len(text)+1)
	out = append(append(out, text...), '\n')
	_, err := s.w.Write(out)
	return err
}

// parseLogLine splits "<RFC3339Nano> <stream> <text>\n".
func parseLogLine(line []byte) (time.Time, []byte, bool) {
	line = bytes.TrimSuffix(line, []byte{'\n'})
	ts, rest, ok := bytes.Cut(line, []byte{' '})
	if !ok {
		return time.Time{}, nil, false
	}
	at, err := time.Parse(time.RFC3339Nano, string(ts))
	if err != nil {
		return time.Time{}, nil, false
	}
	_, text, ok := bytes.Cut(rest, []byte{' '})
	if !ok {
		return time.Time{}, nil, false
	}
	return at, text, true
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
