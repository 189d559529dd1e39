package controlif

import (
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"sync"
	"syscall"
	"time"

	"golang.org/x/sys/unix"

	"github.com/grapnel-io/grapnel/agent/runtime"
	"github.com/grapnel-io/grapnel/internal/clock"
)

// fifoMode is the FIFOs' mode: their owner (the workload) reads and
// writes them, nobody else.
const fifoMode = 0o600

// ensureFIFO creates the FIFO at path, or keeps the one an earlier agent
// left there, so that a workload that outlived an agent restart keeps its
// ends open; either way it belongs to owner (nil = the agent's user) with
// mode 0600.
//
// swdd~agent-control-interface-creates-two-pipes-per-workload~1
func ensureFIFO(path string, owner *runtime.Owner) error {
	fi, err := os.Lstat(path)
	switch {
	case err == nil && fi.Mode()&os.ModeNamedPipe == 0:
		return fmt.Errorf("%w: %s exists and is not a FIFO", ErrFIFO, path)
	case err != nil && !errors.Is(err, os.ErrNotExist):
		return fmt.Errorf("%w: %v", ErrFIFO, err)
	case err != nil:
		if err := unix.Mkfifo(path, fifoMode); err != nil {
			// The path and the errno stay with the error: a full or
			// read-only run folder is told apart by them (agent/storage).
			return fmt.Errorf("%w: %w", ErrFIFO, &fs.PathError{Op: "mkfifo", Path: path, Err: err})
		}
	}
	if err := runtime.GiveFile(path, owner, fifoMode); err != nil {
		return fmt.Errorf("%w: %s: %w", ErrFIFO, path, err)
	}
	return nil
}

// fifoReader reads the workload's `output` FIFO. It is opened without
// waiting for a writer and reads through the runtime's poller, so Close
// ends a pending Read at once.
type fifoReader struct {
	f  *os.File
	rc syscall.RawConn
	// gotData is set by data and cleared by the EOF it allows; only the
	// reading goroutine touches it.
	gotData bool
}

func openReader(path string) (*fifoReader, error) {
	// O_NOFOLLOW: the agent never follows a link planted in place of a
	// FIFO.
	fd, err := unix.Open(path, unix.O_RDONLY|unix.O_NONBLOCK|unix.O_CLOEXEC|unix.O_NOFOLLOW, 0)
	if err != nil {
		return nil, fmt.Errorf("%w: open %s: %v", ErrFIFO, path, err)
	}
	f := os.NewFile(uintptr(fd), path)
	rc, err := f.SyscallConn()
	if err != nil {
		_ = f.Close()
		return nil, fmt.Errorf("%w: %s: %v", ErrFIFO, path, err)
	}
	return &fifoReader{f: f, rc: rc}, nil
}

// Read waits for data. Once the writers that sent data have all closed
// their ends it returns io.EOF, once; while no writer is there it waits,
// so a workload that has not opened `output` yet looks like a quiet one,
// not a closed one. After Close it returns an error.
func (r *fifoReader) Read(p []byte) (int, error) {
	if len(p) == 0 {
		return 0, nil
	}
	var n int
	var rerr error
	err := r.rc.Read(func(fd uintptr) bool {
		for {
			n, rerr = unix.Read(int(fd), p)
			if rerr != unix.EINTR {
				break
			}
		}
		switch {
		case rerr == unix.EAGAIN:
			return false
		case rerr != nil:
			n = 0
			return true
		case n > 0:
			r.gotData = true
			return true
		case r.gotData:
			r.gotData = false
			rerr = io.EOF
			return true
		default:
			return false
		}
	})
	if err != nil {
		return 0, err
	}
	return n, rerr
}

// Close ends a pending Read.
func (r *fifoReader) Close() error { return r.f.Close() }

// timing holds the write limits of Ankaios' output pipe.
type timing struct {
	// writeTimeout is how long one write may wait for the workload to
	// read (swdd~agent-handles-control-interface-full-output-pipe-buffer~1).
	writeTimeout time.Duration
	// retryEvery and retries bound the attempts while nobody reads the
	// FIFO (swdd~agent-handles-control-interface-output-pipe-closed~1).
	retryEvery time.Duration
	retries    int
}

var ankaiosTiming = timing{writeTimeout: 500 * time.Millisecond, retryEvery: 100 * time.Millisecond, retries: 5}

// errReceiverGone means the workload does not read `input`: it has no
// reader on it, or it let a write wait longer than the write timeout.
var errReceiverGone = errors.New("the workload does not read its input FIFO")

// errStopped means the writer was stopped during the write.
var errStopped = errors.New("control interface stopped")

