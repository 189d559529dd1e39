package workload

import (
	"context"
	"log/slog"
	"path/filepath"
	"sort"
	"sync"
	"time"

	"github.com/grapnel-io/grapnel/agent/runtime"
	"github.com/grapnel-io/grapnel/agent/storage"
	"github.com/grapnel-io/grapnel/internal/clock"
	"github.com/grapnel-io/grapnel/state"
	"github.com/grapnel-io/grapnel/workloadpolicy"
)

// Added is one instance the server wants on this agent.
type Added struct {
	Instance state.InstanceName
	Workload *state.Workload
}

// Deleted is one instance the server wants gone, with the delete
// conditions its dependents impose (workload name → condition).
type Deleted struct {
	Instance     state.InstanceName
	Dependencies map[string]state.DeleteCondition
}

// ControlInterfaces opens and closes the control interface of instances
// (agent/controlif implements it).
type ControlInterfaces interface {
	// Open creates (or re-opens after an agent restart) the FIFO pair of an instance and starts
	// serving it; returns the host directory holding `input` and `output`.
	// The FIFOs belong to owner, the workload's user (nil: the agent's).
	Open(inst state.InstanceName, access state.ControlInterfaceAccess, owner *runtime.Owner) (dir string, err error)
	// Close stops serving and removes the directory.
	Close(inst state.InstanceName)
}

// Config configures a Manager.
type Config struct {
	Agent     string
	RunFolder string
	Runtimes  map[string]runtime.Runtime  // by Name()
	Report    func([]state.WorkloadState) // state changes of own instances, only on change
	Control   ControlInterfaces           // nil: no control interfaces
	Clock     clock.Clock                 // github.com/grapnel-io/grapnel/internal/clock; nil = real
	Logger    *slog.Logger
	// PollInterval is how often a loop asks its runtime for the state
	// when the runtime cannot watch the instance (runtime.Watcher);
	// 0 = 500 ms (Ankaios' state checker period).
	PollInterval time.Duration
	// Backstop is how often a loop asks a runtime that watches its
	// instance for the state all the same; 0 = DefaultBackstop.
	Backstop time.Duration
	// ResyncInterval is the period of the drift repair rounds (see
	// Manager.resync); 0 runs none, only those Resync asks for. The
	// agent's command line defaults to DefaultResyncInterval.
	ResyncInterval time.Duration
	// Policy is the workload admission policy checked before an
	// instance is created (workloadpolicy); the zero value is baseline.
	Policy workloadpolicy.Policy
	// Storage watches the run folder (agent/storage): while it is
	// failed no instance is created, and a create or delete that failed
	// with it waits until it works again; nil takes every error as it
	// is.
	Storage *storage.Guard
}

// defaultPollInterval is the period of Ankaios' generic state checker.
const defaultPollInterval = 500 * time.Millisecond

// DefaultBackstop is the period of the backstop poll. It is there for
// the changes no event reports: an ended instance removed or started
// again behind the agent's back (an operator's `podman rm`, a wiped run
// folder), a container paused, an event lost through a bug. Such a
// change is seen within 30 s; a round costs ten record reads for ten
// process workloads, or one `podman ps` (about 0.1 s of CPU) for all
// containers, so 30 s keeps even podman's share near 0.3 % of a core.
// Kubernetes' kubelet, with runtime events on, likewise keeps its relist
// as a safety net and slows it from 1 s to 300 s.
const DefaultBackstop = 30 * time.Second

// Manager owns the control loops of this agent's workload instances.
type Manager struct {
	cfg    Config
	clock  clock.Clock
	log    *slog.Logger
	poll   time.Duration
	back   time.Duration                           // Config.Backstop
	jitter func(limit time.Duration) time.Duration // full jitter; tests make it deterministic
	rep    *reporter
	ctx    context.Context // ends with Close; every runtime call uses it
	cancel context.CancelFunc
	wg     sync.WaitGroup // one per loop goroutine

	// ops serialises ServerHello and Update, so that a reconcile's view of
	// the host and the loops is not changed half-way by an update.
	ops sync.Mutex

	// mu guards the fields below and the guarded fields of every loop.
	mu     sync.Mutex
	closed bool
	// loops holds the loop that stands for each instance the server
	// knows; a loop replaced by a newer one for the same instance leaves
	// this map but stays in all until it ends.
	loops map[state.InstanceName]*loop
	// all holds every running loop, silent deleters of host leftovers
	// included.
	all map[*loop]struct{}
	// current is the last reported state of each own instance.
	current map[state.InstanceName]state.ExecutionState
	// view is what add and delete conditions are evaluated on: the
	// server's broadcast merged with the own reports.
	view state.WorkloadStatesMap
	// tick is closed at the next backstop round, nil while no loop waits
	// for one; tickTimer closes it.
	tick      chan struct{}
	tickTimer clock.Timer
	// greeted is set once a ServerHello has reconciled the loops with the
	// server's list: before, a resync would take every instance on the
	// host for an unknown one.
	greeted bool

	// resyncKick (capacity 1) asks the resync goroutine for a round.
	resyncKick chan struct{}

	// probe is closed when Alive's probe took ops and mu; nil when none
	// is under way (liveness.go). probeMu guards it.
	probeMu sync.Mutex
	probe   chan struct{}
}

