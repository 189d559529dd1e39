package workload

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"time"

	"github.com/grapnel-io/grapnel/agent/runtime"
	"github.com/grapnel-io/grapnel/agent/storage"
	"github.com/grapnel-io/grapnel/state"
)

// loop is the control loop of one instance. Its goroutine owns the
// instance: only it calls the runtime for it, writes its files and opens
// and closes its control interface.
type loop struct {
	m       *Manager
	inst    state.InstanceName
	w       *state.Workload
	rt      runtime.Runtime // nil: the agent has no such runtime
	specErr error           // non-nil: the instance cannot be started
	runDir  string
	silent  bool    // a host leftover the server does not know: delete it without reports
	adopted bool    // found on the host: resume, start again or replace it
	preds   []*loop // loops of the same workload that must end first
	delCh   chan struct{}
	wake    chan struct{} // capacity 1: the dependency view changed
	done    chan struct{} // closed when the goroutine ends

	// removedInfo, for a silent loop that deletes an unknown instance a
	// resync found, is the additionalInfo of the Removed it then reports;
	// keepRunDir: the run directory belongs to another loop of the same
	// instance name.
	removedInfo string
	keepRunDir  bool

	// guarded by m.mu
	delReq   bool
	delConds map[string]state.DeleteCondition
	id       runtime.ID
	watching bool  // in watch: the instance should be on the host
	drift    drift // what the last resync found gone; zero when nothing

	// owned by the loop goroutine
	started bool       // a create was issued or the instance adopted
	ctlDir  string     // the open control interface, "" when none
	again   runtime.ID // an ended instance the next create starts again in place
}

// stepFn is one phase of a loop; it returns the next phase, nil to end.
type stepFn func(*loop, context.Context) stepFn

func (l *loop) run() {
	defer l.m.exited(l)
	ctx := l.m.ctx
	step := (*loop).waitPreds
	switch {
	case l.silent:
		step = (*loop).stop
	case l.adopted:
		step = (*loop).resume
	}
	for step != nil {
		step = step(l, ctx)
	}
}

// requestDeleteLocked asks the loop to delete its instance once the delete
// conditions hold. A later request only replaces the conditions when it
// carries some: Ankaios sends them with the server's delete, not with a
// reconcile.
func (l *loop) requestDeleteLocked(conds map[string]state.DeleteCondition) {
	if !l.delReq {
		l.delReq = true
		l.delConds = maps.Clone(conds)
		close(l.delCh)
		return
	}
	if conds != nil {
		l.delConds = maps.Clone(conds)
	}
}

func (l *loop) deleting() bool { return l.delReq }

func (l *loop) deleteRequested() bool {
	select {
	case <-l.delCh:
		return true
	default:
		return false
	}
}

func (l *loop) report(s state.ExecutionState) {
	if l.silent {
		return
	}
	l.m.mu.Lock()
	l.m.reportLocked(l.inst, s)
	l.m.mu.Unlock()
}

func (l *loop) setID(id runtime.ID) {
	l.m.mu.Lock()
	l.id = id
	l.drift = drift{}
	l.m.mu.Unlock()
}

// setWatching tells a resync whether the loop watches its instance.
func (l *loop) setWatching(w bool) {
	l.m.mu.Lock()
	l.watching = w
	l.m.mu.Unlock()
}

// waitPreds waits until the instances this one replaces are gone: an
// update deletes the old instance before it creates the new one. Nothing
// is reported meanwhile, so that the old instance's last reports are not
// mixed with the new one's.
//
// swdd~agent-executes-update-workload-operation~1
func (l *loop) waitPreds(ctx context.Context) stepFn {
	for _, p := range l.preds {
		select {
		case <-p.done:
		case <-ctx.Done():
			return nil
		}
	}
	l.preds = nil
	return (*loop).waitDeps
}

