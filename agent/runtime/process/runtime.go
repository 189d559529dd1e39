package process

import (
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/grapnel-io/grapnel/agent/runtime"
	"github.com/grapnel-io/grapnel/agent/runtime/pidfd"
	"github.com/grapnel-io/grapnel/agent/runtime/process/shim"
	"github.com/grapnel-io/grapnel/internal/clock"
	"github.com/grapnel-io/grapnel/internal/durable"
	"github.com/grapnel-io/grapnel/state"
	"github.com/grapnel-io/grapnel/workloadpolicy"
)

// ErrStart is wrapped when Create could not start the workload: the
// command was not found, the working directory is missing, the shim died.
var ErrStart = errors.New("workload process did not start")

// Defaults of Config.
const (
	DefaultStopGrace    = 10 * time.Second
	DefaultStartTimeout = 10 * time.Second
)

const (
	// pollInterval is how often a waiting call looks at a process where
	// no pidfd can, and at a record that no event announces.
	pollInterval = 10 * time.Millisecond
	// startBackstop is how often Create reads the records while it waits
	// for the shim to close the ready pipe (shim.ReadyEnv): a shim of an
	// earlier release keeps it open while it lives, and is heard of
	// through the records alone.
	startBackstop = 100 * time.Millisecond
	// killWait bounds the wait for a process after SIGKILL.
	killWait = 5 * time.Second
)

// Config configures the process runtime.
type Config struct {
	// RunFolder is the agent's run folder (-r); records live under
	// <RunFolder>/<agent>_io/<instance>/process/.
	RunFolder string
	// Shim is the executable started as the shim; "" = the command
	// grapnel-process-shim (ShimCommand) next to os.Executable() when it
	// is there and executable, else os.Executable() itself. It must call
	// RunShimIfRequested first thing.
	Shim string
	// StopGrace is how long Delete waits after SIGTERM before SIGKILL;
	// 0 = DefaultStopGrace.
	StopGrace time.Duration
	// StartTimeout bounds how long Create waits for the shim to report
	// the workload started; 0 = DefaultStartTimeout.
	StartTimeout time.Duration
	// BootIDFile holds the id of the running boot; "" means
	// DefaultBootIDFile. Every record keeps the boot its processes were
	// started in, so that after a power cycle no recorded pid is taken
	// for the workload, nor signalled. Tests point it at a file of their
	// own to simulate a reboot.
	BootIDFile string
	// UIDs is the range the agent gives each process workload a uid of
	// its own from (see users.go); zero runs workloads as the agent's
	// user unless their runtimeConfig names one. An agent that is not
	// root cannot switch users and ignores it, saying so once.
	UIDs UIDRange
	// Policy is the agent's workload policy level (--workload-policy):
	// at privileged a runtimeConfig may name any user, root included; at
	// baseline only one of Users, never root; at restricted none, and the
	// workload must run under a uid of its own. At every level a uid of
	// UIDs is the one workload's it is given to: no other may name it.
	Policy workloadpolicy.Level
	// Users are the users (names or uids) a runtimeConfig may name at
	// baseline (--workload-users).
	Users  []string
	Logger *slog.Logger
	// Clock drives the start timeout, the polls and the waits of Delete;
	// nil is the system clock.
	Clock clock.Clock
}

// Runtime is the process runtime. It keeps no state of its own: all it
// knows of an instance is in the instance's record directory, so a new
// Runtime on the same run folder (a restarted agent) sees everything.
type Runtime struct {
	cfg Config
	log *slog.Logger
	// boot is the id of the running boot, read once: a Runtime never
	// outlives its boot. "" when the kernel gives none; the start times
	// alone then tell processes apart.
	boot string

	// seenMu guards seen: the processes of each instance as State last
	// read them from its record (see stateWithoutRecord).
	seenMu sync.Mutex
	seen   map[runtime.ID]seenProcs

	// euid is the agent's uid; canSetUID says it is root and may start
	// processes as other users. uids is nil when workloads get no uids
	// of their own.
	euid      uint32
	canSetUID bool
	uids      *uidTable
}