// NewManager returns a Manager with no loops; nothing runs until the first
// ServerHello or Update.
func NewManager(cfg Config) *Manager {
	m := &Manager{
		cfg:     cfg,
		clock:   cfg.Clock,
		log:     cfg.Logger,
		poll:    cfg.PollInterval,
		back:    cfg.Backstop,
		jitter:  fullJitter,
		loops:   map[state.InstanceName]*loop{},
		all:     map[*loop]struct{}{},
		current: map[state.InstanceName]state.ExecutionState{},
		view:    state.WorkloadStatesMap{},

		resyncKick: make(chan struct{}, 1),
	}
	if m.clock == nil {
		m.clock = clock.Real()
	}
	if m.log == nil {
		m.log = slog.Default()
	}
	if m.poll <= 0 {
		m.poll = defaultPollInterval
	}
	if m.back <= 0 {
		m.back = DefaultBackstop
	}
	m.ctx, m.cancel = context.WithCancel(context.Background())
	m.rep = newReporter(cfg.Report)
	m.wg.Add(1)
	go m.runResync()
	return m
}

// Update applies an UpdateWorkload: deletions first, so that an update
// (Deleted(old) + Added(new) of one workload) carries the old instance's
// delete conditions, then additions. An added instance that already runs
// is left alone.
//
// swdd~agent-handles-update-workload-requests~1
// swdd~agent-handle-deleted-before-added-workloads~1
func (m *Manager) Update(added []Added, deleted []Deleted) {
	m.ops.Lock()
	defer m.ops.Unlock()
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.closed {
		return
	}
	for _, d := range deleted {
		m.deleteLocked(d.Instance, d.Dependencies)
	}
	for _, a := range added {
		m.addLocked(a)
	}
}

// States takes the workload states the server broadcasts (all agents) and
// re-evaluates every waiting add or delete condition. For an instance this
// agent reports itself, its own state stays authoritative.
//
// swdd~agent-manager-stores-all-workload-states~1
// swdd~agent-handles-update-workload-state-requests~1
func (m *Manager) States(ws []state.WorkloadState) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.closed {
		return
	}
	for _, s := range ws {
		if _, own := m.current[s.Instance]; own && s.Instance.AgentName == m.cfg.Agent {
			continue
		}
		if s.State.IsRemoved() {
			m.view.Delete(s.Instance)
		} else {
			m.view.Set(s.Instance, s.State)
		}
	}
	m.wakeAllLocked()
}

// Lookup returns the runtime and ID of a live instance, for logs.
func (m *Manager) Lookup(inst state.InstanceName) (runtime.Runtime, runtime.ID, bool) {
	m.mu.Lock()
	defer m.mu.Unlock()
	l := m.loops[inst]
	if l == nil || l.id == "" || l.rt == nil {
		return nil, "", false
	}
	return l.rt, l.id, true
}

// Current returns the last reported state of every own instance, sorted,
// for the connection layer to re-send after a reconnect.
func (m *Manager) Current() []state.WorkloadState {
	m.mu.Lock()
	defer m.mu.Unlock()
	out := make([]state.WorkloadState, 0, len(m.current))
	for inst, s := range m.current {
		out = append(out, state.WorkloadState{Instance: inst, State: s})
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Instance.String() < out[j].Instance.String() })
	return out
}

// Close stops every loop and waits for them; the workloads keep running so
// that the next agent process adopts them. Report is not called once Close
// has returned.
func (m *Manager) Close() {
	m.mu.Lock()
	if m.closed {
		m.mu.Unlock()
		return
	}
	m.closed = true
	m.cancel()
	if m.tickTimer != nil {
		m.tickTimer.Stop()
	}
	m.mu.Unlock()
	m.wg.Wait()
	m.rep.close()
}