// waitDeps holds the instance in Pending(WaitingToStart) until every add
// condition holds, re-evaluated whenever the view changes.
//
// swdd~agent-enqueues-unfulfilled-create~1
// swdd~agent-keeps-workloads-with-unfulfilled-workload-dependencies-in-queue~1
// swdd~agent-handles-workloads-with-fulfilled-dependencies~1
func (l *loop) waitDeps(ctx context.Context) stepFn {
	for {
		if l.deleteRequested() {
			return (*loop).stop
		}
		l.m.mu.Lock()
		met := addConditionsMet(l.m.view, l.w.Dependencies)
		why := ""
		if !met {
			why = unmetAdd(l.m.view, l.w.Dependencies)
		}
		l.m.mu.Unlock()
		if met {
			return (*loop).start
		}
		l.report(state.ExecutionState{State: state.StatePending, SubState: state.SubWaitingToStart, AdditionalInfo: why})
		select {
		case <-l.wake:
		case <-l.delCh:
			return (*loop).stop
		case <-ctx.Done():
			return nil
		}
	}
}

// start creates the instance, retrying with backoff until it succeeds, a
// delete cancels it, or the failure is one a retry cannot cure (unknown
// runtime, bad runtimeConfig, bad files).
//
// swdd~agent-workload-control-loop-executes-create~4
// swdd~agent-workload-control-loop-retries-workload-creation-on-create-failure~1
// swdd~agent-workload-control-loop-exponential-backoff-retries~1
// swdd~agent-workload-control-loop-prevents-retries-on-other-workload-commands~2
func (l *loop) start(ctx context.Context) stepFn {
	l.started = true
	l.report(startingTriggered)
	for n := 0; ; n++ {
		if l.deleteRequested() {
			return (*loop).stop
		}
		if healed, failed := l.m.cfg.Storage.Failed(); failed != nil {
			// Nothing is created on a failed run folder: what it would
			// write could not be trusted (see agent/storage).
			l.report(waitingForRunFolder(failed, "it starts"))
			switch l.waitHealed(ctx, healed, l.delCh) {
			case woke:
				continue
			case deleted:
				return (*loop).stop
			default:
				return nil
			}
		}
		permanent, err := l.create(ctx)
		if ctx.Err() != nil {
			return nil
		}
		if err == nil {
			return (*loop).watch
		}
		if errors.Is(l.m.cfg.Storage.Check(err), storage.ErrFailed) {
			// Not a retry: the next round waits for the run folder.
			l.m.log.Info("creating workload failed: the run folder failed; it is created once the run folder works again",
				"instance", l.inst.String(), "error", err)
			n--
			continue
		}
		if permanent {
			l.m.log.Warn("workload cannot be started", "instance", l.inst.String(), "error", err)
			l.report(state.ExecutionState{State: state.StatePending, SubState: state.SubStartingFailed, AdditionalInfo: err.Error()})
			return (*loop).idle
		}
		l.m.log.Info("creating workload failed; retrying", "instance", l.inst.String(), "retry", n+1, "error", err)
		l.report(retrying(n+1, err))
		switch l.sleep(ctx, l.m.jitter(backoffCap(n)), l.delCh) {
		case woke:
		case deleted:
			return (*loop).stop
		default:
			return nil
		}
	}
}

// waitingForRunFolder is the state of an instance whose create or
// delete waits for the run folder to work again: failed names the run
// folder and the error, what says what happens then.
func waitingForRunFolder(failed error, what string) state.ExecutionState {
	return state.ExecutionState{State: state.StatePending, SubState: state.SubStarting,
		AdditionalInfo: fmt.Sprintf("%v; %s once the run folder works again", failed, what)}
}

// waitHealed waits until the run folder works again (healed closes), a
// delete is requested (when del is not nil) or the Manager closes.
func (l *loop) waitHealed(ctx context.Context, healed <-chan struct{}, del <-chan struct{}) sleepResult {
	select {
	case <-healed:
		return woke
	case <-del:
		return deleted
	case <-ctx.Done():
		return closed
	}
}

// Pending(Starting) states, as Ankaios words them.
var startingTriggered = state.ExecutionState{State: state.StatePending, SubState: state.SubStarting, AdditionalInfo: "Triggered at runtime."}

