package workload

import (
	"fmt"
	"github.com/grapnel-io/grapnel/internal/testwait"
	"testing"

	"github.com/grapnel-io/grapnel/state"
)

func es(s state.ExecState, sub string) state.ExecutionState {
	return state.ExecutionState{State: s, SubState: sub}
}

// swdd~execution-states-of-workload-dependencies-fulfill-add-conditions~1
func TestAddConditionMet(t *testing.T) {
	all := []state.ExecutionState{
		es(state.StatePending, state.SubInitial), waitingToStart, pendingStart, es(state.StatePending, state.SubStartingFailed),
		state.RunningOk, es(state.StateStopping, state.SubStopping), waitingToStop, requested,
		state.SucceededOk, es(state.StateFailed, state.SubExecFailed), lost, es(state.StateFailed, state.SubUnknown),
		state.AgentDisconnected, state.NotScheduled,
	}
	fulfils := map[state.AddCondition]state.ExecutionState{
		state.AddCondRunning:   state.RunningOk,
		state.AddCondSucceeded: state.SucceededOk,
		state.AddCondFailed:    es(state.StateFailed, state.SubExecFailed),
	}
	for cond, only := range fulfils {
		for _, s := range all {
			if got := addConditionMet(cond, s); got != (s == only) {
				t.Errorf("addConditionMet(%s, %s) = %v", cond, s, got)
			}
		}
	}
}

// swdd~execution-states-of-workload-dependencies-fulfill-delete-conditions~1
func TestDeleteConditionMet(t *testing.T) {
	tests := []struct {
		cond state.DeleteCondition
		s    state.ExecutionState
		want bool
	}{
		{state.DelCondNotPendingNorRunning, state.RunningOk, false},
		{state.DelCondNotPendingNorRunning, pendingStart, false},
		{state.DelCondNotPendingNorRunning, es(state.StatePending, state.SubInitial), false},
		{state.DelCondNotPendingNorRunning, waitingToStart, true}, // not started: holds nothing back
		{state.DelCondNotPendingNorRunning, state.SucceededOk, true},
		{state.DelCondNotPendingNorRunning, execFailed, true},
		{state.DelCondNotPendingNorRunning, requested, true},
		{state.DelCondRunning, state.RunningOk, true},
		{state.DelCondRunning, state.SucceededOk, false},
		{state.DelCondRunning, waitingToStart, true},
		{"DEL_COND_BOGUS", state.SucceededOk, false},
	}
	for _, tt := range tests {
		if got := deleteConditionMet(tt.cond, tt.s); got != tt.want {
			t.Errorf("deleteConditionMet(%s, %s) = %v, want %v", tt.cond, tt.s, got, tt.want)
		}
	}
}

// The agent's hysteresis: a late poll does not undo a stop in progress.
func TestHeldByStopping(t *testing.T) {
	tests := []struct {
		last, next state.ExecutionState
		held       bool
	}{
		{requested, state.RunningOk, true},
		{requested, state.SucceededOk, true},
		{requested, execFailed, true},
		{requested, lost, true},
		{waitingToStop, state.RunningOk, true},
		{requested, state.Removed, false},
		{requested, es(state.StateStopping, state.SubDeleteFailed), false},
		{waitingToStop, requested, false},
		{es(state.StateStopping, state.SubDeleteFailed), state.RunningOk, false},
		{state.RunningOk, requested, false},
	}
	for _, tt := range tests {
		if got := heldByStopping(tt.last, tt.next); got != tt.held {
			t.Errorf("heldByStopping(%s, %s) = %v", tt.last, tt.next, got)
		}
	}
	h := newHarness(t)
	inst := state.NewInstanceName("x", testAgent, "cfg")
	h.m.mu.Lock()
	h.m.reportLocked(inst, requested)
	h.m.reportLocked(inst, state.RunningOk)
	h.m.reportLocked(inst, state.Removed)
	h.m.mu.Unlock()
	h.waitState(inst, state.Removed)
	if got := fmt.Sprint(h.rec.history(inst)); got != fmt.Sprint([]state.ExecutionState{requested, state.Removed}) {
		t.Fatalf("reported %s", got)
	}
}

