package workload

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/grapnel-io/grapnel/agent/runtime"
	"github.com/grapnel-io/grapnel/internal/clock"
	"github.com/grapnel-io/grapnel/internal/testwait"
	"github.com/grapnel-io/grapnel/state"
)

const testAgent = "agent_A"

// memRuntime is an in-memory runtime.Runtime whose instances are state
// machines the test drives with set.
type memRuntime struct {
	name string

	mu         sync.Mutex // guards everything below
	seq        int
	insts      map[runtime.ID]*memInst
	events     []string // "create <workload>/<id>", "delete <workload>/<id>"
	specs      []runtime.Spec
	creates    map[state.InstanceName]int
	deletes    int
	polls      int
	initial    state.ExecutionState          // state of a new instance
	failCreate func(runtime.Spec, int) error // called with the instance's create count
	failDelete func(runtime.ID, int) error   // called with the total delete count
	checkErr   error
}

type memInst struct {
	inst  state.InstanceName
	state state.ExecutionState
}

func newMemRuntime(name string) *memRuntime {
	return &memRuntime{
		name:    name,
		insts:   map[runtime.ID]*memInst{},
		creates: map[state.InstanceName]int{},
		initial: state.RunningOk,
	}
}

func (r *memRuntime) Name() string { return r.name }

func (r *memRuntime) Check(cfg string) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.checkErr
}

func (r *memRuntime) Create(ctx context.Context, s runtime.Spec) (runtime.ID, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.creates[s.Instance]++
	r.specs = append(r.specs, s)
	if r.failCreate != nil {
		if err := r.failCreate(s, r.creates[s.Instance]); err != nil {
			r.events = append(r.events, "create-failed "+s.Instance.WorkloadName)
			return "", err
		}
	}
	if _, err := os.Stat(s.RunDir); err != nil {
		return "", fmt.Errorf("Spec.RunDir must exist: %w", err)
	}
	for id, in := range r.insts {
		if in.inst == s.Instance {
			delete(r.insts, id) // a leftover of the same instance is replaced
		}
	}
	r.seq++
	id := runtime.ID(fmt.Sprintf("%s-%d", r.name, r.seq))
	r.insts[id] = &memInst{inst: s.Instance, state: r.initial}
	r.events = append(r.events, fmt.Sprintf("create %s/%s", s.Instance.WorkloadName, id))
	return id, nil
}

func (r *memRuntime) State(ctx context.Context, id runtime.ID) (state.ExecutionState, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.polls++
	in, ok := r.insts[id]
	if !ok {
		return state.ExecutionState{}, fmt.Errorf("%s: %w", id, runtime.ErrNotFound)
	}
	return in.state, nil
}

func (r *memRuntime) Delete(ctx context.Context, id runtime.ID) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.deletes++
	if r.failDelete != nil {
		if err := r.failDelete(id, r.deletes); err != nil {
			return err
		}
	}
	name := "?"
	if in, ok := r.insts[id]; ok {
		name = in.inst.WorkloadName
	}
	delete(r.insts, id)
	r.events = append(r.events, fmt.Sprintf("delete %s/%s", name, id))
	return nil
}

func (r *memRuntime) List(ctx context.Context, agent string) ([]runtime.Found, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	var out []runtime.Found
	for id, in := range r.insts {
		if in.inst.AgentName == agent {
			out = append(out, runtime.Found{Instance: in.inst, ID: id})
		}
	}
	return out, nil
}

func (r *memRuntime) Logs(ctx context.Context, id runtime.ID, o runtime.LogOptions) (io.ReadCloser, error) {
	return io.NopCloser(strings.NewReader("")), nil
}

// memRestarter is a memRuntime that can start an ended instance again in
// place, as podman does; with fail set StartAgain fails and removes the
// instance, as the podman runtime does with a container it cannot start.
type memRestarter struct {
	*memRuntime
	fail error
}

var _ runtime.Restarter = memRestarter{}

func (r memRestarter) StartAgain(ctx context.Context, id runtime.ID, s runtime.Spec) (runtime.ID, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	in, ok := r.insts[id]
	if !ok || in.inst != s.Instance {
		return "", fmt.Errorf("%s is not an instance of %s: %w", id, s.Instance, runtime.ErrNotFound)
	}
	if r.fail != nil {
		delete(r.insts, id)
		r.events = append(r.events, fmt.Sprintf("start-again-failed %s/%s", s.Instance.WorkloadName, id))
		return "", r.fail
	}
	in.state = r.initial
	r.events = append(r.events, fmt.Sprintf("start-again %s/%s", s.Instance.WorkloadName, id))
	return id, nil
}