// retrying is the state of an instance whose create failed and will be
// retried: Ankaios keeps it Pending(Starting) with "Retry N: <error>".
func retrying(n int, err error) state.ExecutionState {
	return state.ExecutionState{State: state.StatePending, SubState: state.SubStarting, AdditionalInfo: fmt.Sprintf("Retry %d: %v", n, err)}
}

// create makes one attempt; permanent says a retry cannot help.
//
// swdd~agent-skips-unknown-runtime~2
// swdd~agent-uses-specified-runtime~1
// swdd~agent-workload-control-loop-aborts-create-upon-workload-files-creation-error~1
// swdd~agent-control-interface-created-for-eligible-workloads~1
func (l *loop) create(ctx context.Context) (permanent bool, err error) {
	if l.specErr != nil {
		return true, l.specErr
	}
	if l.rt == nil {
		return true, &reasonError{
			msg:  fmt.Sprintf("runtime '%s' is not available on agent '%s'", l.w.Runtime, l.m.cfg.Agent),
			kind: ErrUnknownRuntime,
		}
	}
	// The policy first: a refused workload is not started, whatever its
	// runtime would make of it (issue 27).
	if err := l.m.cfg.Policy.Check("", l.w.Runtime, l.w.RuntimeConfig); err != nil {
		return true, err
	}
	if err := l.rt.Check(l.w.RuntimeConfig); err != nil {
		return true, err
	}
	owner, err := l.owner()
	if err != nil {
		return errors.Is(err, runtime.ErrBadConfig), err
	}
	// The run directory is made again: a run folder on tmpfs is empty
	// after a power cycle.
	if err := runtime.PrepareRunDir(l.runDir, owner); err != nil {
		return false, fmt.Errorf("run directory: %w", err)
	}
	spec := runtime.Spec{Instance: l.inst, Workload: l.w, RunDir: l.runDir}
	if len(l.w.Files) > 0 {
		spec.FilesDir = filepath.Join(l.runDir, "files")
		if spec.Mounts, err = writeFiles(spec.FilesDir, l.w.Files, owner); err != nil {
			if rmErr := os.RemoveAll(spec.FilesDir); rmErr != nil {
				l.m.log.Warn("removing workload files", "instance", l.inst.String(), "error", rmErr)
			}
			return true, err
		}
	}
	if l.ctlDir == "" && l.w.ControlInterfaceAccess.HasAllowRules() && l.m.cfg.Control != nil {
		dir, err := l.m.cfg.Control.Open(l.inst, l.w.ControlInterfaceAccess, owner)
		if err != nil {
			return false, fmt.Errorf("control interface: %w", err)
		}
		l.ctlDir = dir
	}
	spec.ControlInterface = l.ctlDir
	if again := l.again; again != "" {
		l.again = ""
		if r, ok := l.rt.(runtime.Restarter); ok {
			// swdd~agent-existing-workloads-reuse-unmodified~1
			id, err := r.StartAgain(ctx, again, spec)
			if err == nil {
				l.setID(id)
				return false, nil
			}
			if ctx.Err() != nil {
				return false, err
			}
			l.m.log.Warn("starting the workload again in place failed; creating it anew", "instance", l.inst.String(), "error", err)
		}
	}
	// Create replaces what is left of the same instance. A config it
	// refuses only once it sees the spec (podman-kube: files, a control
	// interface target not in the manifest) is as permanent as Check's.
	id, err := l.rt.Create(ctx, spec)
	if err != nil {
		return errors.Is(err, runtime.ErrBadConfig), err
	}
	l.setID(id)
	return false, nil
}

// owner is the user the instance runs as, whose its files and FIFOs
// are: the runtime's answer when it runs workloads under users of their
// own (runtime.Owners), else nil, the agent's user.
func (l *loop) owner() (*runtime.Owner, error) {
	o, ok := l.rt.(runtime.Owners)
	if !ok {
		return nil, nil
	}
	return o.Owner(l.inst, l.w)
}

