package containerd

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/grapnel-io/grapnel/agent/runtime"
	"github.com/grapnel-io/grapnel/internal/clock"
	"github.com/grapnel-io/grapnel/state"
)

// Name is the workload `runtime` value this runtime serves.
const Name = "containerd"

// Defaults of Config.
const (
	DefaultAddress   = "/run/containerd/containerd.sock"
	DefaultNamespace = "default"
	DefaultStopGrace = 10 * time.Second
)

// Labels every container of Grapnel carries. name and agent are the
// Ankaios labels: List finds an agent's containers by agent and recovers
// the instance from name. The grapnel.* ones are the runtime's own
// memory, kept with the container so that a restarted agent finds it.
const (
	labelName  = "name"
	labelAgent = "agent"
	// labelLog is the host path of the container's output log.
	labelLog = "grapnel.log"
	// labelExit is the exit code of the container's last task, set when
	// the runtime reaps it: containerd forgets an exit once its task is
	// deleted, and a stopped task does not survive a reboot.
	labelExit = "grapnel.exit"
	// nerdctlLogURILabel is where nerdctl keeps the log URI that
	// `nerdctl start` gives a container's new task.
	nerdctlLogURILabel = "nerdctl/log-uri"
)

// logFile is the name of the output log in the instance's run directory.
const logFile = "containerd.log"

// stateMaxAge is how old a shared `ctr tasks ls` answer may be for State,
// as Ankaios polls every 500 ms.
const stateMaxAge = 500 * time.Millisecond

// availableTimeout bounds Available's question to a containerd that
// has a socket but does not answer.
const availableTimeout = 5 * time.Second

// Config configures the containerd runtime.
type Config struct {
	// Binary is the nerdctl executable; "" means "nerdctl" from PATH.
	Binary string
	// Ctr is containerd's ctr executable, for what nerdctl cannot do
	// (see doc.go); "" means "ctr" from PATH.
	Ctr string
	// DataRoot is nerdctl's data root (its names, container state and
	// network hooks' data); "" means nerdctl's default,
	// /var/lib/nerdctl.
	DataRoot string
	// CNINetconfPath is nerdctl's CNI configuration directory; "" means
	// nerdctl's default, /etc/cni/net.d.
	CNINetconfPath string
	// LoggerBinary is the program containerd's shim runs as every
	// container's logger; it must call RunLoggerIfRequested first. ""
	// means this executable (grapnel-agent, or a test binary).
	LoggerBinary string
	// Address is containerd's socket; "" means DefaultAddress.
	Address string
	// Namespace is the containerd namespace of the agent's containers;
	// "" means DefaultNamespace, nerdctl's.
	Namespace string
	// StopGrace is the time between SIGTERM and SIGKILL in Delete; 0
	// means DefaultStopGrace.
	StopGrace time.Duration
	// Logger receives debug lines for every nerdctl and ctr call; nil
	// discards.
	Logger *slog.Logger
	// Clock times the calls and dates the shared answers; nil is the
	// system clock.
	Clock clock.Clock
}

// Runtime runs workloads as containerd containers through nerdctl. It
// keeps no state of its own beyond short-lived answers: containers are
// found again by their labels.
type Runtime struct {
	binary, ctr, address, namespace string
	dataRoot, netconf               string
	logger                          string
	grace                           time.Duration
	log                             *slog.Logger
	clock                           clock.Clock

	mu   sync.Mutex // guards snap and reaping
	snap *snapshot
}

var (
	_ runtime.Runtime   = (*Runtime)(nil)
	_ runtime.Restarter = (*Runtime)(nil)
)

// snapshot is one look at containerd: its containers and their tasks.
type snapshot struct {
	at         time.Time
	containers map[string]bool
	tasks      map[string]string // container id -> task status
}

func (r *Runtime) clk() clock.Clock {
	if r.clock == nil {
		return clock.Real()
	}
	return r.clock
}