// preload puts an instance on the "host" as a previous agent left it.
func (r *memRuntime) preload(inst state.InstanceName, s state.ExecutionState) runtime.ID {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.seq++
	id := runtime.ID(fmt.Sprintf("pre-%d", r.seq))
	r.insts[id] = &memInst{inst: inst, state: s}
	return id
}

// set changes the state of the live instance of inst.
func (r *memRuntime) set(t *testing.T, inst state.InstanceName, s state.ExecutionState) {
	t.Helper()
	r.mu.Lock()
	defer r.mu.Unlock()
	for _, in := range r.insts {
		if in.inst == inst {
			in.state = s
			return
		}
	}
	t.Fatalf("no live instance %s", inst)
}

// liveID returns the ID of the live instance of inst.
func (r *memRuntime) liveID(inst state.InstanceName) (runtime.ID, bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	for id, in := range r.insts {
		if in.inst == inst {
			return id, true
		}
	}
	return "", false
}

func (r *memRuntime) createCount(inst state.InstanceName) int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.creates[inst]
}

func (r *memRuntime) deleteCount() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.deletes
}

func (r *memRuntime) pollCount() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.polls
}

func (r *memRuntime) eventLog() []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]string(nil), r.events...)
}

func (r *memRuntime) lastSpec() runtime.Spec {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.specs[len(r.specs)-1]
}

// recorder is Config.Report: it keeps every batch and flags a call made
// after Close returned.
type recorder struct {
	mu      sync.Mutex
	all     []state.WorkloadState
	raw     []state.WorkloadState // as reported, additional info and all
	batches int
	closed  bool
	late    bool
}

func (r *recorder) report(ws []state.WorkloadState) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.closed {
		r.late = true
	}
	r.batches++
	for _, w := range ws {
		r.raw = append(r.raw, w)
		// What a waiting instance waits for is checked on its own
		// (TestWaitingNamesWhatItWaitsFor); the sequences compare states.
		if w.State.Is(state.StatePending, state.SubWaitingToStart) || w.State.Is(state.StateStopping, state.SubWaitingToStop) {
			w.State.AdditionalInfo = ""
		}
		r.all = append(r.all, w)
	}
}

func (r *recorder) history(inst state.InstanceName) []state.ExecutionState {
	r.mu.Lock()
	defer r.mu.Unlock()
	var out []state.ExecutionState
	for _, w := range r.all {
		if w.Instance == inst {
			out = append(out, w.State)
		}
	}
	return out
}

// index is the position of the first report of s for inst, -1 if none.
func (r *recorder) index(inst state.InstanceName, s state.ExecutionState) int {
	r.mu.Lock()
	defer r.mu.Unlock()
	for i, w := range r.all {
		if w.Instance == inst && w.State == s {
			return i
		}
	}
	return -1
}

func (r *recorder) last(inst state.InstanceName) (state.ExecutionState, bool) {
	h := r.history(inst)
	if len(h) == 0 {
		return state.ExecutionState{}, false
	}
	return h[len(h)-1], true
}

// memControl is a ControlInterfaces that makes the directory and records
// the calls.
type memControl struct {
	root string

	mu     sync.Mutex
	opened map[state.InstanceName]int
	closed map[state.InstanceName]int
}

func (c *memControl) Open(inst state.InstanceName, access state.ControlInterfaceAccess, _ *runtime.Owner) (string, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.opened[inst]++
	dir := filepath.Join(c.root, inst.String(), "control_interface")
	return dir, os.MkdirAll(dir, 0o755)
}

func (c *memControl) Close(inst state.InstanceName) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.closed[inst]++
}

func (c *memControl) counts(inst state.InstanceName) (opened, closed int) {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.opened[inst], c.closed[inst]
}

// harness is one Manager wired to a memRuntime, a recorder and a
// memControl.
type harness struct {
	t   *testing.T
	m   *Manager
	rt  *memRuntime
	rec *recorder
	ctl *memControl
	run string
	clk *clock.Fake // nil: the real clock

	allowRepeats bool
}

type option func(*harness, *Config)

// withFakeClock drives polls and backoff from a fake clock.
func withFakeClock() option {
	return func(h *harness, c *Config) {
		h.clk = clock.NewFake(time.Unix(1_700_000_000, 0))
		c.Clock = h.clk
		c.PollInterval = 100 * time.Millisecond
	}
}