// resume decides, as the Ankaios agent does at its start, what becomes
// of an instance found on the host under the instance name the server
// wants:
//   - running: resumed — its control interface served again, its state
//     watched, nothing restarted (an agent restart, a failover);
//   - succeeded: started again, in place when the runtime can (podman
//     keeps the container);
//   - anything else — failed, lost, never started, from before a power
//     cycle: replaced, the old one deleted and a new one created.
//
// Started again or replaced, it waits for the instances it supersedes and
// for its add conditions as a new instance does. Whatever the restart
// policy: a power cycle ends every workload, and the policy is about
// endings the agent watched. While the runtime cannot say (Failed(Unknown))
// the question is asked again every PollInterval rather than replacing a
// workload that may be running.
//
// swdd~agent-existing-workloads-resume-existing~2
// swdd~agent-workload-control-loop-executes-resume~1
// swdd~agent-existing-workloads-reuse-unmodified~1
// swdd~agent-existing-workloads-replace-updated~4
func (l *loop) resume(ctx context.Context) stepFn {
	l.started = true
	for {
		if l.deleteRequested() {
			return (*loop).stop
		}
		s := l.observe(ctx)
		if ctx.Err() != nil {
			return nil
		}
		switch {
		case s.State == state.StateRunning:
			l.openControl()
			return (*loop).watch
		case s.Is(state.StateSucceeded, state.SubOk):
			l.m.log.Info("starting a workload that ended before the agent started again", "instance", l.inst.String(), "id", string(l.id))
			l.again = l.id
			return (*loop).waitPreds
		case s.Is(state.StateFailed, state.SubUnknown):
			l.report(s)
			switch l.sleep(ctx, l.m.poll, l.delCh) {
			case woke:
				continue
			case deleted:
				return (*loop).stop
			default:
				return nil
			}
		}
		l.m.log.Info("replacing a workload found not running", "instance", l.inst.String(), "id", string(l.id), "state", s.String())
		return (*loop).replace
	}
}

// openControl serves the control interface of a resumed instance again.
func (l *loop) openControl() {
	if !l.w.ControlInterfaceAccess.HasAllowRules() || l.m.cfg.Control == nil {
		return
	}
	owner, err := l.owner()
	if err != nil {
		l.m.log.Warn("re-opening control interface", "instance", l.inst.String(), "error", err)
		return
	}
	dir, err := l.m.cfg.Control.Open(l.inst, l.w.ControlInterfaceAccess, owner)
	if err != nil {
		l.m.log.Warn("re-opening control interface", "instance", l.inst.String(), "error", err)
		return
	}
	l.ctlDir = dir
}

// replace deletes an instance found not running, so that a new one is
// created in its place once its add conditions hold. A failed delete is
// not fatal: Create replaces what is left of the same instance.
func (l *loop) replace(ctx context.Context) stepFn {
	if err := l.rt.Delete(ctx, l.id); err != nil && ctx.Err() == nil {
		l.m.log.Warn("deleting a workload found not running", "instance", l.inst.String(), "error", l.m.cfg.Storage.Check(err))
	}
	if ctx.Err() != nil {
		return nil
	}
	l.setID("")
	l.started = false // from here on it is a new instance that waits to start
	return (*loop).waitPreds
}

// watch reports each change of the instance's state and applies the
// restart policy. A runtime that can watch the instance wakes the loop
// when the state may have changed, and the Manager's backstop round
// catches what no event reports; any other runtime is asked every
// PollInterval, as by Ankaios' generic state checker.
//
// swdd~workload-control-loop-receives-workload-states~1
// swdd~agent-provides-generic-state-checker-implementation~1
func (l *loop) watch(ctx context.Context) stepFn {
	l.setWatching(true)
	defer l.setWatching(false)
	var last state.ExecutionState
	first, polling := true, false
	for {
		// Armed before the state is read, so that no change falls
		// between the two.
		wctx, unwatch := context.WithCancel(ctx)
		changed, werr := l.arm(wctx)
		s := l.drifted(l.observe(ctx))
		if ctx.Err() != nil {
			unwatch()
			return nil
		}
		if first || s != last {
			first, last = false, s
			l.report(s)
			if l.restartWanted(s) && !l.deleteRequested() {
				unwatch()
				return (*loop).restart
			}
		}
		if (werr != nil) != polling {
			polling = werr != nil
			l.m.log.Debug("workload state watch", "instance", l.inst.String(), "polling", polling, "why", werr)
		}
		var r sleepResult
		if polling {
			r = l.sleep(ctx, l.m.poll, l.delCh)
		} else {
			r = l.await(ctx, changed)
		}
		unwatch()
		switch r {
		case woke:
		case deleted:
			return (*loop).stop
		default:
			return nil
		}
	}
}