// New returns the containerd runtime; it fails when nerdctl or ctr is
// missing. Whether containerd answers is Available's question.
func New(cfg Config) (*Runtime, error) {
	nerdctl, err := lookPath(cfg.Binary, "nerdctl")
	if err != nil {
		return nil, fmt.Errorf("containerd runtime: %w (scripts/containerd-setup.sh builds it)", err)
	}
	ctr, err := lookPath(cfg.Ctr, "ctr")
	if err != nil {
		return nil, fmt.Errorf("containerd runtime: %w", err)
	}
	r := &Runtime{binary: nerdctl, ctr: ctr, address: cfg.Address, namespace: cfg.Namespace, dataRoot: cfg.DataRoot, netconf: cfg.CNINetconfPath,
		grace: cfg.StopGrace, log: cfg.Logger, clock: cfg.Clock}
	if r.address == "" {
		r.address = DefaultAddress
	}
	if r.logger = cfg.LoggerBinary; r.logger == "" {
		if r.logger, err = os.Executable(); err != nil {
			return nil, fmt.Errorf("containerd runtime: the logger binary: %w", err)
		}
	}
	if r.namespace == "" {
		r.namespace = DefaultNamespace
	}
	if r.grace <= 0 {
		r.grace = DefaultStopGrace
	}
	if r.log == nil {
		r.log = slog.New(slog.DiscardHandler)
	}
	return r, nil
}

func lookPath(bin, def string) (string, error) {
	if bin == "" {
		bin = def
	}
	return exec.LookPath(bin)
}

// Available reports whether nerdctl and ctr are installed and containerd answers on
// the configured socket, i.e. whether workloads could run.
func Available(cfg Config) bool {
	r, err := New(cfg)
	if err != nil {
		return false
	}
	// Without a socket ctr would wait its whole dial timeout (10 s) to
	// say so: an agent on a host without containerd must start at once.
	if fi, err := os.Stat(r.address); err != nil || fi.Mode()&os.ModeSocket == 0 {
		return false
	}
	_, err = r.exec(context.Background(), availableTimeout, "version")
	return err == nil
}

// Name returns "containerd".
func (r *Runtime) Name() string { return Name }

// Check parses a rendered runtimeConfig.
func (r *Runtime) Check(runtimeConfig string) error {
	_, err := parseConfig(runtimeConfig)
	return err
}

// Create removes the leftover containers of the instance, pulls the
// image when containerd does not have it, then runs a new container
// detached and returns its id.
func (r *Runtime) Create(ctx context.Context, s runtime.Spec) (runtime.ID, error) {
	if s.Workload == nil {
		return "", fmt.Errorf("containerd: create %s: no workload", s.Instance)
	}
	cfg, err := parseConfig(s.Workload.RuntimeConfig)
	if err != nil {
		return "", err
	}
	logPath := filepath.Join(s.RunDir, logFile)
	args, err := runArgs(cfg, s, r.logger, logPath)
	if err != nil {
		return "", err
	}
	if err := r.removeInstance(ctx, s.Instance); err != nil {
		return "", fmt.Errorf("removing the leftover container of %s: %w", s.Instance, err)
	}
	if err := r.ensureImage(ctx, cfg.Image); err != nil {
		return "", err
	}
	defer r.invalidate()
	res, err := r.nerdctlWith(ctx, runTimeout, cfg.GeneralOptions, args...)
	id := strings.TrimSpace(res.stdout)
	if err == nil && !validID(id) {
		err = fmt.Errorf("nerdctl run printed %q, not a container id", id)
	}
	if err != nil {
		// nerdctl run leaves the container behind when its task cannot
		// start (the command is not in the image); a later List must
		// not adopt it.
		if rmErr := r.removeInstance(context.WithoutCancel(ctx), s.Instance); rmErr != nil {
			r.log.Warn("containerd: cannot remove a failed container", "instance", s.Instance.String(), "err", rmErr)
		}
		return "", err
	}
	return runtime.ID(id), nil
}

// runArgs is the `nerdctl run` command line of one instance (after the
// workload's generalOptions), as Ankaios builds it:
//
//	run --detach --name= --log-driver binary://<logger>?...=<log> --pull never <commandOptions>
//	<mounts> --label name=<instance> --label agent=<agent> --label grapnel.log=<log> <image> <commandArgs>
//
// nerdctl chooses the container's id and prints it; the container has no
// nerdctl name. The labels
// come last so that a workload cannot change them (nerdctl keeps the last
// of a key); nerdctl reads no option after the image, so every command
// argument, even one that looks like an option, reaches the container.
func runArgs(c runConfig, s runtime.Spec, logger, logPath string) ([]string, error) {
	inst := s.Instance.String()
	// --name= gives the container no nerdctl name: the one nerdctl
	// makes up (the image and 5 hex digits of the id) collides among
	// many containers of one image, and fails the run.
	args := []string{"run", "--detach", "--name=", "--log-driver", logURI(logger, logPath), "--pull", "never"}
	args = append(args, c.CommandOptions...)
	for i, m := range s.Mounts {
		arg, err := bindMount(m.HostPath, m.MountPoint, true)
		if err != nil {
			return nil, fmt.Errorf("files[%d]: %w", i, err)
		}
		args = append(args, "--mount", arg)
	}
	if s.ControlInterface != "" {
		// Read-write: the workload opens the FIFOs for writing too.
		arg, err := bindMount(s.ControlInterface, runtime.ContainerControlInterface, false)
		if err != nil {
			return nil, fmt.Errorf("control interface: %w", err)
		}
		args = append(args, "--mount", arg)
	}
	args = append(args,
		"--label", labelName+"="+inst,
		"--label", labelAgent+"="+s.Instance.AgentName,
		"--label", labelLog+"="+logPath,
		c.Image)
	return append(args, c.CommandArgs...), nil
}

