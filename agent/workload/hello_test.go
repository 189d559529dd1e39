package workload

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/grapnel-io/grapnel/agent/runtime"
	"github.com/grapnel-io/grapnel/internal/testwait"
	"github.com/grapnel-io/grapnel/state"
)

// An instance a loop already runs is left untouched by a ServerHello (a
// reconnect after a failover) and its state reported once more.
//
// swdd~agent-initial-list-existing-workloads~1
func TestServerHelloResumesUntouched(t *testing.T) {
	h := newHarness(t)
	h.allowRepeats = true // the re-report after a hello repeats on purpose
	a := workload("svc", "cfg", withAllowRule())
	h.m.ServerHello(context.Background(), []Added{a})
	h.waitState(a.Instance, state.RunningOk)
	id, _ := h.rt.liveID(a.Instance)

	h.m.ServerHello(context.Background(), []Added{workload("svc", "cfg", withAllowRule())})
	testwait.For(t, waitWithin, func() bool { return len(h.rec.history(a.Instance)) == 3 }, "the re-report")
	h.settle(10)
	want := []state.ExecutionState{startingTriggered, state.RunningOk, state.RunningOk}
	if got := h.rec.history(a.Instance); fmt.Sprint(got) != fmt.Sprint(want) {
		t.Fatalf("history %v, want %v", got, want)
	}
	if n := h.rt.createCount(a.Instance); n != 1 || h.rt.deleteCount() != 0 {
		t.Fatalf("hello touched the instance: %d creates, %d deletes", n, h.rt.deleteCount())
	}
	if now, _ := h.rt.liveID(a.Instance); now != id {
		t.Fatalf("ID changed from %q to %q", id, now)
	}
	if opened, closed := h.ctl.counts(a.Instance); opened != 1 || closed != 0 {
		t.Fatalf("control interface opened %d, closed %d", opened, closed)
	}
}

// An instance found on the host under the same instance name (an agent
// restart) is adopted: same ID, no Create, control interface re-opened.
//
// swdd~agent-existing-workloads-resume-existing~2
// swdd~agent-workload-control-loop-executes-resume~1
func TestServerHelloAdopts(t *testing.T) {
	h := newHarness(t)
	a := workload("svc", "cfg", withAllowRule(), withDeps(map[string]state.AddCondition{"db": state.AddCondRunning}))
	id := h.rt.preload(a.Instance, state.RunningOk)

	h.m.ServerHello(context.Background(), []Added{a})
	h.waitState(a.Instance, state.RunningOk)
	h.settle(10)
	if n := h.rt.createCount(a.Instance); n != 0 {
		t.Fatalf("adoption created the instance %d times", n)
	}
	if _, got, ok := h.m.Lookup(a.Instance); !ok || got != id {
		t.Fatalf("Lookup = %q %v, want the found ID %q", got, ok, id)
	}
	if got := h.rec.history(a.Instance); len(got) != 1 {
		t.Fatalf("history %v, want just Running(Ok)", got)
	}
	if opened, _ := h.ctl.counts(a.Instance); opened != 1 {
		t.Fatal("control interface not re-opened")
	}
	// It is watched like any other instance.
	h.rt.set(t, a.Instance, state.SucceededOk)
	h.waitState(a.Instance, state.SucceededOk)
}

