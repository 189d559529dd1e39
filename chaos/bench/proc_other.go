//go:build !linux

package bench

import (
	"os"
	"syscall"
	"time"
)

// sysProcAttr: outside Linux the child stays in our process group.
func sysProcAttr() *syscall.SysProcAttr { return nil }

func signalGroup(p *os.Process, sig syscall.Signal) error {
	if sig == syscall.SIGKILL {
		return p.Kill()
	}
	return p.Signal(sig)
}

// withTimerSlack: outside Linux there is no timer slack to set.
func withTimerSlack(_ time.Duration, start func() error) error { return start() }
