package campaign

import (
	"fmt"
	"os"
	"os/exec"
	"syscall"
	"time"
)

// proc is one process started inside a namespace through nsenter, which
// execs the binary: the pid is the server's or the agent's own, so a
// signal reaches it and not a wrapper.
type proc struct {
	name string
	cmd  *exec.Cmd
	done chan struct{}
	err  error
}

// startProc starts cmd with its output appended to logPath, in its own
// process group, killed by the kernel if the campaign dies.
func startProc(name string, cmd *exec.Cmd, logPath string) (*proc, error) {
	log, err := os.OpenFile(logPath, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return nil, fmt.Errorf("%s: log file: %w", name, err)
	}
	fmt.Fprintf(log, "=== %s start %q\n", time.Now().Format(time.RFC3339Nano), cmd.Args)
	cmd.Stdout, cmd.Stderr = log, log
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
	if err := cmd.Start(); err != nil {
		log.Close()
		return nil, fmt.Errorf("%s: start: %w", name, err)
	}
	p := &proc{name: name, cmd: cmd, done: make(chan struct{})}
	go func() {
		p.err = cmd.Wait()
		log.Close()
		close(p.done)
	}()
	return p, nil
}

func (p *proc) pid() int { return p.cmd.Process.Pid }

func (p *proc) alive() bool {
	if p == nil {
		return false
	}
	select {
	case <-p.done:
		return false
	default:
		return true
	}
}

// signal sends sig to the process alone.
func (p *proc) signal(sig syscall.Signal) error {
	if !p.alive() {
		return fmt.Errorf("%s: not running", p.name)
	}
	return syscall.Kill(p.pid(), sig)
}

// kill sends SIGKILL to the process group and waits until it is reaped.
func (p *proc) kill() {
	if p.alive() {
		_ = syscall.Kill(-p.pid(), syscall.SIGKILL)
	}
	if p != nil {
		<-p.done
	}
}

// stop sends SIGTERM (and SIGCONT, in case it is frozen) and kills the
// process if it has not ended within grace.
func (p *proc) stop(grace time.Duration) {
	if !p.alive() {
		return
	}
	_ = syscall.Kill(-p.pid(), syscall.SIGTERM)
	_ = syscall.Kill(p.pid(), syscall.SIGCONT)
	select {
	case <-p.done:
	case <-time.After(grace):
		p.kill()
	}
}

// waitBound waits for the process to end on its own, killing it after
// bound; the error says how it ended.
func (p *proc) waitBound(bound time.Duration) error {
	select {
	case <-p.done:
		return p.err
	case <-time.After(bound):
		p.kill()
		return fmt.Errorf("%s: still running after %v, killed", p.name, bound)
	}
}
