package workload

import (
	"context"
	"fmt"
	"testing"

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
	eventually(t, "the re-report", func() bool { return len(h.rec.history(a.Instance)) == 3 })
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

// An adopted instance that ended or was lost while no agent watched it is
// reported and its restart policy applied.
func TestServerHelloAdoptsEndedInstance(t *testing.T) {
	tests := []struct {
		policy  state.RestartPolicy
		found   state.ExecutionState
		restart bool
	}{
		{state.RestartNever, lost, false},
		{state.RestartOnFailure, lost, true},
		{state.RestartAlways, lost, true},
		{state.RestartOnFailure, state.SucceededOk, false},
		{state.RestartAlways, state.SucceededOk, true},
		{state.RestartNever, execFailed, false},
	}
	for _, tt := range tests {
		t.Run(fmt.Sprintf("%s/%s", tt.policy, tt.found.Short()), func(t *testing.T) {
			h := newHarness(t)
			a := workload("svc", "cfg", withPolicy(tt.policy))
			id := h.rt.preload(a.Instance, tt.found)
			h.m.ServerHello(context.Background(), []Added{a})
			h.waitState(a.Instance, tt.found)
			if !tt.restart {
				h.settle(10)
				if n := h.rt.createCount(a.Instance); n != 0 {
					t.Fatalf("restarted under %s", tt.policy)
				}
				return
			}
			h.waitLast(a.Instance, state.RunningOk)
			want := []string{fmt.Sprintf("delete svc/%s", id)}
			if got := h.rt.eventLog(); len(got) != 2 || got[0] != want[0] {
				t.Fatalf("runtime calls %v, want a delete of %s then a create", got, id)
			}
		})
	}
}

// A lost instance that is not freshly adopted is not restarted under
// ON_FAILURE: in Ankaios only Failed(ExecFailed) is a failure.
func TestLostWhileWatchedIsNotRestarted(t *testing.T) {
	h := newHarness(t)
	a := workload("svc", "cfg", withPolicy(state.RestartOnFailure))
	h.m.Update([]Added{a}, nil)
	h.waitState(a.Instance, state.RunningOk)
	h.rt.set(t, a.Instance, lost)
	h.waitState(a.Instance, lost)
	h.settle(10)
	if n := h.rt.createCount(a.Instance); n != 1 {
		t.Fatalf("created %d times", n)
	}
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
	eventually(t, "the leftover to be deleted", func() bool { _, ok := h.rt.liveID(leftover.Instance); return !ok })

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
