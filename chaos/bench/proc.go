package bench

import (
	"errors"
	"flag"
	"fmt"
	"os"
	"os/exec"
	"syscall"
	"time"
)

// ErrExited means a process ended on its own when it should be running.
var ErrExited = errors.New("process exited")

// Process is one child process (a grapnel-server or an etcd member) with
// its output in a log file. It runs in its own process group, so a kill
// reaches everything it started.
type Process struct {
	Name string
	cmd  *exec.Cmd
	log  *os.File
	done chan struct{} // closed once Wait has returned
	err  error         // Wait's result; read after done
}

// UnitTimerSlack is the timer slack deploy/systemd/grapnel-server.service
// gives a replica (TimerSlackNSec=); the benches start their replicas
// with it unless told otherwise.
const UnitTimerSlack = time.Millisecond

// TimerSlackFlag defines the benches' -replica-timer-slack flag on fs,
// UnitTimerSlack by default; a negative duration is refused.
func TimerSlackFlag(fs *flag.FlagSet, p *time.Duration) {
	*p = UnitTimerSlack
	usage := fmt.Sprintf("timer slack of every replica, as TimerSlackNSec= in deploy/systemd/grapnel-server.service sets it (default %v; 0: this process's own)", UnitTimerSlack)
	fs.Func("replica-timer-slack", usage, func(v string) error {
		d, err := time.ParseDuration(v)
		switch {
		case err != nil:
			return err
		case d < 0:
			return errors.New("must not be negative")
		}
		*p = d
		return nil
	})
}

// StartProcess starts bin with args, stdout and stderr appended to logPath.
func StartProcess(name, bin string, args []string, logPath string) (*Process, error) {
	return StartProcessWith(name, bin, args, logPath, 0)
}

// StartProcessWith is StartProcess with the child's timer slack set, as a
// unit's TimerSlackNSec= sets it (zero: inherited from this process).
func StartProcessWith(name, bin string, args []string, logPath string, timerSlack time.Duration) (*Process, error) {
	log, err := os.OpenFile(logPath, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return nil, fmt.Errorf("%s: log file: %w", name, err)
	}
	fmt.Fprintf(log, "=== %s start %s %q\n", time.Now().Format(time.RFC3339Nano), bin, args)
	cmd := exec.Command(bin, args...)
	cmd.Stdout, cmd.Stderr = log, log
	cmd.SysProcAttr = sysProcAttr()
	if err := withTimerSlack(timerSlack, cmd.Start); err != nil {
		log.Close()
		return nil, fmt.Errorf("%s: start %s: %w", name, bin, err)
	}
	p := &Process{Name: name, cmd: cmd, log: log, done: make(chan struct{})}
	go func() {
		p.err = cmd.Wait()
		log.Close()
		close(p.done)
	}()
	return p, nil
}

// Pid is the process id.
func (p *Process) Pid() int { return p.cmd.Process.Pid }

// Done is closed when the process has ended.
func (p *Process) Done() <-chan struct{} { return p.done }

// Alive says whether the process still runs.
func (p *Process) Alive() bool {
	select {
	case <-p.done:
		return false
	default:
		return true
	}
}

// ExitErr says how the process ended; nil while it runs.
func (p *Process) ExitErr() error {
	select {
	case <-p.done:
		if p.err == nil {
			return fmt.Errorf("%s: %w with status 0", p.Name, ErrExited)
		}
		return fmt.Errorf("%s: %w: %v", p.Name, ErrExited, p.err)
	default:
		return nil
	}
}

// Kill sends SIGKILL to the process group and waits until the process is
// reaped.
func (p *Process) Kill() {
	if p.Alive() {
		_ = signalGroup(p.cmd.Process, syscall.SIGKILL)
	}
	<-p.done
}

// Freeze stops the process group with SIGSTOP: the processes live and
// their sockets stay open, but nothing runs until Thaw.
func (p *Process) Freeze() error { return signalGroup(p.cmd.Process, syscall.SIGSTOP) }

// Thaw lets a frozen process group run again (SIGCONT).
func (p *Process) Thaw() error { return signalGroup(p.cmd.Process, syscall.SIGCONT) }

// terminate sends SIGTERM to the process group and SIGCONT after it: a
// frozen process acts on the SIGTERM only once it runs again, and would
// otherwise wait out the grace and be killed.
func (p *Process) terminate() {
	_ = signalGroup(p.cmd.Process, syscall.SIGTERM)
	_ = signalGroup(p.cmd.Process, syscall.SIGCONT)
}

// StopWithin asks the process to end (SIGTERM) and kills it if it has not
// ended within grace. It returns nil when the process ended on its own
// with status 0 (a graceful stop), otherwise what happened: another exit
// status, a signal, or that it was killed after grace.
func (p *Process) StopWithin(grace time.Duration) error {
	if !p.Alive() {
		return p.ExitErr()
	}
	p.terminate()
	select {
	case <-p.done:
		if p.err != nil {
			return fmt.Errorf("%s: stopped with SIGTERM, ended with %v", p.Name, p.err)
		}
		return nil
	case <-time.After(grace):
		p.Kill()
		return fmt.Errorf("%s: still running %v after SIGTERM, killed", p.Name, grace)
	}
}

// Stop asks the process to end (SIGTERM, frozen or not) and kills it if
// it has not ended within grace.
func (p *Process) Stop(grace time.Duration) {
	if !p.Alive() {
		return
	}
	p.terminate()
	select {
	case <-p.done:
	case <-time.After(grace):
		p.Kill()
	}
}