func newHarness(t *testing.T, opts ...option) *harness {
	t.Helper()
	h := &harness{
		t:   t,
		rt:  newMemRuntime("mem"),
		rec: &recorder{},
		run: t.TempDir(),
	}
	h.ctl = &memControl{root: t.TempDir(), opened: map[state.InstanceName]int{}, closed: map[state.InstanceName]int{}}
	cfg := Config{
		Agent:        testAgent,
		RunFolder:    h.run,
		Runtimes:     map[string]runtime.Runtime{"mem": h.rt},
		Report:       h.rec.report,
		Control:      h.ctl,
		Logger:       slog.New(slog.NewTextHandler(io.Discard, nil)),
		PollInterval: 2 * time.Millisecond,
	}
	for _, o := range opts {
		o(h, &cfg)
	}
	h.m = NewManager(cfg)
	// Retries in real-clock tests must not wait up to half a second.
	h.m.jitter = func(time.Duration) time.Duration { return time.Millisecond }
	t.Cleanup(h.close)
	return h
}

// close ends the Manager and checks what every test must hold: no report
// after Close and never the same state twice in a row for an instance.
func (h *harness) close() {
	h.m.Close()
	h.rec.mu.Lock()
	h.rec.closed = true
	h.rec.mu.Unlock()
	if h.allowRepeats {
		return
	}
	h.rec.mu.Lock()
	defer h.rec.mu.Unlock()
	last := map[state.InstanceName]state.ExecutionState{}
	for _, w := range h.rec.raw {
		if prev, ok := last[w.Instance]; ok && prev == w.State {
			h.t.Errorf("%s reported %s twice in a row", w.Instance.WorkloadName, w.State)
		}
		last[w.Instance] = w.State
	}
}

// waitWithin bounds every wait; it is generous because the machine is
// shared and the tests run with -race.
const waitWithin = 10 * time.Second

// waitState waits until s has been reported for inst.
func (h *harness) waitState(inst state.InstanceName, s state.ExecutionState) {
	h.t.Helper()
	testwait.For(h.t, waitWithin, func() bool {
		return h.rec.index(inst, s) >= 0
	}, "%s to report %s (history %v)", inst.WorkloadName, s, h.rec.history(inst))
}

// waitLast waits until the last report for inst is s.
func (h *harness) waitLast(inst state.InstanceName, s state.ExecutionState) {
	h.t.Helper()
	testwait.For(h.t, waitWithin, func() bool {
		got, ok := h.rec.last(inst)
		return ok && got == s
	}, "%s to be in %s (history %v)", inst.WorkloadName, s, h.rec.history(inst))
}

// waitLost waits until Failed(Lost) with the drift reason info has been
// reported for inst.
func (h *harness) waitLost(inst state.InstanceName, info string) {
	h.t.Helper()
	want := lost
	want.AdditionalInfo = info
	h.waitState(inst, want)
}

// settle waits until the runtime has been polled n more times, proof that
// the loops went round without acting.
func (h *harness) settle(n int) {
	h.t.Helper()
	start := h.rt.pollCount()
	testwait.For(h.t, waitWithin, func() bool { return h.rt.pollCount() >= start+n }, "polls")
}

// startTicker runs an unrelated workload whose polls let settle measure
// time while the loops under test wait without polling.
func (h *harness) startTicker() {
	h.t.Helper()
	t := workload("ticker", "tick")
	h.m.Update([]Added{t}, nil)
	h.waitState(t.Instance, state.RunningOk)
}

// workload builds an Added for this agent on the mem runtime.
func workload(name, cfg string, mods ...func(*state.Workload)) Added {
	w := &state.Workload{Agent: testAgent, Runtime: "mem", RuntimeConfig: cfg, RestartPolicy: state.RestartNever}
	for _, m := range mods {
		m(w)
	}
	return Added{Instance: state.NewInstanceName(name, testAgent, cfg), Workload: w}
}

func withPolicy(p state.RestartPolicy) func(*state.Workload) {
	return func(w *state.Workload) { w.RestartPolicy = p }
}

func withDeps(deps map[string]state.AddCondition) func(*state.Workload) {
	return func(w *state.Workload) { w.Dependencies = deps }
}

func withRuntime(rt string) func(*state.Workload) {
	return func(w *state.Workload) { w.Runtime = rt }
}

func withAllowRule() func(*state.Workload) {
	return func(w *state.Workload) {
		w.ControlInterfaceAccess.AllowRules = []state.AccessRule{{Operation: state.RWRead, FilterMasks: []string{"desiredState"}}}
	}
}

// Frequently used states.
var (
	waitingToStart = state.ExecutionState{State: state.StatePending, SubState: state.SubWaitingToStart}
	waitingToStop  = state.ExecutionState{State: state.StateStopping, SubState: state.SubWaitingToStop}
	requested      = state.ExecutionState{State: state.StateStopping, SubState: state.SubRequestedAtRuntime}
	execFailed     = state.ExecutionState{State: state.StateFailed, SubState: state.SubExecFailed, AdditionalInfo: "exit code 1"}
	lost           = state.ExecutionState{State: state.StateFailed, SubState: state.SubLost}
	pendingStart   = state.ExecutionState{State: state.StatePending, SubState: state.SubStarting}
)
