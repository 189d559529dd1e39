package containerd

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"net/url"
	"os"
	"os/signal"
	"path/filepath"
	"sync"
	"syscall"
	"time"

	"golang.org/x/sys/unix"

	"github.com/grapnel-io/grapnel/internal/clock"
)

// loggerArg is the first argument containerd's shim gives the logging
// binary: the key of the log URI's only query parameter, whose value,
// the log file, is the second.
const loggerArg = "grapnel-containerd-log"

// logURI is the `binary://` log URI of a container: containerd's shim
// runs this program (the agent's own binary) as the container's logger,
// with the container's stdout on fd 3 and stderr on fd 4, and waits for
// fd 5 to be closed before it starts the task.
func logURI(binary, path string) string {
	u := url.URL{Scheme: "binary", Path: binary, RawQuery: url.Values{loggerArg: {path}}.Encode()}
	return u.String()
}

// RunLoggerIfRequested runs the container logger and exits when this
// process was started as one by containerd's shim; otherwise it returns
// at once. Call it first in main (and in TestMain of tests that run
// containerd workloads), as process.RunShimIfRequested.
func RunLoggerIfRequested() {
	if len(os.Args) != 3 || os.Args[1] != loggerArg {
		return
	}
	if err := runLogger(os.Args[2], clock.Real()); err != nil {
		fmt.Fprintf(os.Stderr, "grapnel containerd logger: %v\n", err)
		os.Exit(1)
	}
	os.Exit(0)
}

// runLogger writes every line of the container's stdout and stderr to
// path as "<RFC3339Nano> <O|E> <text>", the process runtime's format,
// so that Logs can honour Since and Until and the two streams keep their
// order line by line. It returns when both streams have ended.
func runLogger(path string, clk clock.Clock) error {
	if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
		return err
	}
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_APPEND, 0o600)
	if err != nil {
		return err
	}
	defer f.Close()
	// Held until the logger ends, so that a following reader knows when
	// the log is complete (the task may stop before its output is
	// drained).
	if err := unix.Flock(int(f.Fd()), unix.LOCK_EX); err != nil {
		return err
	}
	// The shim sends SIGTERM once the task is deleted, and kills the
	// logger 12 s later. Dying at the SIGTERM would lose what is still in
	// the pipes, a last line without a newline above all (it is read only
	// at their end): keep draining instead.
	term := make(chan os.Signal, 1)
	signal.Notify(term, syscall.SIGTERM)
	stdout, stderr, ready := os.NewFile(3, "stdout"), os.NewFile(4, "stderr"), os.NewFile(5, "ready")
	if stdout == nil || stderr == nil || ready == nil {
		return errors.New("fds 3, 4 and 5 are not open: not started by containerd's shim")
	}
	ready.Close() // the shim starts the task now
	var mu sync.Mutex
	w := bufio.NewWriter(f)
	copyLines := func(r io.Reader, stream byte) error {
		br := bufio.NewReaderSize(r, 64<<10)
		for {
			line, err := br.ReadSlice('\n')
			{
				if len(line) > 0 {
					mu.Lock()
					_, _ = w.WriteString(clk.Now().UTC().Format(time.RFC3339Nano))
					_ = w.WriteByte(' ')
					_ = w.WriteByte(stream)
					_ = w.WriteByte(' ')
					_, _ = w.Write(line)
					if line[len(line)-1] != '\n' {
						// The stream ended inside a line, or an overlong
						// line is cut in pieces.
						_ = w.WriteByte('\n')
					}
					ferr := w.Flush()
					mu.Unlock()
					if ferr != nil {
						return ferr
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
	}
	done := make(chan error, 1)
	go func() {
		errs := make(chan error, 2)
		go func() { errs <- copyLines(stdout, 'O') }()
		go func() { errs <- copyLines(stderr, 'E') }()
		done <- errors.Join(<-errs, <-errs)
	}()
	select {
	case err := <-done:
		return err
	case <-term:
	}
	// The shim closed its ends of the pipes before signalling; end before
	// its kill should something else still hold them.
	expired := make(chan struct{})
	t := clk.AfterFunc(termGrace, func() { close(expired) })
	defer t.Stop()
	select {
	case err := <-done:
		return err
	case <-expired:
		return fmt.Errorf("output streams still open %v after SIGTERM", termGrace)
	}
}

// termGrace is how long the logger goes on draining after the shim's
// SIGTERM: less than the 12 s after which the shim kills it.
const termGrace = 10 * time.Second
