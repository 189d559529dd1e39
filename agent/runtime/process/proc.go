package process

import (
	"syscall"

	"github.com/grapnel-io/grapnel/agent/runtime/process/shim"
)

// procStat is what the runtime needs from /proc/<pid>/stat.
type procStat = shim.Stat

func readStat(pid int) (procStat, error) { return shim.ReadStat(pid) }

// startTime reads a process's start time, the second half of a procRef.
func startTime(pid int) (uint64, error) { return shim.StartTime(pid) }

// alive reports whether the process still runs: same boot, same pid,
// same start time, and not a zombie waiting to be reaped. boot is the id
// of the running boot ("" when unknown).
func (p *procRef) alive(boot string) bool {
	_, ok := (*shim.ProcRef)(p).Stat(boot)
	return ok
}

// signalGroup signals the process group the workload leads, which takes
// its children along; a workload that left its group is signalled alone.
// A pid that is not the recorded process is never signalled.
func (p *procRef) signalGroup(sig syscall.Signal, boot string) {
	(*shim.ProcRef)(p).SignalGroup(sig, boot)
}

// signal signals the process alone.
func (p *procRef) signal(sig syscall.Signal, boot string) {
	if p.alive(boot) {
		_ = syscall.Kill(p.PID, sig)
	}
}