// swdd~agent-enqueues-unfulfilled-create~1
// swdd~workload-ready-to-create-on-fulfilled-dependencies~1
// swdd~agent-handles-update-workload-state-requests~1
func TestAddConditions(t *testing.T) {
	depOn := func(agent, id string) state.InstanceName {
		return state.InstanceName{WorkloadName: "db", AgentName: agent, ID: id}
	}
	tests := []struct {
		cond      state.AddCondition
		unmet, ok state.ExecutionState
	}{
		{state.AddCondRunning, pendingStart, state.RunningOk},
		{state.AddCondSucceeded, state.RunningOk, state.SucceededOk},
		{state.AddCondFailed, lost, execFailed},
	}
	for _, tt := range tests {
		t.Run(string(tt.cond), func(t *testing.T) {
			h := newHarness(t)
			h.startTicker()
			a := workload("app", "cfg", withDeps(map[string]state.AddCondition{"db": tt.cond}))
			h.m.States([]state.WorkloadState{{Instance: depOn("agent_B", "1"), State: tt.unmet}})
			h.m.Update([]Added{a}, nil)
			h.waitState(a.Instance, waitingToStart)
			h.m.States([]state.WorkloadState{{Instance: depOn("agent_C", "2"), State: tt.unmet}})
			h.settle(5)
			if n := h.rt.createCount(a.Instance); n != 0 {
				t.Fatalf("created with the condition unmet")
			}
			h.m.States([]state.WorkloadState{{Instance: depOn("agent_B", "1"), State: tt.ok}})
			h.waitState(a.Instance, state.RunningOk)
			want := []state.ExecutionState{waitingToStart, startingTriggered, state.RunningOk}
			if got := h.rec.history(a.Instance); fmt.Sprint(got) != fmt.Sprint(want) {
				t.Fatalf("history %v, want %v", got, want)
			}
		})
	}
}

// Any one instance of the dependency, on any agent, in the required state
// is enough.
func TestAddConditionAnyInstance(t *testing.T) {
	h := newHarness(t)
	h.m.States([]state.WorkloadState{
		{Instance: state.InstanceName{WorkloadName: "db", AgentName: "agent_B", ID: "old"}, State: pendingStart},
		{Instance: state.InstanceName{WorkloadName: "db", AgentName: "agent_C", ID: "new"}, State: state.RunningOk},
		{Instance: state.InstanceName{WorkloadName: "cache", AgentName: "agent_B", ID: "1"}, State: state.SucceededOk},
	})
	a := workload("app", "cfg", withDeps(map[string]state.AddCondition{"db": state.AddCondRunning, "cache": state.AddCondSucceeded}))
	h.m.Update([]Added{a}, nil)
	h.waitState(a.Instance, state.RunningOk)
	if h.rec.index(a.Instance, waitingToStart) >= 0 {
		t.Fatal("waited although both conditions held")
	}
	// A dependency the server reports Removed no longer counts.
	b := workload("late", "cfg", withDeps(map[string]state.AddCondition{"cache": state.AddCondSucceeded}))
	h.m.States([]state.WorkloadState{{Instance: state.InstanceName{WorkloadName: "cache", AgentName: "agent_B", ID: "1"}, State: state.Removed}})
	h.m.Update([]Added{b}, nil)
	h.waitState(b.Instance, waitingToStart)
}

// Own instances count: a dependency on a workload of the same agent is
// seen from the agent's own reports.
func TestAddConditionOnOwnWorkload(t *testing.T) {
	h := newHarness(t)
	db := workload("db", "cfg-db")
	app := workload("app", "cfg-app", withDeps(map[string]state.AddCondition{"db": state.AddCondSucceeded}))
	h.m.Update([]Added{app, db}, nil)
	h.waitState(db.Instance, state.RunningOk)
	h.waitState(app.Instance, waitingToStart)
	// The server echoing an older state of db does not override the
	// agent's own.
	h.m.States([]state.WorkloadState{{Instance: db.Instance, State: state.SucceededOk}})
	h.settle(5)
	if n := h.rt.createCount(app.Instance); n != 0 {
		t.Fatal("started on the server's stale state of an own instance")
	}
	h.rt.set(t, db.Instance, state.SucceededOk)
	h.waitState(app.Instance, state.RunningOk)
	if h.rec.index(db.Instance, state.SucceededOk) > h.rec.index(app.Instance, startingTriggered) {
		t.Fatal("app started before db succeeded")
	}
}