// What the agent does at its start with an instance found on the host
// under the instance name the server wants, as the Ankaios agent does:
// running → resumed; succeeded → started again (in place when the runtime
// can); anything else (failed, lost in a power cycle, never started) →
// replaced. The restart policy plays no part: it is about endings the
// agent watched.
//
// swdd~agent-existing-workloads-resume-existing~2
// swdd~agent-existing-workloads-reuse-unmodified~1
// swdd~agent-existing-workloads-replace-updated~4
func TestServerHelloDecidesFoundInstances(t *testing.T) {
	created := state.ExecutionState{State: state.StatePending, SubState: state.SubStarting, AdditionalInfo: "created"}
	stopping := state.ExecutionState{State: state.StateStopping, SubState: state.SubStopping, AdditionalInfo: "stopped"}
	resumed := []state.ExecutionState{state.RunningOk}
	started := []state.ExecutionState{startingTriggered, state.RunningOk}
	tests := []struct {
		name    string
		policy  state.RestartPolicy
		found   state.ExecutionState
		rt      string // "plain", "restarter", "restarter failing"
		events  []string
		history []state.ExecutionState
	}{
		{"running", state.RestartNever, state.RunningOk, "plain", nil, resumed},
		{"running restarter", state.RestartNever, state.RunningOk, "restarter", nil, resumed},
		{"running always", state.RestartAlways, state.RunningOk, "plain", nil, resumed},
		{"succeeded", state.RestartNever, state.SucceededOk, "plain", []string{"create svc/mem-2"}, started},
		{"succeeded on failure", state.RestartOnFailure, state.SucceededOk, "plain", []string{"create svc/mem-2"}, started},
		{"succeeded in place", state.RestartNever, state.SucceededOk, "restarter", []string{"start-again svc/pre-1"}, started},
		{"succeeded in place fails", state.RestartNever, state.SucceededOk, "restarter failing",
			[]string{"start-again-failed svc/pre-1", "create svc/mem-2"}, started},
		{"failed", state.RestartNever, execFailed, "plain", []string{"delete svc/pre-1", "create svc/mem-2"}, started},
		{"failed restarter", state.RestartNever, execFailed, "restarter", []string{"delete svc/pre-1", "create svc/mem-2"}, started},
		{"lost", state.RestartNever, lost, "plain", []string{"delete svc/pre-1", "create svc/mem-2"}, started},
		{"lost on failure", state.RestartOnFailure, lost, "plain", []string{"delete svc/pre-1", "create svc/mem-2"}, started},
		{"never started", state.RestartNever, created, "restarter", []string{"delete svc/pre-1", "create svc/mem-2"}, started},
		{"stopping", state.RestartNever, stopping, "plain", []string{"delete svc/pre-1", "create svc/mem-2"}, started},
	}
	for _, tt := range tests {
		t.Run(strings.ReplaceAll(tt.name, " ", "_"), func(t *testing.T) {
			h := newHarness(t)
			switch tt.rt {
			case "restarter":
				h.m.cfg.Runtimes["mem"] = memRestarter{memRuntime: h.rt}
			case "restarter failing":
				h.m.cfg.Runtimes["mem"] = memRestarter{memRuntime: h.rt, fail: errors.New("podman start: no such container")}
			}
			a := workload("svc", "cfg", withPolicy(tt.policy), withAllowRule())
			h.rt.preload(a.Instance, tt.found)
			h.m.ServerHello(context.Background(), []Added{a})
			h.waitLast(a.Instance, state.RunningOk)
			h.settle(10)
			if got := h.rt.eventLog(); fmt.Sprint(got) != fmt.Sprint(tt.events) {
				t.Fatalf("runtime calls %v, want %v", got, tt.events)
			}
			if got := h.rec.history(a.Instance); fmt.Sprint(got) != fmt.Sprint(tt.history) {
				t.Fatalf("history %v, want %v", got, tt.history)
			}
			want := runtime.ID("mem-2")
			if len(tt.events) == 0 || strings.HasPrefix(tt.events[len(tt.events)-1], "start-again ") {
				want = "pre-1"
			}
			if _, got, ok := h.m.Lookup(a.Instance); !ok || got != want {
				t.Fatalf("Lookup = %q %v, want %q", got, ok, want)
			}
			if opened, _ := h.ctl.counts(a.Instance); opened != 1 {
				t.Fatalf("control interface opened %d times, want once", opened)
			}
		})
	}
}