// bindMount is one `nerdctl run --mount` value. nerdctl reads it as CSV,
// so paths holding a comma, a quote or a newline are refused.
func bindMount(host, target string, readonly bool) (string, error) {
	for _, p := range []string{host, target} {
		if strings.ContainsAny(p, ",\"\n") {
			return "", fmt.Errorf("path %q contains a comma, a quote or a newline, which nerdctl's --mount cannot express", p)
		}
	}
	m := "type=bind,source=" + host + ",target=" + target
	if readonly {
		m += ",readonly"
	}
	return m, nil
}

// ensureImage pulls the image unless containerd has it, as nerdctl run
// does, but saying so when it cannot.
func (r *Runtime) ensureImage(ctx context.Context, image string) error {
	if _, err := r.nerdctl(ctx, callTimeout, "image", "inspect", image); err == nil {
		return nil
	}
	if _, err := r.nerdctl(ctx, runTimeout, "pull", "--quiet", image); err != nil {
		return fmt.Errorf("containerd has no image %s and cannot pull it: %w", image, err)
	}
	return nil
}

// StartAgain starts the ended container of the instance again with a new
// task (`nerdctl start`), as Ankaios does at the agent's start for a
// container that exited successfully: the container keeps its writable
// layer. A container that is not the instance's is refused; one that
// cannot be started is removed, so that Create can replace it.
func (r *Runtime) StartAgain(ctx context.Context, id runtime.ID, s runtime.Spec) (runtime.ID, error) {
	if s.Workload == nil {
		return "", fmt.Errorf("containerd: start %s again: no workload", s.Instance)
	}
	if _, err := parseConfig(s.Workload.RuntimeConfig); err != nil {
		return "", err
	}
	info, err := r.info(ctx, string(id))
	if err != nil {
		return "", fmt.Errorf("containerd: start %s again: %w", s.Instance, err)
	}
	if info.Labels[labelName] != s.Instance.String() || info.Labels[labelAgent] != s.Instance.AgentName {
		return "", fmt.Errorf("containerd: start %s again: container %s belongs to %q of agent %q", s.Instance, id, info.Labels[labelName], info.Labels[labelAgent])
	}
	defer r.invalidate()
	fail := func(err error) (runtime.ID, error) {
		if rmErr := r.remove(context.WithoutCancel(ctx), string(id)); rmErr != nil {
			r.log.Warn("containerd: cannot remove a container that did not start again", "instance", s.Instance.String(), "err", rmErr)
		}
		return "", err
	}
	// nerdctl cannot change a container's labels: ctr forgets the last
	// exit and points the log, and nerdctl's log URI, at this run
	// folder and this agent binary (either may have moved since the
	// container was made). nerdctl start deletes a stopped task left.
	logPath := filepath.Join(s.RunDir, logFile)
	if _, err := r.exec(ctx, callTimeout, "containers", "label", string(id), labelExit+"=", labelLog+"="+logPath,
		nerdctlLogURILabel+"="+logURI(r.logger, logPath)); err != nil {
		return fail(err)
	}
	if _, err := r.nerdctl(ctx, runTimeout, "start", string(id)); err != nil {
		return fail(err)
	}
	return id, nil
}

// State observes a container. One containerd no longer knows is
// runtime.ErrNotFound; when containerd cannot answer, the state is
// Failed(Unknown) with ctr's error.
func (r *Runtime) State(ctx context.Context, id runtime.ID) (state.ExecutionState, error) {
	st, err := r.state(ctx, string(id))
	switch {
	case err == nil:
		return st, nil
	case errors.Is(err, runtime.ErrNotFound), ctx.Err() != nil:
		return state.ExecutionState{}, err
	}
	return state.ExecutionState{State: state.StateFailed, SubState: state.SubUnknown, AdditionalInfo: err.Error()}, nil
}