var (
	_ runtime.Runtime = (*Runtime)(nil)
	_ runtime.Owners  = (*Runtime)(nil)
)

// New checks the configuration and returns the runtime.
func New(cfg Config) (*Runtime, error) {
	if cfg.RunFolder == "" {
		return nil, errors.New("process runtime: Config.RunFolder: required")
	}
	abs, err := filepath.Abs(cfg.RunFolder)
	if err != nil {
		return nil, fmt.Errorf("process runtime: Config.RunFolder: %w", err)
	}
	cfg.RunFolder = abs
	log := cfg.Logger
	if log == nil {
		log = slog.Default()
	}
	log = log.With("runtime", "process")
	if cfg.Shim == "" {
		if cfg.Shim, err = defaultShim(log); err != nil {
			return nil, err
		}
	} else {
		log.Info("workload processes start through the configured shim", "shim", cfg.Shim)
	}
	if err := checkExecutable(cfg.Shim); err != nil {
		return nil, fmt.Errorf("process runtime: Config.Shim %q: %w", cfg.Shim, err)
	}
	if cfg.StopGrace <= 0 {
		cfg.StopGrace = DefaultStopGrace
	}
	if cfg.StartTimeout <= 0 {
		cfg.StartTimeout = DefaultStartTimeout
	}
	if cfg.BootIDFile == "" {
		cfg.BootIDFile = DefaultBootIDFile
	}
	if cfg.Clock == nil {
		cfg.Clock = clock.Real()
	}
	r := &Runtime{cfg: cfg, log: log, euid: uint32(os.Geteuid())}
	r.canSetUID = r.euid == 0
	switch {
	case cfg.UIDs.IsZero():
		log.Warn("process workloads run as the agent's user unless their runtimeConfig names one: no uid range (--workload-uid-range)", "uid", r.euid)
	case !r.canSetUID:
		log.Warn("the agent is not root and cannot switch users: process workloads run as the agent's user, not under uids of their own", "uid", r.euid, "range", cfg.UIDs.String())
	default:
		if r.uids, err = loadUIDTable(uidPath(cfg.RunFolder), cfg.UIDs); err != nil {
			return nil, err
		}
	}
	if r.boot, err = readBootID(cfg.BootIDFile); err != nil {
		r.log.Warn("no boot id: a reboot is recognised by process start times alone", "file", cfg.BootIDFile, "error", err)
	}
	if !pidfd.Supported() {
		r.log.Warn("no pidfd (Linux 5.3 or later): workload states are polled rather than watched")
	}
	return r, nil
}

// defaultShim is the shim when Config.Shim is empty: grapnel-process-shim
// in the directory of the running executable, which is far smaller and
// starts with a fraction of the CPU the whole agent takes, or the running
// executable itself when there is none, so that an install of the agent
// alone keeps working. os.Executable has symlinks resolved on Linux: the
// shim is looked for next to the real file.
func defaultShim(log *slog.Logger) (string, error) {
	exe, err := os.Executable()
	if err != nil {
		return "", fmt.Errorf("process runtime: finding the agent's executable for the shim: %w", err)
	}
	sibling := filepath.Join(filepath.Dir(exe), ShimCommand)
	err = checkExecutable(sibling)
	if err == nil {
		log.Info("workload processes start through "+ShimCommand, "shim", sibling)
		return sibling, nil
	}
	if _, serr := os.Stat(sibling); serr == nil {
		log.Warn("not using "+ShimCommand+" next to the agent", "shim", sibling, "error", err)
	}
	log.Info("workload processes start through the agent's own executable: no "+ShimCommand+" next to it", "shim", exe)
	return exe, nil
}

// Name is the workloads' runtime value: "process".
func (r *Runtime) Name() string { return "process" }

// Check parses a rendered runtimeConfig and checks that the user it
// names may be used (Owner checks besides that a uid of the range is the
// workload's own); errors are *ConfigError.
func (r *Runtime) Check(runtimeConfig string) error {
	pc, err := parseConfig(runtimeConfig)
	if err != nil {
		return err
	}
	if pc.User != "" {
		_, err = r.namedUser(pc.User)
		return err
	}
	return r.checkOwnUID()
}

