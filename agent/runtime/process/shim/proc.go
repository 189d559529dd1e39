package shim

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"strconv"
	"syscall"
)

// Stat is what the runtime needs from /proc/<pid>/stat.
type Stat struct {
	State     byte   // field 3: R, S, D, Z, X, ...
	PGID      int    // field 5
	Session   int    // field 6
	StartTime uint64 // field 22: clock ticks since boot
}

// ReadStat reads /proc/<pid>/stat.
func ReadStat(pid int) (Stat, error) {
	data, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return Stat{}, err
	}
	return ParseStat(data)
}

// ParseStat parses a stat line. The command name (field 2) is in
// parentheses and may itself hold spaces and parentheses, so the fields
// are counted from the last ')'.
func ParseStat(data []byte) (Stat, error) {
	end := bytes.LastIndexByte(data, ')')
	if end < 0 {
		return Stat{}, errors.New("stat: no command name")
	}
	f := bytes.Fields(data[end+1:]) // f[0] is field 3
	if len(f) < 20 {
		return Stat{}, fmt.Errorf("stat: %d fields after the command name", len(f))
	}
	var (
		st   = Stat{State: f[0][0]}
		errs []error
		atoi = func(b []byte) int {
			n, err := strconv.Atoi(string(b))
			errs = append(errs, err)
			return n
		}
	)
	st.PGID = atoi(f[5-3])
	st.Session = atoi(f[6-3])
	start, err := strconv.ParseUint(string(f[22-3]), 10, 64)
	errs = append(errs, err)
	st.StartTime = start
	if err := errors.Join(errs...); err != nil {
		return Stat{}, fmt.Errorf("stat: %w", err)
	}
	return st, nil
}

// StartTime reads a process's start time, the second half of a ProcRef.
func StartTime(pid int) (uint64, error) {
	st, err := ReadStat(pid)
	return st.StartTime, err
}

// SameBoot reports whether a process recorded in boot recorded can be
// one of the running boot now. An empty side is unknown (a record from
// before boot ids were kept, a kernel without the file): the start time
// alone then decides.
func SameBoot(recorded, now string) bool {
	return recorded == "" || now == "" || recorded == now
}

// Stat reads the process's stat if it is still the recorded process:
// same boot, same pid, same start time, and not a zombie waiting to be
// reaped. boot is the id of the running boot ("" when unknown).
func (p *ProcRef) Stat(boot string) (Stat, bool) {
	if p == nil || p.PID <= 0 || !SameBoot(p.BootID, boot) {
		return Stat{}, false
	}
	st, err := ReadStat(p.PID)
	if err != nil || st.StartTime != p.StartTime || st.State == 'Z' || st.State == 'X' {
		return Stat{}, false
	}
	return st, true
}

// SignalGroup signals the process group the workload leads, which takes
// its children along; a workload that left its group is signalled alone.
// A pid that is not the recorded process is never signalled.
func (p *ProcRef) SignalGroup(sig syscall.Signal, boot string) {
	st, ok := p.Stat(boot)
	if !ok {
		return
	}
	if st.PGID == p.PID {
		_ = syscall.Kill(-p.PID, sig)
		return
	}
	_ = syscall.Kill(p.PID, sig)
}
