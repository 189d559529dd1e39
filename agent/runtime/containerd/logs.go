package containerd

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"time"

	"github.com/grapnel-io/grapnel/agent/runtime"
	"github.com/grapnel-io/grapnel/internal/clock"
)

// followPoll is how often a following reader looks for new output and
// whether the task still runs.
const followPoll = 200 * time.Millisecond

// ErrNoTimestamps is returned by Logs for Since or Until: containerd's
// file logger writes the output as it comes, without the time of each
// line.
var ErrNoTimestamps = errors.New("the containerd runtime keeps no time per log line: --since and --until are not supported")

// Logs returns the container's output, stdout and stderr merged in the
// order containerd's shim wrote them into the log file named by the
// container's log label. With Follow the reader ends (io.EOF) once the
// container has no running task and its log is drained, or when ctx
// ends or the reader is closed.
func (r *Runtime) Logs(ctx context.Context, id runtime.ID, o runtime.LogOptions) (io.ReadCloser, error) {
	if !o.Since.IsZero() || !o.Until.IsZero() {
		return nil, ErrNoTimestamps
	}
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
		// The shim creates the file with the task; an empty output is
		// an empty log.
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
		pw.CloseWithError(r.stream(ctx, string(id), path, f, o, pw))
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

// stream writes the log's lines to w: the last Tail of what is there
// now, then with Follow what is appended until the task ends.
func (r *Runtime) stream(ctx context.Context, id, path string, f *os.File, o runtime.LogOptions, w io.Writer) error {
	br := bufio.NewReader(f)
	var tail [][]byte
	var partial []byte
	readLines := func(emit func([]byte) error) error {
		for {
			line, err := br.ReadBytes('\n')
			if len(line) > 0 && line[len(line)-1] == '\n' {
				full := append(partial, line...)
				partial = nil
				if err := emit(full); err != nil {
					return err
				}
			} else if len(line) > 0 {
				partial = append(partial, line...)
			}
			if err == io.EOF {
				return nil
			}
			if err != nil {
				return err
			}
		}
	}
	if err := readLines(func(l []byte) error {
		if o.Tail < 0 {
			_, err := w.Write(l)
			return err
		}
		if o.Tail == 0 {
			return nil
		}
		tail = append(tail, l)
		if len(tail) > o.Tail {
			tail = tail[1:]
		}
		return nil
	}); err != nil {
		return err
	}
	for _, l := range tail {
		if _, err := w.Write(l); err != nil {
			return err
		}
	}
	if !o.Follow {
		return nil
	}
	write := func(l []byte) error { _, err := w.Write(l); return err }
	for {
		running := r.taskRunning(ctx, id)
		if err := readLines(write); err != nil {
			return err
		}
		if !running {
			if len(partial) > 0 {
				return write(append(partial, '\n'))
			}
			return nil
		}
		select {
		case <-ctx.Done():
			return nil
		case <-clock.After(r.clk(), followPoll):
		}
	}
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