// A found instance that is replaced waits for its add conditions as a new
// one does, after the old one is deleted; one deleted meanwhile is never
// created.
//
// swdd~agent-enqueues-unfulfilled-create~1
func TestFoundInstanceWaitsForAddConditions(t *testing.T) {
	for _, deleteIt := range []bool{false, true} {
		t.Run(fmt.Sprintf("deleted=%v", deleteIt), func(t *testing.T) {
			h := newHarness(t)
			h.allowRepeats = true // the hello re-reports the ticker
			h.startTicker()
			a := workload("svc", "cfg", withDeps(map[string]state.AddCondition{"db": state.AddCondRunning}))
			h.rt.preload(a.Instance, lost)
			h.m.ServerHello(context.Background(), []Added{workload("ticker", "tick"), a})
			h.waitState(a.Instance, waitingToStart)
			h.settle(10)
			if got := h.rt.eventLog(); fmt.Sprint(got) != "[create ticker/mem-1 delete svc/pre-2]" {
				t.Fatalf("runtime calls %v, want only the lost instance deleted", got)
			}
			if deleteIt {
				h.m.Update(nil, []Deleted{{Instance: a.Instance}})
				h.waitState(a.Instance, state.Removed)
				want := []state.ExecutionState{waitingToStart, state.Removed}
				if got := h.rec.history(a.Instance); fmt.Sprint(got) != fmt.Sprint(want) {
					t.Fatalf("history %v, want %v", got, want)
				}
				if n := h.rt.createCount(a.Instance); n != 0 {
					t.Fatalf("created %d times after its delete", n)
				}
				return
			}
			db := state.NewInstanceName("db", "agent_B", "x")
			h.m.States([]state.WorkloadState{{Instance: db, State: state.RunningOk}})
			h.waitLast(a.Instance, state.RunningOk)
			want := []state.ExecutionState{waitingToStart, startingTriggered, state.RunningOk}
			if got := h.rec.history(a.Instance); fmt.Sprint(got) != fmt.Sprint(want) {
				t.Fatalf("history %v, want %v", got, want)
			}
		})
	}
}

// While the runtime cannot say what a found instance is doing, nothing is
// deleted or created; once it says Running, the instance is resumed.
func TestFoundInstanceInUnknownState(t *testing.T) {
	h := newHarness(t)
	a := workload("svc", "cfg")
	unknown := state.ExecutionState{State: state.StateFailed, SubState: state.SubUnknown, AdditionalInfo: "podman ps: exit status 125"}
	id := h.rt.preload(a.Instance, unknown)
	h.m.ServerHello(context.Background(), []Added{a})
	h.waitState(a.Instance, unknown)
	h.settle(10)
	if ev := h.rt.eventLog(); len(ev) != 0 {
		t.Fatalf("runtime calls %v while the state is unknown", ev)
	}
	h.rt.set(t, a.Instance, state.RunningOk)
	h.waitLast(a.Instance, state.RunningOk)
	h.settle(10)
	if ev := h.rt.eventLog(); len(ev) != 0 {
		t.Fatalf("runtime calls %v, want the instance resumed", ev)
	}
	if _, got, _ := h.m.Lookup(a.Instance); got != id {
		t.Fatalf("Lookup = %q, want %q", got, id)
	}
}

// An instance lost while the agent watched it (removed behind its back)
// is drift: unlike Ankaios, where only Failed(ExecFailed) is a failure,
// ON_FAILURE creates it again, and the Failed(Lost) says why.
func TestLostWhileWatchedIsRestartedByPolicy(t *testing.T) {
	h := newHarness(t)
	a := workload("svc", "cfg", withPolicy(state.RestartOnFailure))
	h.m.Update([]Added{a}, nil)
	h.waitState(a.Instance, state.RunningOk)
	h.rt.set(t, a.Instance, lost)
	h.waitLost(a.Instance, "drift: removed behind the agent's back; repair: restart (restartPolicy ON_FAILURE)")
	testwait.For(t, waitWithin, func() bool { return h.rt.createCount(a.Instance) == 2 }, "a second create")
	h.waitLast(a.Instance, state.RunningOk)
}