// Create starts the shim for the instance and returns once the workload
// runs, replacing an instance of the same name left over from before.
func (r *Runtime) Create(ctx context.Context, s runtime.Spec) (runtime.ID, error) {
	if s.Workload == nil {
		return "", errors.New("process runtime: Spec.Workload: required")
	}
	pc, err := parseConfig(s.Workload.RuntimeConfig)
	if err != nil {
		return "", err
	}
	id := runtime.ID(s.Instance.String())
	dir, err := r.recordDir(id)
	if err != nil {
		return "", fmt.Errorf("process runtime: Spec.Instance: %w", err)
	}
	if s.RunDir != "" && filepath.Clean(s.RunDir) != filepath.Dir(dir) {
		return "", fmt.Errorf("process runtime: Spec.RunDir %q is not %q, where the instance would be found again", s.RunDir, filepath.Dir(dir))
	}
	if _, err := os.Stat(dir); err == nil {
		if err := r.Delete(ctx, id); err != nil {
			return "", fmt.Errorf("process runtime: replacing the instance left over: %w", err)
		}
	}
	owner, err := r.ownerOf(s.Instance.WorkloadName, pc)
	if err != nil {
		return "", err
	}
	// The run directory is the agent's, entered by the workload's group
	// only; the record directory in it holds the rendered environment
	// and stays the agent's alone. The workload's own directory is its
	// HOME, and its working directory unless the runtimeConfig names one.
	runDir := filepath.Dir(dir)
	if owner != nil {
		if err := traversable(r.cfg.RunFolder, filepath.Dir(runDir)); err != nil {
			return "", fmt.Errorf("process runtime: %w", err)
		}
	}
	if err := runtime.PrepareRunDir(runDir, owner); err != nil {
		return "", fmt.Errorf("process runtime: %w", err)
	}
	if err := durable.MkdirMissing(dir, 0o700); err != nil {
		return "", fmt.Errorf("process runtime: %w", err)
	}
	home := filepath.Join(runDir, workSubdir)
	if err := ownDir(home, owner); err != nil {
		return "", fmt.Errorf("process runtime: the workload's directory: %w", err)
	}
	sp := specRecord{
		Instance:         s.Instance.String(),
		Command:          pc.Command,
		Args:             pc.Args,
		Env:              pc.Env,
		WorkingDir:       pc.WorkingDir,
		Home:             home,
		ControlInterface: s.ControlInterface,
		FilesDir:         s.FilesDir,
		BootID:           r.boot,
	}
	if sp.WorkingDir == "" {
		sp.WorkingDir = home
	}
	if owner != nil {
		sp.User = &shim.User{UID: owner.UID, GID: owner.GID}
	}
	if err := writeJSON(filepath.Join(dir, specFile), sp); err != nil {
		os.RemoveAll(dir)
		return "", fmt.Errorf("process runtime: writing the record: %w", err)
	}
	if err := r.startShim(ctx, dir, id); err != nil {
		os.RemoveAll(dir)
		return "", err
	}
	if owner != nil {
		r.log.Info("workload process started", "instance", id, "uid", owner.UID)
	} else {
		r.log.Info("workload process started", "instance", id)
	}
	return id, nil
}

