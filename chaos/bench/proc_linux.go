package bench

import (
	"os"
	"syscall"
)

// sysProcAttr puts a child in its own process group and has the kernel
// kill it if the benchmark dies, so no replica outlives a crashed run.
func sysProcAttr() *syscall.SysProcAttr {
	return &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
}

func signalGroup(p *os.Process, sig syscall.Signal) error {
	return syscall.Kill(-p.Pid, sig)
}