// swdd~agent-existing-workloads-replace-updated~4
// swdd~agent-existing-workloads-delete-unneeded~2
// swdd~agent-existing-workloads-starts-new-if-not-found~1
func TestServerHelloReconciles(t *testing.T) {
	h := newHarness(t)
	// On the host, left by a previous agent process:
	oldSvc := workload("svc", "image: v1")
	oldSvcID := h.rt.preload(oldSvc.Instance, state.RunningOk)
	leftover := workload("gone", "cfg")
	leftoverID := h.rt.preload(leftover.Instance, state.RunningOk)
	otherAgent := state.NewInstanceName("theirs", "agent_B", "cfg")
	h.rt.preload(otherAgent, state.RunningOk)
	// Run by this agent process, no longer wanted:
	managed := workload("managed", "cfg")
	h.m.Update([]Added{managed}, nil)
	h.waitState(managed.Instance, state.RunningOk)

	newSvc := workload("svc", "image: v2")
	missing := workload("missing", "cfg")
	h.m.ServerHello(context.Background(), []Added{newSvc, missing})

	h.waitState(newSvc.Instance, state.RunningOk)
	h.waitState(missing.Instance, state.RunningOk)
	h.waitState(managed.Instance, state.Removed)
	testwait.For(t, waitWithin, func() bool { _, ok := h.rt.liveID(leftover.Instance); return !ok }, "the leftover to be deleted")

	// Replace: the old svc instance is deleted before the new one is
	// created, and without reports (the server never knew it).
	ev := h.rt.eventLog()
	delOld, createNew := -1, -1
	for i, e := range ev {
		switch {
		case e == "delete svc/"+string(oldSvcID):
			delOld = i
		case len(e) > 11 && e[:11] == "create svc/":
			createNew = i
		}
	}
	if delOld < 0 || createNew < delOld {
		t.Fatalf("runtime calls %v: want delete of the old svc before the create of the new", ev)
	}
	if got := h.rec.history(oldSvc.Instance); len(got) != 0 {
		t.Fatalf("reports for the replaced leftover: %v", got)
	}
	// Delete absent: the unknown leftover silently, the managed one with
	// its states.
	if got := h.rec.history(leftover.Instance); len(got) != 0 {
		t.Fatalf("reports for an unknown leftover: %v", got)
	}
	found := false
	for _, e := range ev {
		found = found || e == "delete gone/"+string(leftoverID)
	}
	if !found {
		t.Fatalf("leftover not deleted: %v", ev)
	}
	want := []state.ExecutionState{startingTriggered, state.RunningOk, requested, state.Removed}
	if got := h.rec.history(managed.Instance); fmt.Sprint(got) != fmt.Sprint(want) {
		t.Fatalf("managed history %v, want %v", got, want)
	}
	// Another agent's instances are none of this agent's business.
	if _, ok := h.rt.liveID(otherAgent); !ok {
		t.Fatal("deleted another agent's instance")
	}
	// Create missing.
	if n := h.rt.createCount(missing.Instance); n != 1 {
		t.Fatalf("missing created %d times", n)
	}
}

// A found instance whose runtime differs from the one the spec names is
// replaced, not adopted.
func TestServerHelloReplacesOnRuntimeChange(t *testing.T) {
	h := newHarness(t)
	other := newMemRuntime("other")
	h.m.cfg.Runtimes["other"] = other
	a := workload("svc", "cfg")
	oldID := other.preload(a.Instance, state.RunningOk)
	h.m.ServerHello(context.Background(), []Added{a})
	h.waitState(a.Instance, state.RunningOk)
	if _, ok := other.liveID(a.Instance); ok {
		t.Fatalf("instance %s of the other runtime not deleted", oldID)
	}
	if n := h.rt.createCount(a.Instance); n != 1 {
		t.Fatalf("created %d times", n)
	}
}

// A hello whose connection ended while the runtimes were listed changes
// nothing: a partial picture of the host must not recreate instances.
func TestServerHelloWithEndedContextDoesNothing(t *testing.T) {
	h := newHarness(t)
	a := workload("svc", "cfg")
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	h.m.ServerHello(ctx, []Added{a})
	h.m.mu.Lock()
	loops := len(h.m.all)
	h.m.mu.Unlock()
	if loops != 0 {
		t.Fatalf("an abandoned hello started %d loops", loops)
	}
}