// startShim starts the shim detached from the agent — own session, its
// output to a file — and waits until it reports the workload started or
// failed. The shim says when it has by closing the write end of a pipe
// (shim.ReadyEnv); the records are read then, and every startBackstop.
func (r *Runtime) startShim(ctx context.Context, dir string, id runtime.ID) error {
	shimLog, err := os.OpenFile(filepath.Join(dir, shimLogFile), os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o600)
	if err != nil {
		return fmt.Errorf("process runtime: %w", err)
	}
	defer shimLog.Close()
	readyR, readyW, err := os.Pipe()
	if err != nil {
		return fmt.Errorf("%w: the shim's ready pipe: %v", ErrStart, err)
	}
	// Closing it ends the goroutine below when the shim keeps its end.
	defer readyR.Close()
	env := withoutVar(withoutVar(os.Environ(), ShimEnv), shim.ReadyEnv)
	cmd := &exec.Cmd{
		Path: r.cfg.Shim,
		Args: []string{r.cfg.Shim, "grapnel-process-shim", string(id)},
		// ExtraFiles[0] is descriptor 3 in the shim.
		Env:         append(env, ShimEnv+"="+dir, shim.ReadyEnv+"=3"),
		Dir:         "/",
		Stdout:      shimLog,
		Stderr:      shimLog,
		ExtraFiles:  []*os.File{readyW},
		SysProcAttr: &syscall.SysProcAttr{Setsid: true},
	}
	err = cmd.Start()
	readyW.Close()
	if err != nil {
		return fmt.Errorf("%w: starting the shim %s: %v", ErrStart, r.cfg.Shim, err)
	}
	ready := make(chan struct{})
	go func() {
		defer close(ready)
		_, _ = io.Copy(io.Discard, readyR) // until the shim closes its end
	}()
	shim := procRef{PID: cmd.Process.Pid, BootID: r.boot}
	shim.StartTime, err = startTime(shim.PID) // a zombie until reaped below, so readable
	exited := make(chan struct{})
	go func() {
		waitShim(shim.PID)
		_ = cmd.Wait() // reap the shim whenever it ends
		close(exited)
	}()
	if err == nil {
		err = writeBootRecord(filepath.Join(dir, shimFile), shim)
	}
	if err != nil {
		// Nothing may run that no record names: the shim, and the
		// workload if the shim got it going meanwhile.
		_ = cmd.Process.Kill()
		<-exited
		if rs, rerr := readRecords(dir, r.boot); rerr == nil {
			rs.childRef().signalGroup(syscall.SIGKILL, r.boot)
		}
		return fmt.Errorf("%w: recording the shim: %w", ErrStart, err)
	}

	deadline := clock.NewTimer(r.cfg.Clock, r.cfg.StartTimeout)
	defer deadline.Stop()
	tick := clock.NewTicker(r.cfg.Clock, startBackstop)
	defer tick.Stop()
	for {
		rs, err := readRecords(dir, r.boot)
		switch {
		case err != nil:
			return fmt.Errorf("%w: %v", ErrStart, err)
		case rs.child != nil:
			return nil
		case rs.startErr != "":
			r.waitGone(ctx, killWait, &shim)
			return fmt.Errorf("%w: %s", ErrStart, rs.startErr)
		}
		select {
		case <-ready:
			ready = nil // read once more; then the backstop and the exit
			continue
		case <-tick.C:
			continue
		case <-exited:
			if rs, err := readRecords(dir, r.boot); err == nil && rs.child != nil {
				return nil
			} else if err == nil && rs.startErr != "" {
				return fmt.Errorf("%w: %s", ErrStart, rs.startErr)
			}
			msg := tailFile(filepath.Join(dir, shimLogFile), 2000)
			if msg == "" {
				msg = cmd.ProcessState.String()
			}
			return fmt.Errorf("%w: the shim %s ended without starting it: %s", ErrStart, r.cfg.Shim, msg)
		case <-deadline.C:
			err = fmt.Errorf("%w: no word from the shim within %v", ErrStart, r.cfg.StartTimeout)
		case <-ctx.Done():
			err = fmt.Errorf("%w: %v", ErrStart, ctx.Err())
		}
		// Given up: stop whatever did start.
		shim.signal(syscall.SIGKILL, r.boot)
		if rs, rerr := readRecords(dir, r.boot); rerr == nil {
			rs.childRef().signalGroup(syscall.SIGKILL, r.boot)
		}
		return err
	}
}

// State observes the instance through its record (see the package doc).
func (r *Runtime) State(ctx context.Context, id runtime.ID) (state.ExecutionState, error) {
	dir, err := r.recordDir(id)
	if err != nil {
		return state.ExecutionState{}, err
	}
	s, rs, err := observeRecords(dir, r.boot)
	switch {
	case errors.Is(err, runtime.ErrNotFound):
		return r.stateWithoutRecord(id, err)
	case err == nil && s == state.RunningOk:
		r.remember(id, rs)
	case err == nil:
		r.forget(id)
	}
	return s, err
}