func (r *Runtime) state(ctx context.Context, id string) (state.ExecutionState, error) {
	if !validID(id) {
		return state.ExecutionState{}, fmt.Errorf("container id %q: %w", id, runtime.ErrNotFound)
	}
	begin := r.clk().Now()
	snap, err := r.look(ctx, begin.Add(-stateMaxAge))
	if err != nil {
		return state.ExecutionState{}, err
	}
	if !snap.containers[id] && snap.at.Before(begin) {
		if snap, err = r.look(ctx, begin); err != nil {
			return state.ExecutionState{}, err
		}
	}
	if !snap.containers[id] {
		return state.ExecutionState{}, fmt.Errorf("container %s: %w", id, runtime.ErrNotFound)
	}
	switch status := snap.tasks[id]; status {
	case "RUNNING", "PAUSED", "PAUSING":
		return state.RunningOk, nil
	case "CREATED":
		return state.ExecutionState{State: state.StatePending, SubState: state.SubStarting, AdditionalInfo: "created"}, nil
	case "STOPPED":
		if err := r.reap(ctx, id); err != nil {
			return state.ExecutionState{}, err
		}
	case "":
	default:
		return state.ExecutionState{State: state.StateFailed, SubState: state.SubUnknown, AdditionalInfo: "task " + strings.ToLower(status)}, nil
	}
	info, err := r.info(ctx, id)
	if err != nil {
		return state.ExecutionState{}, err
	}
	return exitState(info.Labels)
}

// exitState is the state of a container without a task: what its exit
// label says, or Failed(Lost) when it has none (the host restarted while
// the task ran, or the task was deleted behind the agent's back).
func exitState(labels map[string]string) (state.ExecutionState, error) {
	v, ok := labels[labelExit]
	if !ok {
		return state.ExecutionState{State: state.StateFailed, SubState: state.SubLost,
			AdditionalInfo: "the container has no task and no recorded exit: the host restarted while it ran, or its task was deleted"}, nil
	}
	code, err := strconv.Atoi(v)
	if err != nil {
		return state.ExecutionState{State: state.StateFailed, SubState: state.SubUnknown, AdditionalInfo: fmt.Sprintf("label %s=%q is not an exit code", labelExit, v)}, nil
	}
	if code == 0 {
		return state.SucceededOk, nil
	}
	return state.ExecutionState{State: state.StateFailed, SubState: state.SubExecFailed, AdditionalInfo: fmt.Sprintf("exit code %d", code)}, nil
}

// exitWarning is how ctr (containerd 1.6 to 2.x) reports the exit code
// of the task it deleted; an exit code 0 is not reported.
var exitWarning = regexp.MustCompile(`exit with non-zero exit code (\d+)`)

// reap deletes a stopped task and keeps its exit code in the container's
// label: containerd forgets it with the task.
func (r *Runtime) reap(ctx context.Context, id string) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	res, err := r.exec(ctx, callTimeout, "tasks", "delete", id)
	if notFound(err) {
		return nil // reaped meanwhile (by another caller, or by Delete)
	}
	if err != nil {
		return err
	}
	code := 0
	if m := exitWarning.FindStringSubmatch(res.stderr); m != nil {
		code, _ = strconv.Atoi(m[1])
	}
	r.snap = nil
	_, err = r.exec(ctx, callTimeout, "containers", "label", id, labelExit+"="+strconv.Itoa(code))
	if notFound(err) {
		return fmt.Errorf("container %s: %w", id, runtime.ErrNotFound) // deleted meanwhile
	}
	return err
}

// look returns a snapshot taken no earlier than notBefore, shared by the
// pollers of all instances.
func (r *Runtime) look(ctx context.Context, notBefore time.Time) (*snapshot, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.snap != nil && !r.snap.at.Before(notBefore) {
		return r.snap, nil
	}
	at := r.clk().Now()
	cs, err := r.exec(ctx, callTimeout, "containers", "ls", "-q")
	if err != nil {
		return nil, err
	}
	ts, err := r.exec(ctx, callTimeout, "tasks", "ls")
	if err != nil {
		return nil, err
	}
	s := &snapshot{at: at, containers: map[string]bool{}, tasks: parseTasks(ts.stdout)}
	for _, id := range strings.Fields(cs.stdout) {
		s.containers[id] = true
	}
	r.snap = s
	return s, nil
}

// parseTasks reads `ctr tasks ls`: a header, then TASK PID STATUS.
func parseTasks(out string) map[string]string {
	tasks := map[string]string{}
	for i, line := range strings.Split(out, "\n") {
		f := strings.Fields(line)
		if i == 0 || len(f) < 3 {
			continue
		}
		tasks[f[0]] = f[2]
	}
	return tasks
}

func (r *Runtime) invalidate() {
	r.mu.Lock()
	r.snap = nil
	r.mu.Unlock()
}