// swdd~agent-enqueues-unfulfilled-delete~1
// swdd~workload-ready-to-delete-on-fulfilled-dependencies~1
func TestDeleteConditions(t *testing.T) {
	dependent := state.InstanceName{WorkloadName: "client", AgentName: "agent_B", ID: "1"}
	tests := []struct {
		name       string
		cond       state.DeleteCondition
		before     state.ExecutionState // the dependent's state when the delete arrives
		after      state.ExecutionState // a state that releases it; zero when before already does
		shouldWait bool
	}{
		{"running dependent holds", state.DelCondNotPendingNorRunning, state.RunningOk, state.SucceededOk, true},
		{"starting dependent holds", state.DelCondNotPendingNorRunning, pendingStart, execFailed, true},
		{"waiting-to-start dependent does not hold", state.DelCondNotPendingNorRunning, waitingToStart, state.ExecutionState{}, false},
		{"ended dependent does not hold", state.DelCondNotPendingNorRunning, state.SucceededOk, state.ExecutionState{}, false},
		{"DEL_COND_RUNNING waits for running", state.DelCondRunning, state.SucceededOk, state.RunningOk, true},
		{"removed dependent releases", state.DelCondNotPendingNorRunning, state.RunningOk, state.Removed, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			h := newHarness(t)
			h.startTicker()
			a := workload("server", "cfg", withAllowRule())
			h.m.Update([]Added{a}, nil)
			h.waitState(a.Instance, state.RunningOk)
			h.m.States([]state.WorkloadState{{Instance: dependent, State: tt.before}})
			h.m.Update(nil, []Deleted{{Instance: a.Instance, Dependencies: map[string]state.DeleteCondition{"client": tt.cond}}})
			if tt.shouldWait {
				h.waitState(a.Instance, waitingToStop)
				h.m.States([]state.WorkloadState{{Instance: state.InstanceName{WorkloadName: "other", AgentName: "agent_B", ID: "9"}, State: state.RunningOk}})
				h.settle(5)
				if n := h.rt.deleteCount(); n != 0 {
					t.Fatal("deleted while the delete condition was unmet")
				}
				if _, closed := h.ctl.counts(a.Instance); closed != 0 {
					t.Fatal("control interface closed while waiting to stop")
				}
				h.m.States([]state.WorkloadState{{Instance: dependent, State: tt.after}})
			}
			h.waitState(a.Instance, state.Removed)
			want := []state.ExecutionState{startingTriggered, state.RunningOk, requested, state.Removed}
			if tt.shouldWait {
				want = []state.ExecutionState{startingTriggered, state.RunningOk, waitingToStop, requested, state.Removed}
			}
			if got := h.rec.history(a.Instance); fmt.Sprint(got) != fmt.Sprint(want) {
				t.Fatalf("history %v, want %v", got, want)
			}
			if n := h.rt.deleteCount(); n != 1 {
				t.Fatalf("Delete called %d times", n)
			}
			if opened, closed := h.ctl.counts(a.Instance); opened != 1 || closed != 1 {
				t.Fatalf("control interface opened %d, closed %d", opened, closed)
			}
		})
	}
}

// Issue 31 point 4: Pending(WaitingToStart) and Stopping(WaitingToStop)
// say what the instance waits for: each unmet dependency with what it is
// now ("missing" when no instance is known), each dependent that holds a
// delete back with its state.
func TestWaitingNamesWhatItWaitsFor(t *testing.T) {
	view := state.WorkloadStatesMap{"agent_B": {
		"db":  {"1": pendingStart},
		"api": {"2": state.RunningOk},
	}}
	got := unmetAdd(view, map[string]state.AddCondition{"db": state.AddCondRunning, "cache": state.AddCondSucceeded, "api": state.AddCondRunning})
	if want := "waiting for cache: missing, db: Pending(Starting)"; got != want {
		t.Fatalf("unmetAdd = %q, want %q", got, want)
	}
	got = unmetDelete(view, map[string]state.DeleteCondition{"api": state.DelCondNotPendingNorRunning, "db": state.DelCondRunning})
	if want := "waiting for api: Running(Ok), db: Pending(Starting)"; got != want {
		t.Fatalf("unmetDelete = %q, want %q", got, want)
	}
	// As reported by a loop.
	h := newHarness(t)
	a := workload("app", "cfg", withDeps(map[string]state.AddCondition{"db": state.AddCondRunning}))
	h.m.Update([]Added{a}, nil)
	testwait.For(t, waitWithin, func() bool {
		h.rec.mu.Lock()
		defer h.rec.mu.Unlock()
		for _, w := range h.rec.raw {
			if w.Instance == a.Instance && w.State.AdditionalInfo == "waiting for db: missing" {
				return true
			}
		}
		return false
	}, "app to report what it waits for")
}
