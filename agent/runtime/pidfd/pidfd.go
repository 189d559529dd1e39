// Package pidfd tells the runtimes when a process ends, without polling
// and without holding an OS thread: a pidfd (pidfd_open, Linux 5.3)
// becomes readable when its process exits, and a non-blocking one can
// wait in Go's netpoller like a socket.
//
// A pidfd names the process that had the pid when it was opened. The pid
// may have been reused before that, so a caller that trusts a pid only
// together with its start time checks the process again after Open: if it
// is still the one meant, the pidfd is too, for good.
package pidfd

import (
	"context"
	"errors"
	"fmt"
	"os"
	"sync"
	"syscall"
	"time"

	"golang.org/x/sys/unix"
)

// ErrUnsupported is wrapped when the kernel has no pidfd_open (older
// than 5.3, or a seccomp profile that refuses it): the caller polls.
var ErrUnsupported = fmt.Errorf("pidfd: %w", errors.ErrUnsupported)

// ErrGone is wrapped by Open when no process has the pid.
var ErrGone = errors.New("pidfd: no such process")

// Supported reports whether pidfds can be opened and waited on here. It
// asks the kernel once.
var Supported = sync.OnceValue(func() bool {
	p, err := Open(os.Getpid())
	if err != nil {
		return false
	}
	_ = p.Close()
	return true
})

// Proc is an open pidfd.
type Proc struct {
	f  *os.File
	rc syscall.RawConn
}

// Open opens a pidfd on the process pid.
func Open(pid int) (*Proc, error) {
	fd, err := unix.PidfdOpen(pid, 0) // close-on-exec by default
	switch {
	case errors.Is(err, unix.ESRCH):
		return nil, fmt.Errorf("%w: pid %d", ErrGone, pid)
	case errors.Is(err, unix.ENOSYS), errors.Is(err, unix.EPERM):
		return nil, fmt.Errorf("%w: pidfd_open: %v", ErrUnsupported, err)
	case err != nil:
		return nil, fmt.Errorf("pidfd: open pid %d: %w", pid, err)
	}
	// Non-blocking (PIDFD_NONBLOCK needs 5.10), so that os.NewFile
	// registers it with the netpoller.
	if err := unix.SetNonblock(fd, true); err != nil {
		_ = unix.Close(fd)
		return nil, fmt.Errorf("pidfd: %w", err)
	}
	f := os.NewFile(uintptr(fd), fmt.Sprintf("pidfd:%d", pid))
	// A file the netpoller did not take cannot have deadlines; waiting
	// on it would fail, so it is no use.
	if err := f.SetReadDeadline(time.Time{}); err != nil {
		_ = f.Close()
		return nil, fmt.Errorf("%w: not pollable: %v", ErrUnsupported, err)
	}
	rc, err := f.SyscallConn()
	if err != nil {
		_ = f.Close()
		return nil, fmt.Errorf("pidfd: %w", err)
	}
	return &Proc{f: f, rc: rc}, nil
}

// Wait waits until the process has exited and returns nil, or returns
// ctx's error once ctx ends. It closes p either way: a Proc serves one
// Wait.
func (p *Proc) Wait(ctx context.Context) error {
	// Closing the file ends a pending read at once.
	stop := context.AfterFunc(ctx, func() { _ = p.f.Close() })
	defer stop()
	var exited bool
	err := p.rc.Read(func(fd uintptr) bool {
		exited = readable(fd)
		return exited
	})
	_ = p.f.Close()
	switch {
	case exited:
		return nil
	case ctx.Err() != nil:
		return ctx.Err()
	case err == nil:
		err = errors.New("read ended without an exit")
	}
	return fmt.Errorf("pidfd: waiting: %w", err)
}

// Exited reports, without waiting, whether the process has exited.
func (p *Proc) Exited() bool {
	var exited bool
	if err := p.rc.Control(func(fd uintptr) { exited = readable(fd) }); err != nil {
		return false
	}
	return exited
}

// Close releases the pidfd and ends a pending Wait; closing twice is
// harmless.
func (p *Proc) Close() error {
	if err := p.f.Close(); err != nil && !errors.Is(err, os.ErrClosed) {
		return err
	}
	return nil
}

// readable polls the pidfd without waiting: a pidfd reads as readable
// once its process has exited (pidfd_open(2)).
func readable(fd uintptr) bool {
	pfd := []unix.PollFd{{Fd: int32(fd), Events: unix.POLLIN}}
	for {
		n, err := unix.Poll(pfd, 0)
		if err == unix.EINTR {
			continue
		}
		return err == nil && n > 0 && pfd[0].Revents&(unix.POLLIN|unix.POLLHUP|unix.POLLERR) != 0
	}
}

// Notify returns a channel that is closed once the process has exited,
// or once waiting failed (the caller must then look for itself rather
// than wait for nothing). p is closed, and the wait ends, when ctx ends.
// The one goroutine that waits is parked in the netpoller.
func Notify(ctx context.Context, p *Proc) <-chan struct{} {
	ch := make(chan struct{})
	go func() {
		if p.Wait(ctx) == nil || ctx.Err() == nil {
			close(ch)
		}
	}()
	return ch
}