// observe reads the state of the instance recorded in dir; boot is the
// id of the running boot.
func observe(dir, boot string) (state.ExecutionState, error) {
	s, _, err := observeRecords(dir, boot)
	return s, err
}

// observeRecords is observe, with the records it read first.
func observeRecords(dir, boot string) (state.ExecutionState, records, error) {
	rs, err := readRecords(dir, boot)
	if err != nil {
		return state.ExecutionState{}, rs, err
	}
	return stateOf(dir, boot, rs), rs, nil
}

// stateOf is the state the records rs, read from dir, stand for.
func stateOf(dir, boot string, rs records) state.ExecutionState {
	lost := state.ExecutionState{State: state.StateFailed, SubState: state.SubLost}
	switch {
	case rs.exit != nil:
		return rs.exit.state()
	case rs.child != nil && (rs.childRef().alive(boot) || rs.shim.alive(boot)):
		// A live shim with a dead child is about to record the exit.
		return state.RunningOk
	case rs.child == nil && rs.startErr != "":
		return state.ExecutionState{State: state.StateFailed, SubState: state.SubExecFailed, AdditionalInfo: rs.startErr}
	case rs.child == nil && rs.shim.alive(boot):
		return state.ExecutionState{State: state.StatePending, SubState: state.SubStarting}
	}
	// Nothing runs. The shim may have written the exit and ended since
	// the first read.
	if again, err := readRecords(dir, boot); err == nil && again.exit != nil {
		return again.exit.state()
	}
	rebooted := rs.shim != nil && !sameBoot(rs.shim.BootID, boot)
	switch {
	case rs.child != nil && !sameBoot(rs.child.BootID, boot):
		lost.AdditionalInfo = fmt.Sprintf("process %d was started before the host restarted", rs.child.PID)
	case rs.child != nil:
		lost.AdditionalInfo = fmt.Sprintf("process %d is gone and its exit was not recorded", rs.child.PID)
	case rebooted:
		lost.AdditionalInfo = "the host restarted before the process started"
	default:
		lost.AdditionalInfo = "the process runtime's shim ended before the process started"
	}
	return lost
}

// Delete stops the workload (SIGTERM to its process group, SIGKILL after
// Config.StopGrace), waits for it and its shim to end and removes the
// record. An instance without a record is already gone.
func (r *Runtime) Delete(ctx context.Context, id runtime.ID) error {
	dir, err := r.recordDir(id)
	if err != nil {
		return err
	}
	rs, err := readRecords(dir, r.boot)
	if errors.Is(err, runtime.ErrNotFound) {
		return r.deleteWithoutRecord(ctx, id)
	}
	if err != nil {
		return fmt.Errorf("process runtime: deleting %s: %w", id, err)
	}
	r.forget(id)
	if rs.child == nil && rs.shim.alive(r.boot) {
		// Still starting: let the shim get the workload going (or fail),
		// so that there is a pid to stop and nothing starts afterwards.
		r.waitFor(ctx, r.cfg.StartTimeout, func() bool {
			rs, err = readRecords(dir, r.boot)
			return err != nil || rs.child != nil || rs.startErr != "" || !rs.shim.alive(r.boot)
		})
		if rs, err = readRecords(dir, r.boot); err != nil {
			return nil // removed meanwhile
		}
	}
	child := rs.childRef()
	child.signalGroup(syscall.SIGTERM, r.boot)
	if !r.waitGone(ctx, r.cfg.StopGrace, child, rs.shim) {
		if child.alive(r.boot) {
			r.log.Warn("workload process ignored SIGTERM, killing it", "instance", id, "pid", child.PID, "grace", r.cfg.StopGrace)
		}
		child.signalGroup(syscall.SIGKILL, r.boot)
		if !r.waitGone(ctx, killWait, child) {
			return fmt.Errorf("process runtime: deleting %s: process %d did not end after SIGKILL", id, child.PID)
		}
		// The shim records the exit and ends on its own; one that
		// hangs is not worth keeping the record for.
		if !r.waitGone(ctx, killWait, rs.shim) {
			rs.shim.signal(syscall.SIGKILL, r.boot)
			r.waitGone(ctx, killWait, rs.shim)
		}
	}
	if err := ctx.Err(); err != nil {
		return fmt.Errorf("process runtime: deleting %s: %w", id, err)
	}
	if err := os.RemoveAll(dir); err != nil {
		return fmt.Errorf("process runtime: deleting %s: %w", id, err)
	}
	r.log.Info("workload process deleted", "instance", id)
	return nil
}

