package podman

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math"
	"os/exec"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/grapnel-io/grapnel/agent/runtime"
	"github.com/grapnel-io/grapnel/internal/clock"
	"github.com/grapnel-io/grapnel/state"
)

// Name is the workload `runtime` value this runtime serves.
const Name = "podman"

// DefaultStopGrace is how long Delete waits after SIGTERM before podman
// kills the container; it is podman's own default.
const DefaultStopGrace = 10 * time.Second

// Config configures the podman runtime.
type Config struct {
	// Binary is the podman executable; "" means "podman" from PATH.
	Binary string
	// StopGrace is the time between SIGTERM and SIGKILL in Delete (and
	// when a leftover container is replaced); 0 means DefaultStopGrace.
	// Podman counts it in whole seconds, so it is rounded up.
	StopGrace time.Duration
	// Logger receives debug lines for every podman call; nil discards.
	Logger *slog.Logger
	// Clock dates the `podman ps` answers and times the calls; nil is
	// the system clock.
	Clock clock.Clock
}

// Runtime runs workloads as podman containers through the podman CLI.
// It keeps no state of its own beyond a short-lived `podman ps` answer:
// containers are found again by their labels.
type Runtime struct {
	binary string
	grace  time.Duration
	log    *slog.Logger
	clock  clock.Clock // nil is the system clock
	ps     psCache
}

// clk is the configured clock, or the system clock.
func (r *Runtime) clk() clock.Clock {
	if r.clock == nil {
		return clock.Real()
	}
	return r.clock
}

var _ runtime.Runtime = (*Runtime)(nil)

// New returns the podman runtime; it fails when the binary is missing.
// Whether podman actually works is Available's question.
func New(cfg Config) (*Runtime, error) {
	bin := cfg.Binary
	if bin == "" {
		bin = "podman"
	}
	path, err := exec.LookPath(bin)
	if err != nil {
		return nil, fmt.Errorf("podman runtime: %w", err)
	}
	r := &Runtime{binary: path, grace: cfg.StopGrace, log: cfg.Logger, clock: cfg.Clock}
	if r.grace <= 0 {
		r.grace = DefaultStopGrace
	}
	if r.log == nil {
		r.log = slog.New(slog.DiscardHandler)
	}
	r.ps.fetch = r.psAll
	r.ps.clock = r.clk()
	return r, nil
}

// Available reports whether podman is installed and `podman info` works,
// i.e. whether workloads could run. binary "" means "podman" from PATH.
func Available(binary string) bool {
	r, err := New(Config{Binary: binary})
	if err != nil {
		return false
	}
	_, err = r.exec(context.Background(), callTimeout, "info", "--format", "{{.Host.OCIRuntime.Name}}")
	return err == nil
}

// Name returns "podman".
func (r *Runtime) Name() string { return Name }

// Check parses a rendered runtimeConfig.
func (r *Runtime) Check(runtimeConfig string) error {
	_, err := parseConfig(runtimeConfig)
	return err
}

// Create removes a leftover container of the same instance, then runs a
// new one detached and returns its container id.
func (r *Runtime) Create(ctx context.Context, s runtime.Spec) (runtime.ID, error) {
	if s.Workload == nil {
		return "", fmt.Errorf("podman: create %s: no workload", s.Instance)
	}
	cfg, err := parseConfig(s.Workload.RuntimeConfig)
	if err != nil {
		return "", err
	}
	args, err := runArgs(cfg, s)
	if err != nil {
		return "", err
	}
	if err := r.removeInstance(ctx, s.Instance); err != nil {
		return "", fmt.Errorf("removing the leftover container of %s: %w", s.Instance, err)
	}
	defer r.ps.invalidate()
	out, err := r.exec(ctx, runTimeout, args...)
	if err != nil {
		// `podman run` may leave a created container behind (e.g. the
		// command is not in the image); a later List must not adopt it.
		if rmErr := r.removeInstance(context.WithoutCancel(ctx), s.Instance); rmErr != nil {
			r.log.Warn("podman: cannot remove a failed container", "instance", s.Instance.String(), "err", rmErr)
		}
		return "", err
	}
	id := lastLine(out)
	if !validID(id) {
		return "", fmt.Errorf("podman run: unexpected output %q, expected a container id", out)
	}
	return runtime.ID(id), nil
}