// errNoWatch: the runtime cannot watch instances at all.
var errNoWatch = errors.New("the runtime cannot watch instances")

// arm asks the runtime to watch the instance until ctx ends; an error
// means the loop polls.
func (l *loop) arm(ctx context.Context) (<-chan struct{}, error) {
	w, ok := l.rt.(runtime.Watcher)
	if !ok {
		return nil, errNoWatch
	}
	return w.Watch(ctx, l.id)
}

// await waits for the runtime's word that the state may have changed
// (never, on a nil channel) or for the backstop round.
func (l *loop) await(ctx context.Context, changed <-chan struct{}) sleepResult {
	select {
	case <-changed:
		return woke
	case <-l.m.backstopTick():
		return woke
	case <-l.delCh:
		return deleted
	case <-ctx.Done():
		return closed
	}
}

func (l *loop) observe(ctx context.Context) state.ExecutionState {
	s, err := l.rt.State(ctx, l.id)
	switch {
	case err == nil:
		return s
	case errors.Is(err, runtime.ErrNotFound):
		return state.ExecutionState{State: state.StateFailed, SubState: state.SubLost}
	default:
		return state.ExecutionState{State: state.StateFailed, SubState: state.SubUnknown, AdditionalInfo: err.Error()}
	}
}

// drifted words a Failed(Lost) of a watched instance as the drift it is:
// the instance was removed (or replaced, when a resync found another
// instance under its name) behind the agent's back. The runtime's own
// words stay in parentheses, and the repair the restart policy makes is
// named (see lostInfo).
func (l *loop) drifted(s state.ExecutionState) state.ExecutionState {
	if !s.Is(state.StateFailed, state.SubLost) {
		return s
	}
	l.m.mu.Lock()
	d := l.drift
	l.m.mu.Unlock()
	if d.kind == 0 {
		d = drift{kind: driftRemoved, inst: l.inst, id: l.id}
	}
	s.AdditionalInfo = lostInfo(d, s.AdditionalInfo, l.w.RestartPolicy, l.restartWanted(s))
	return s
}

// restartWanted applies the restart policy to an ending the loop watched;
// what ended before the agent started is resume's business.
//
// swdd~workload-control-loop-restarts-workload-with-enabled-restart-policy~2
func (l *loop) restartWanted(s state.ExecutionState) bool {
	// An instance lost behind the agent's back counts as failed: drift
	// repair (see Manager.resync) hands it to the restart policy.
	failed := s.Is(state.StateFailed, state.SubExecFailed) || s.Is(state.StateFailed, state.SubLost)
	switch l.w.RestartPolicy {
	case state.RestartOnFailure:
		return failed
	case state.RestartAlways:
		return failed || s.Is(state.StateSucceeded, state.SubOk)
	}
	return false
}

// restart deletes the ended instance and creates it again, without
// looking at its dependencies.
//
// swdd~workload-control-loop-handles-workload-restarts~2
func (l *loop) restart(ctx context.Context) stepFn {
	l.m.log.Info("restarting workload", "instance", l.inst.String(), "policy", string(l.w.RestartPolicy))
	id := l.id
	l.setID("")
	if err := l.rt.Delete(ctx, id); err != nil && ctx.Err() == nil {
		// Create replaces a leftover of the same instance, so go on
		// (and wait for the run folder there, if that is what failed).
		l.m.log.Warn("deleting workload before restart", "instance", l.inst.String(), "error", l.m.cfg.Storage.Check(err))
	}
	if ctx.Err() != nil {
		return nil
	}
	return (*loop).start
}

// idle keeps an instance that cannot start until it is deleted.
func (l *loop) idle(ctx context.Context) stepFn {
	select {
	case <-l.delCh:
		return (*loop).stop
	case <-ctx.Done():
		return nil
	}
}

