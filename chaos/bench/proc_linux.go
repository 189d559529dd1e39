package bench

import (
	"fmt"
	"os"
	"runtime"
	"syscall"
	"time"

	"golang.org/x/sys/unix"
)

// sysProcAttr puts a child in its own process group and has the kernel
// kill it if the benchmark dies, so no replica outlives a crashed run.
func sysProcAttr() *syscall.SysProcAttr {
	return &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
}

func signalGroup(p *os.Process, sig syscall.Signal) error {
	return syscall.Kill(-p.Pid, sig)
}

// withTimerSlack runs start (which forks a child) on a thread whose timer
// slack is slack, so that the child and every thread it starts inherit
// it, as systemd's TimerSlackNSec= sets it before the exec. Linux keeps
// the slack per thread and copies it to threads and children at their
// creation; set afterwards, it would miss the threads the Go runtime
// starts at once, sysmon among them. Zero leaves the slack as it is.
func withTimerSlack(slack time.Duration, start func() error) error {
	if slack <= 0 {
		return start()
	}
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	prev, err := unix.PrctlRetInt(unix.PR_GET_TIMERSLACK, 0, 0, 0, 0)
	if err != nil {
		return fmt.Errorf("timer slack: %w", err)
	}
	if err := unix.Prctl(unix.PR_SET_TIMERSLACK, uintptr(slack.Nanoseconds()), 0, 0, 0); err != nil {
		return fmt.Errorf("timer slack %v: %w", slack, err)
	}
	defer func() { _ = unix.Prctl(unix.PR_SET_TIMERSLACK, uintptr(prev), 0, 0, 0) }()
	return start()
}