// fifoWriter writes the workload's `input` FIFO. It opens the FIFO only
// when it has something to write and without waiting, since a workload may
// not have opened its end yet.
type fifoWriter struct {
	path  string
	clock clock.Clock
	t     timing
	quit  <-chan struct{}

	// mu guards f, gen and stopped.
	mu      sync.Mutex
	f       *os.File
	gen     uint64 // counts writes, so a late timeout cannot hit the next one
	stopped bool
}

// write sends b whole, or reports why it could not: errReceiverGone,
// errStopped, or another I/O error.
func (w *fifoWriter) write(b []byte) error {
	for attempt := 0; ; attempt++ {
		err := w.try(b)
		switch {
		case err == nil:
			return nil
		case w.isStopped():
			return errStopped
		case errors.Is(err, os.ErrDeadlineExceeded):
			return fmt.Errorf("%w: no read within %v", errReceiverGone, w.t.writeTimeout)
		case !noReader(err):
			return err
		}
		w.drop()
		if attempt >= w.t.retries {
			return fmt.Errorf("%w: %v", errReceiverGone, err)
		}
		if !w.sleep(w.t.retryEvery) {
			return errStopped
		}
	}
}

// try makes one attempt: open if needed, then write with the timeout.
func (w *fifoWriter) try(b []byte) error {
	w.mu.Lock()
	if w.stopped {
		w.mu.Unlock()
		return errStopped
	}
	if w.f == nil {
		fd, err := unix.Open(w.path, unix.O_WRONLY|unix.O_NONBLOCK|unix.O_CLOEXEC|unix.O_NOFOLLOW, 0)
		if err != nil {
			w.mu.Unlock()
			return &os.PathError{Op: "open", Path: w.path, Err: err}
		}
		w.f = os.NewFile(uintptr(fd), w.path)
	}
	f := w.f
	w.gen++
	gen := w.gen
	_ = f.SetWriteDeadline(time.Time{})
	w.mu.Unlock()

	timer := w.clock.AfterFunc(w.t.writeTimeout, func() {
		w.mu.Lock()
		defer w.mu.Unlock()
		if w.gen == gen && w.f == f {
			// A deadline in the past ends the blocked write now.
			_ = f.SetWriteDeadline(time.Unix(1, 0))
		}
	})
	_, err := f.Write(b)
	timer.Stop()
	w.mu.Lock()
	w.gen++
	w.mu.Unlock()
	return err
}

// noReader: nobody has the FIFO open for reading (ENXIO on open, EPIPE on
// write).
func noReader(err error) bool {
	return errors.Is(err, unix.ENXIO) || errors.Is(err, unix.EPIPE)
}

// drop closes the FIFO so that the next attempt opens it again.
func (w *fifoWriter) drop() {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.f != nil {
		_ = w.f.Close()
		w.f = nil
	}
}

// sleep waits d on the clock; false when stopped meanwhile.
func (w *fifoWriter) sleep(d time.Duration) bool {
	done := make(chan struct{})
	t := w.clock.AfterFunc(d, func() { close(done) })
	select {
	case <-done:
		return true
	case <-w.quit:
		t.Stop()
		return false
	}
}

// hasReader reports whether somebody has `input` open for reading. The
// FIFO held open for writing tells by poll (POLLERR: no reader left);
// otherwise it is opened, as a write would, and kept. Unknown counts as
// yes, and so does a stopped writer.
func (w *fifoWriter) hasReader() bool {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.stopped {
		return true
	}
	if w.f == nil {
		fd, err := unix.Open(w.path, unix.O_WRONLY|unix.O_NONBLOCK|unix.O_CLOEXEC|unix.O_NOFOLLOW, 0)
		if err != nil {
			return !errors.Is(err, unix.ENXIO)
		}
		w.f = os.NewFile(uintptr(fd), w.path)
		return true
	}
	rc, err := w.f.SyscallConn()
	if err != nil {
		return true
	}
	gone := false
	_ = rc.Control(func(fd uintptr) {
		p := []unix.PollFd{{Fd: int32(fd), Events: unix.POLLOUT}}
		if n, err := unix.Poll(p, 0); err == nil && n > 0 {
			gone = p[0].Revents&unix.POLLERR != 0
		}
	})
	if gone {
		// As after a write that met no reader: open again next time.
		_ = w.f.Close()
		w.f = nil
	}
	return !gone
}

func (w *fifoWriter) isStopped() bool {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.stopped
}

// stop ends a pending write and closes the FIFO; the workload keeps its
// end.
func (w *fifoWriter) stop() {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.stopped = true
	if w.f != nil {
		_ = w.f.Close()
		w.f = nil
	}
}
