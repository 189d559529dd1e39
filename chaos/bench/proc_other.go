//go:build !linux

package bench

import (
	"os"
	"syscall"
)

// sysProcAttr: outside Linux the child stays in our process group.
func sysProcAttr() *syscall.SysProcAttr { return nil }

func signalGroup(p *os.Process, sig syscall.Signal) error {
	if sig == syscall.SIGKILL {
		return p.Kill()
	}
	return p.Signal(sig)
}