// stop deletes the instance once its dependents allow it, retrying a
// failed delete, then removes what the agent kept of it and reports
// Removed. A silent loop deletes a host leftover the server never knew,
// without conditions or reports.
//
// swdd~agent-workload-control-loop-executes-delete~3
// swdd~agent-enqueues-unfulfilled-delete~1
// swdd~agent-workload-control-loop-delete-failed-allows-retry~1
// swdd~agent-workload-control-loop-delete-broken-allowed~1
func (l *loop) stop(ctx context.Context) stepFn {
	if !l.silent {
		for {
			l.m.mu.Lock()
			met := deleteConditionsMet(l.m.view, l.delConds)
			why := ""
			if !met {
				why = unmetDelete(l.m.view, l.delConds)
			}
			l.m.mu.Unlock()
			if met {
				break
			}
			l.report(state.ExecutionState{State: state.StateStopping, SubState: state.SubWaitingToStop, AdditionalInfo: why})
			select {
			case <-l.wake:
			case <-ctx.Done():
				return nil
			}
		}
		if l.started {
			l.report(state.ExecutionState{State: state.StateStopping, SubState: state.SubRequestedAtRuntime})
		}
	}
	if l.id != "" {
		for n := 0; ; n++ {
			err := l.rt.Delete(ctx, l.id)
			if ctx.Err() != nil {
				return nil
			}
			if err == nil {
				break
			}
			if err = l.m.cfg.Storage.Check(err); errors.Is(err, storage.ErrFailed) {
				// The runtime stopped what it could; what is left of the
				// instance goes once the run folder works again.
				l.m.log.Warn("deleting workload failed: the run folder failed; it is deleted once the run folder works again",
					"instance", l.inst.String(), "error", err)
				l.report(state.ExecutionState{State: state.StateStopping, SubState: state.SubDeleteFailed,
					AdditionalInfo: fmt.Sprintf("%v; deleted once the run folder works again", err)})
				healed, _ := l.m.cfg.Storage.Failed()
				if l.waitHealed(ctx, healed, nil) != woke {
					return nil
				}
				n--
				continue
			}
			l.m.log.Warn("deleting workload failed; retrying", "instance", l.inst.String(), "error", err)
			l.report(state.ExecutionState{State: state.StateStopping, SubState: state.SubDeleteFailed, AdditionalInfo: err.Error()})
			if l.sleep(ctx, l.m.jitter(backoffCap(n)), nil) != woke {
				return nil
			}
		}
		l.setID("")
	}
	if l.ctlDir != "" {
		l.m.cfg.Control.Close(l.inst)
		l.ctlDir = ""
	}
	if !l.keepRunDir {
		if err := os.RemoveAll(l.runDir); err != nil {
			l.m.log.Warn("removing run directory", "instance", l.inst.String(), "error", l.m.cfg.Storage.Check(err))
		}
	}
	if l.silent && l.removedInfo != "" {
		l.reportUnknownRemoved()
	}
	l.report(state.Removed)
	return nil
}

// reportUnknownRemoved reports Removed, with the drift reason, for an
// unknown instance a resync deleted, unless the server has meanwhile
// asked for that instance and a loop of its own reports it.
func (l *loop) reportUnknownRemoved() {
	l.m.mu.Lock()
	defer l.m.mu.Unlock()
	if l.m.loops[l.inst] != nil {
		return
	}
	removed := state.Removed
	removed.AdditionalInfo = l.removedInfo
	l.m.reportLocked(l.inst, removed)
}

type sleepResult int

const (
	woke sleepResult = iota
	deleted
	closed
)

// sleep waits d on the Manager's clock; a delete request (when del is not
// nil) or Close cuts it short.
func (l *loop) sleep(ctx context.Context, d time.Duration, del <-chan struct{}) sleepResult {
	fired := make(chan struct{}, 1)
	t := l.m.clock.AfterFunc(d, func() { fired <- struct{}{} })
	select {
	case <-fired:
		return woke
	case <-del:
		t.Stop()
		return deleted
	case <-ctx.Done():
		t.Stop()
		return closed
	}
}