// waitFor polls cond until it holds, d has passed or ctx ends.
func (r *Runtime) waitFor(ctx context.Context, d time.Duration, cond func() bool) bool {
	deadline := clock.NewTimer(r.cfg.Clock, d)
	defer deadline.Stop()
	tick := clock.NewTicker(r.cfg.Clock, pollInterval)
	defer tick.Stop()
	for !cond() {
		select {
		case <-tick.C:
		case <-deadline.C:
			return cond()
		case <-ctx.Done():
			return false
		}
	}
	return true
}

// List returns every instance with a record for the agent, running or
// ended, for a restarted agent to adopt.
func (r *Runtime) List(ctx context.Context, agent string) ([]runtime.Found, error) {
	if !validPart(agent) {
		return nil, fmt.Errorf("process runtime: agent name %q: empty or uses characters other than [a-zA-Z0-9_-]", agent)
	}
	ioDir := filepath.Join(r.cfg.RunFolder, agent+"_io")
	entries, err := os.ReadDir(ioDir)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("process runtime: %w", err)
	}
	var found []runtime.Found
	for _, e := range entries {
		name := e.Name()
		dir := filepath.Join(ioDir, name, recordSubdir)
		if fi, err := os.Stat(dir); err != nil || !fi.IsDir() {
			continue // an instance of another runtime
		}
		inst, err := recordedInstance(dir, name)
		if err != nil {
			r.log.Warn("skipping a process record", "dir", dir, "err", err)
			continue
		}
		if inst.AgentName != agent {
			continue
		}
		found = append(found, runtime.Found{Instance: inst, ID: runtime.ID(name)})
	}
	slices.SortFunc(found, func(a, b runtime.Found) int { return strings.Compare(string(a.ID), string(b.ID)) })
	return found, nil
}

// recordedInstance reads the instance name from the record. A record
// without a readable spec (the agent died while creating it) is named by
// its directory, so that the agent can still delete it.
func recordedInstance(dir, name string) (state.InstanceName, error) {
	var sp specRecord
	err := readJSON(filepath.Join(dir, specFile), &sp)
	if errors.Is(err, fs.ErrNotExist) {
		return parseID(runtime.ID(name))
	}
	if err != nil {
		return state.InstanceName{}, err
	}
	inst, err := parseID(runtime.ID(sp.Instance))
	if err != nil {
		return state.InstanceName{}, err
	}
	if sp.Instance != name {
		return state.InstanceName{}, fmt.Errorf("the record names instance %q, its directory %q", sp.Instance, name)
	}
	return inst, nil
}

// PID returns the recorded pid of the workload process, for tests and
// diagnostics that need to prove a workload was not restarted.
func (r *Runtime) PID(id runtime.ID) (int, error) {
	dir, err := r.recordDir(id)
	if err != nil {
		return 0, err
	}
	rs, err := readRecords(dir, r.boot)
	if err != nil {
		return 0, err
	}
	if rs.child == nil {
		return 0, fmt.Errorf("%w: instance %s has no running process recorded", runtime.ErrNotFound, id)
	}
	return rs.child.PID, nil
}

func withoutVar(env []string, name string) []string {
	out := env[:0:0]
	for _, kv := range env {
		if !strings.HasPrefix(kv, name+"=") {
			out = append(out, kv)
		}
	}
	return out
}
