package process

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"strconv"
	"syscall"
)

// procStat is what the runtime needs from /proc/<pid>/stat.
type procStat struct {
	State     byte   // field 3: R, S, D, Z, X, ...
	PGID      int    // field 5
	Session   int    // field 6
	StartTime uint64 // field 22: clock ticks since boot
}

func readStat(pid int) (procStat, error) {
	data, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return procStat{}, err
	}
	return parseStat(data)
}

// parseStat parses a stat line. The command name (field 2) is in
// parentheses and may itself hold spaces and parentheses, so the fields
// are counted from the last ')'.
func parseStat(data []byte) (procStat, error) {
	end := bytes.LastIndexByte(data, ')')
	if end < 0 {
		return procStat{}, errors.New("stat: no command name")
	}
	f := bytes.Fields(data[end+1:]) // f[0] is field 3
	if len(f) < 20 {
		return procStat{}, fmt.Errorf("stat: %d fields after the command name", len(f))
	}
	var (
		st   = procStat{State: f[0][0]}
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
		return procStat{}, fmt.Errorf("stat: %w", err)
	}
	return st, nil
}

// startTime reads a process's start time, the second half of a procRef.
func startTime(pid int) (uint64, error) {
	st, err := readStat(pid)
	return st.StartTime, err
}

// alive reports whether the process still runs: same boot, same pid,
// same start time, and not a zombie waiting to be reaped. boot is the id
// of the running boot ("" when unknown).
func (p *procRef) alive(boot string) bool {
	_, ok := p.stat(boot)
	return ok
}

// stat reads the process's stat if it is still the recorded process.
func (p *procRef) stat(boot string) (procStat, bool) {
	if p == nil || p.PID <= 0 || !sameBoot(p.BootID, boot) {
		return procStat{}, false
	}
	st, err := readStat(p.PID)
	if err != nil || st.StartTime != p.StartTime || st.State == 'Z' || st.State == 'X' {
		return procStat{}, false
	}
	return st, true
}

// signalGroup signals the process group the workload leads, which takes
// its children along; a workload that left its group is signalled alone.
// A pid that is not the recorded process is never signalled.
func (p *procRef) signalGroup(sig syscall.Signal, boot string) {
	st, ok := p.stat(boot)
	if !ok {
		return
	}
	if st.PGID == p.PID {
		_ = syscall.Kill(-p.PID, sig)
		return
	}
	_ = syscall.Kill(p.PID, sig)
}

// signal signals the process alone.
func (p *procRef) signal(sig syscall.Signal, boot string) {
	if p.alive(boot) {
		_ = syscall.Kill(p.PID, sig)
	}
}
