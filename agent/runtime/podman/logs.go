package podman

import (
	"context"
	"fmt"
	"io"
	"os"
	"os/exec"
	"strconv"
	"sync"
	"time"

	"github.com/grapnel-io/grapnel/agent/runtime"
)

// Logs runs `podman logs` for the container. The container's stdout and
// stderr, which podman logs replays on its own stdout and stderr, share
// one pipe, so the reader sees them merged in the order podman wrote
// them. The reader ends when podman logs does (without Follow: at once;
// with Follow: when the container has ended) or when ctx ends; Close
// kills podman logs. However podman logs ends, the reader ends with
// io.EOF.
func (r *Runtime) Logs(ctx context.Context, id runtime.ID, o runtime.LogOptions) (io.ReadCloser, error) {
	// A fresh answer: podman logs on a container removed meanwhile would
	// put podman's complaint into the stream as if it were output.
	if _, err := r.lookup(ctx, id, 0); err != nil {
		return nil, err
	}
	return r.startLogs(ctx, logsArgs(id, o))
}

// startLogs starts `podman ARGS` (a logs command) with its stdout and
// stderr on one pipe, and returns the reader of that pipe.
func (r *Runtime) startLogs(ctx context.Context, args []string) (io.ReadCloser, error) {
	pr, pw, err := os.Pipe()
	if err != nil {
		return nil, fmt.Errorf("podman logs: %w", err)
	}
	cmd := exec.CommandContext(ctx, r.binary, args...)
	cmd.Stdout, cmd.Stderr = pw, pw
	if err := cmd.Start(); err != nil {
		pr.Close()
		pw.Close()
		return nil, fmt.Errorf("podman logs: %w", err)
	}
	// Only podman holds the write end now: its exit ends the reader.
	pw.Close()
	r.log.Debug("podman", "args", loggedArgs(args))
	lr := &logReader{pr: pr, cmd: cmd, done: make(chan struct{})}
	go lr.wait()
	return lr, nil
}

func logsArgs(id runtime.ID, o runtime.LogOptions) []string {
	args := []string{"logs"}
	if o.Follow {
		args = append(args, "--follow")
	}
	if o.Tail >= 0 {
		args = append(args, "--tail", strconv.Itoa(o.Tail))
	}
	if !o.Since.IsZero() {
		args = append(args, "--since", o.Since.UTC().Format(time.RFC3339Nano))
	}
	if !o.Until.IsZero() {
		args = append(args, "--until", o.Until.UTC().Format(time.RFC3339Nano))
	}
	return append(args, string(id))
}

// logReader is the read end of the pipe podman logs writes into.
type logReader struct {
	pr    *os.File
	cmd   *exec.Cmd
	done  chan struct{} // closed once podman logs has been reaped
	close sync.Once
}

// wait reaps podman logs; it is the only goroutine of a reader and ends
// with the process.
func (l *logReader) wait() {
	_ = l.cmd.Wait()
	close(l.done)
}

func (l *logReader) Read(p []byte) (int, error) { return l.pr.Read(p) }

// Close kills podman logs if it still runs, reaps it and closes the pipe.
func (l *logReader) Close() error {
	l.close.Do(func() {
		select {
		case <-l.done:
		default:
			_ = l.cmd.Process.Kill()
			<-l.done
		}
		l.pr.Close()
	})
	return nil
}