// containerInfo is the part of `ctr containers info` the runtime reads.
type containerInfo struct {
	ID     string            `json:"ID"`
	Labels map[string]string `json:"Labels"`
}

func (r *Runtime) info(ctx context.Context, id string) (containerInfo, error) {
	res, err := r.exec(ctx, callTimeout, "containers", "info", id)
	if notFound(err) {
		return containerInfo{}, fmt.Errorf("container %s: %w", id, runtime.ErrNotFound)
	}
	if err != nil {
		return containerInfo{}, err
	}
	var c containerInfo
	if err := json.Unmarshal([]byte(res.stdout), &c); err != nil {
		return containerInfo{}, fmt.Errorf("ctr containers info: cannot parse its output: %w", err)
	}
	return c, nil
}

// Delete stops the container's task (SIGTERM, SIGKILL after the grace
// period) and removes the container with its writable layer. A container
// that is already gone is not an error.
func (r *Runtime) Delete(ctx context.Context, id runtime.ID) error {
	if !validID(string(id)) {
		return nil
	}
	defer r.invalidate()
	return r.remove(ctx, string(id))
}

// remove stops one container (`nerdctl stop`: SIGTERM, SIGKILL after
// the grace period) and removes it with `nerdctl rm`, which also frees
// what nerdctl holds for it (its network, its state directory).
func (r *Runtime) remove(ctx context.Context, id string) error {
	grace := int((r.grace + time.Second - 1) / time.Second)
	if _, err := r.nerdctl(ctx, r.grace+callTimeout, "stop", "--time", strconv.Itoa(grace), id); err != nil && !notFound(err) {
		return err
	}
	if _, err := r.nerdctl(ctx, callTimeout, "rm", "--force", id); err != nil && !notFound(err) {
		return err
	}
	return nil
}

// List returns the containers labelled with the agent's name; one whose
// name label is not an instance name is skipped.
func (r *Runtime) List(ctx context.Context, agent string) ([]runtime.Found, error) {
	ids, err := r.byLabel(ctx, labelAgent, agent)
	if err != nil {
		return nil, err
	}
	var found []runtime.Found
	for _, id := range ids {
		info, err := r.info(ctx, id)
		if errors.Is(err, runtime.ErrNotFound) {
			continue // removed since
		}
		if err != nil {
			return nil, err
		}
		inst, err := state.ParseInstanceName(info.Labels[labelName])
		if err != nil || info.Labels[labelAgent] != agent {
			r.log.Debug("containerd: skipping a container without an instance name", "id", id, "name", info.Labels[labelName])
			continue
		}
		found = append(found, runtime.Found{Instance: inst, ID: runtime.ID(id)})
	}
	return found, nil
}

// ContainerID returns the id of the container of an instance, found by
// its name label; runtime.ErrNotFound when there is none. Tests use it to
// prove that a container was adopted rather than recreated.
func (r *Runtime) ContainerID(ctx context.Context, inst state.InstanceName) (string, error) {
	ids, err := r.byLabel(ctx, labelName, inst.String())
	if err != nil {
		return "", err
	}
	switch len(ids) {
	case 0:
		return "", fmt.Errorf("container of %s: %w", inst, runtime.ErrNotFound)
	case 1:
		return ids[0], nil
	}
	return "", fmt.Errorf("%d containers carry the label %s=%s", len(ids), labelName, inst)
}

// byLabel lists the ids of the containers with label key=value, sorted.
func (r *Runtime) byLabel(ctx context.Context, key, value string) ([]string, error) {
	res, err := r.exec(ctx, callTimeout, "containers", "ls", "-q", fmt.Sprintf("labels.%q==%q", key, value))
	if err != nil {
		return nil, err
	}
	ids := strings.Fields(res.stdout)
	sort.Strings(ids)
	return ids, nil
}

// removeInstance removes every container that carries the instance's
// name label.
func (r *Runtime) removeInstance(ctx context.Context, inst state.InstanceName) error {
	ids, err := r.byLabel(ctx, labelName, inst.String())
	if err != nil {
		return err
	}
	defer r.invalidate()
	for _, id := range ids {
		if err := r.remove(ctx, id); err != nil {
			return err
		}
	}
	return nil
}

// validID accepts a containerd container id and refuses what ctr would
// read as an option.
func validID(id string) bool {
	if id == "" || id[0] == '-' || len(id) > 76 {
		return false
	}
	for _, c := range id {
		if !(c >= '0' && c <= '9' || c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c == '_' || c == '.' || c == '-') {
			return false
		}
	}
	return true
}