// deleteLocked asks the loop of an instance to delete it. An instance the
// agent does not run is answered with Removed, as the server waits for it.
//
// swdd~agent-deletes-workload~1
// swdd~agent-executes-delete-workload-operation~1
func (m *Manager) deleteLocked(inst state.InstanceName, conds map[string]state.DeleteCondition) {
	l := m.loops[inst]
	if l == nil {
		m.reportLocked(inst, state.Removed)
		return
	}
	l.requestDeleteLocked(conds)
}

// addLocked starts a loop for an added instance unless one already runs
// it. Any other loop of the same workload is asked to delete its instance
// (an Added for a known workload is an update) and the new loop waits until
// they are gone: Ankaios updates delete first, then create.
//
// swdd~agent-added-creates-workload~1
// swdd~agent-update-on-add-known-workload~1
// swdd~agent-updates-deleted-and-added-workloads~1
func (m *Manager) addLocked(a Added) {
	if l := m.loops[a.Instance]; l != nil && !l.deleting() {
		return
	}
	l := m.newLoop(a.Instance, a.Workload)
	l.preds = m.supersedeLocked(a.Instance.WorkloadName, l)
	m.startLocked(l)
}

// supersedeLocked asks every loop of a workload other than keep to delete
// its instance (without delete conditions unless it already has some) and
// returns them.
func (m *Manager) supersedeLocked(workload string, keep *loop) []*loop {
	var old []*loop
	for o := range m.all {
		if o == keep || o.inst.WorkloadName != workload {
			continue
		}
		o.requestDeleteLocked(nil)
		old = append(old, o)
	}
	return old
}

// newLoop prepares a loop for an instance of w; the caller sets its role
// (preds, adopted, silent) before startLocked.
func (m *Manager) newLoop(inst state.InstanceName, w *state.Workload) *loop {
	l := &loop{
		m:      m,
		inst:   inst,
		runDir: filepath.Join(m.cfg.RunFolder, m.cfg.Agent+"_io", inst.String()),
		delCh:  make(chan struct{}),
		wake:   make(chan struct{}, 1),
		done:   make(chan struct{}),
	}
	if w == nil {
		l.w = &state.Workload{}
		l.specErr = &reasonError{msg: "the server sent no workload spec for this instance", kind: ErrNoWorkload}
	} else {
		l.w = w.Clone()
	}
	l.rt = m.cfg.Runtimes[l.w.Runtime]
	return l
}

// startLocked registers a loop and starts its goroutine.
func (m *Manager) startLocked(l *loop) {
	m.all[l] = struct{}{}
	if !l.silent {
		m.loops[l.inst] = l
	}
	m.wg.Add(1)
	go l.run()
}

// exited unregisters a loop whose goroutine is ending.
func (m *Manager) exited(l *loop) {
	m.mu.Lock()
	delete(m.all, l)
	if m.loops[l.inst] == l {
		delete(m.loops, l.inst)
	}
	m.mu.Unlock()
	close(l.done)
	m.wg.Done()
}

// reportLocked records and queues a state of an own instance, unless it
// repeats the last one or the stopping hysteresis holds it back, and wakes
// the loops whose conditions may have changed.
//
// swdd~workload-control-loop-sends-workload-states~2
// swdd~agent-stores-workload-states-of-its-workloads~1
func (m *Manager) reportLocked(inst state.InstanceName, s state.ExecutionState) {
	if m.closed {
		return
	}
	last, known := m.current[inst]
	if known && (last == s || heldByStopping(last, s)) {
		return
	}
	if s.IsRemoved() {
		delete(m.current, inst)
		m.view.Delete(inst)
	} else {
		m.current[inst] = s
		m.view.Set(inst, s)
	}
	m.rep.push(state.WorkloadState{Instance: inst, State: s})
	m.wakeAllLocked()
}

// wakeAllLocked tells every loop that the dependency view changed.
func (m *Manager) wakeAllLocked() {
	for l := range m.all {
		select {
		case l.wake <- struct{}{}:
		default:
		}
	}
}

// backstopTick returns a channel that is closed at the next backstop
// round. All watching loops wait for the same round, so that it wakes
// them together (and they share one `podman ps`) rather than each at a
// time of its own; the timer is armed only when a loop asks for it.
func (m *Manager) backstopTick() <-chan struct{} {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.closed {
		return nil // the loops end with the Manager's context
	}
	if m.tick == nil {
		tick := make(chan struct{})
		m.tick = tick
		m.tickTimer = m.clock.AfterFunc(m.back, func() {
			m.mu.Lock()
			if m.tick == tick {
				m.tick, m.tickTimer = nil, nil
			}
			m.mu.Unlock()
			close(tick)
		})
	}
	return m.tick
}