var _ runtime.Restarter = (*Runtime)(nil)

// StartAgain starts an ended container of the instance again with
// `podman start`, as Ankaios does at the agent's start for a container
// that exited successfully: the container keeps its writable layer, and
// after a power cycle (podman marks every container that ran in the
// earlier boot Exited) the workload comes back as it was. A container
// that is not the instance's is refused; one that cannot be started is
// removed, so that Create can replace it.
//
// swdd~podman-create-workload-starts-existing-workload~1
func (r *Runtime) StartAgain(ctx context.Context, id runtime.ID, s runtime.Spec) (runtime.ID, error) {
	if s.Workload == nil {
		return "", fmt.Errorf("podman: start %s again: no workload", s.Instance)
	}
	cfg, err := parseConfig(s.Workload.RuntimeConfig)
	if err != nil {
		return "", err
	}
	c, err := r.lookup(ctx, id, 0)
	if err != nil {
		return "", fmt.Errorf("podman: start %s again: %w", s.Instance, err)
	}
	if c.Labels[labelName] != s.Instance.String() || c.Labels[labelAgent] != s.Instance.AgentName {
		return "", fmt.Errorf("podman: start %s again: container %s belongs to %q of agent %q", s.Instance, id, c.Labels[labelName], c.Labels[labelAgent])
	}
	defer r.ps.invalidate()
	args := append(append([]string(nil), cfg.GeneralOptions...), "start", string(id))
	if _, err := r.exec(ctx, runTimeout, args...); err != nil {
		if rmErr := r.removeInstance(context.WithoutCancel(ctx), s.Instance); rmErr != nil {
			r.log.Warn("podman: cannot remove a container that did not start again", "instance", s.Instance.String(), "err", rmErr)
		}
		return "", err
	}
	return id, nil
}

// State observes a container. A container podman no longer knows is
// runtime.ErrNotFound; when podman itself cannot answer, the state is
// Failed(Unknown) with podman's error as additional info.
func (r *Runtime) State(ctx context.Context, id runtime.ID) (state.ExecutionState, error) {
	c, err := r.lookup(ctx, id, stateMaxAge)
	switch {
	case err == nil:
		return execState(c), nil
	case errors.Is(err, runtime.ErrNotFound), ctx.Err() != nil:
		return state.ExecutionState{}, err
	}
	return state.ExecutionState{State: state.StateFailed, SubState: state.SubUnknown, AdditionalInfo: err.Error()}, nil
}

// lookup finds a container by id: in a shared `podman ps` answer at most
// maxAge old, and, before saying it is gone, in one taken after the call
// began.
func (r *Runtime) lookup(ctx context.Context, id runtime.ID, maxAge time.Duration) (container, error) {
	if !validID(string(id)) {
		return container{}, fmt.Errorf("container id %q: %w", id, runtime.ErrNotFound)
	}
	begin := r.clk().Now()
	snap, err := r.ps.get(ctx, begin.Add(-maxAge))
	if err != nil {
		return container{}, err
	}
	c, ok := snap.byID[string(id)]
	if !ok && snap.at.Before(begin) {
		if snap, err = r.ps.get(ctx, begin); err != nil {
			return container{}, err
		}
		c, ok = snap.byID[string(id)]
	}
	if !ok {
		return container{}, fmt.Errorf("container %s: %w", id, runtime.ErrNotFound)
	}
	return c, nil
}

// Delete stops the container (SIGTERM, SIGKILL after the grace period)
// and removes it. A container that is already gone is not an error.
func (r *Runtime) Delete(ctx context.Context, id runtime.ID) error {
	if !validID(string(id)) {
		return nil
	}
	defer r.ps.invalidate()
	if _, err := r.exec(ctx, r.grace+stopSlack, "stop", "--ignore", "-t", r.graceSeconds(), string(id)); err != nil {
		return err
	}
	_, err := r.exec(ctx, callTimeout, "rm", "--force", "--ignore", "-t", "0", string(id))
	return err
}

// List returns the containers labelled with the agent's name; a container
// whose name label is not an instance name is skipped. The answer comes
// from a `podman ps --all` started after the call, the one the state
// polls share: a drift repair round must see a container created a moment
// ago, and the polls then take the same answer instead of asking again.
func (r *Runtime) List(ctx context.Context, agent string) ([]runtime.Found, error) {
	snap, err := r.ps.get(ctx, r.clk().Now())
	if err != nil {
		return nil, err
	}
	cs := make([]container, 0, len(snap.byID))
	for _, c := range snap.byID {
		if c.Labels[labelAgent] == agent {
			cs = append(cs, c)
		}
	}
	sort.Slice(cs, func(i, j int) bool { return cs[i].ID < cs[j].ID })
	var found []runtime.Found
	for _, c := range cs {
		inst, err := state.ParseInstanceName(c.Labels[labelName])
		if err != nil || c.ID == "" {
			r.log.Debug("podman: skipping a container without an instance name", "id", c.ID, "name", c.Labels[labelName])
			continue
		}
		found = append(found, runtime.Found{Instance: inst, ID: runtime.ID(c.ID)})
	}
	return found, nil
}

// ContainerID returns the id of the container of an instance, found by
// its name label; runtime.ErrNotFound when there is none. Tests use it to
// prove that a container was adopted rather than recreated.
func (r *Runtime) ContainerID(ctx context.Context, inst state.InstanceName) (string, error) {
	cs, err := r.psFilter(ctx, labelName+"="+inst.String())
	if err != nil {
		return "", err
	}
	switch len(cs) {
	case 0:
		return "", fmt.Errorf("container of %s: %w", inst, runtime.ErrNotFound)
	case 1:
		return cs[0].ID, nil
	}
	return "", fmt.Errorf("%d containers carry the label %s=%s", len(cs), labelName, inst)
}

// removeInstance removes every container of an instance: the one with
// its name and any that carry its name label under another name.
func (r *Runtime) removeInstance(ctx context.Context, inst state.InstanceName) error {
	cs, err := r.psFilter(ctx, labelName+"="+inst.String())
	if err != nil {
		return err
	}
	targets := []string{inst.String()}
	for _, c := range cs {
		targets = append(targets, c.ID)
	}
	args := append([]string{"rm", "--force", "--ignore", "-t", r.graceSeconds()}, targets...)
	_, err = r.exec(ctx, r.grace+stopSlack, args...)
	return err
}

func (r *Runtime) psAll(ctx context.Context) ([]container, error) {
	out, err := r.exec(ctx, callTimeout, "ps", "--all", "--format", "json")
	if err != nil {
		return nil, err
	}
	return parsePS(out)
}

func (r *Runtime) psFilter(ctx context.Context, label string) ([]container, error) {
	out, err := r.exec(ctx, callTimeout, "ps", "--all", "--filter", "label="+label, "--format", "json")
	if err != nil {
		return nil, err
	}
	return parsePS(out)
}

// graceSeconds is the grace period as podman's whole seconds, rounded up.
func (r *Runtime) graceSeconds() string {
	return strconv.Itoa(int(math.Ceil(r.grace.Seconds())))
}

// validID accepts what podman prints as a container id and refuses what
// podman would read as an option.
func validID(id string) bool {
	if id == "" || id[0] == '-' {
		return false
	}
	for _, c := range id {
		if !(c >= '0' && c <= '9' || c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c == '_' || c == '.' || c == '-') {
			return false
		}
	}
	return true
}

// lastLine is the last non-empty line of podman's output: `podman run`
// prints the container id last, after anything a pull printed.
func lastLine(out string) string {
	lines := strings.Split(strings.TrimSpace(out), "\n")
	return strings.TrimSpace(lines[len(lines)-1])
}
