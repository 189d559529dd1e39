package workload

import (
	"fmt"
	"testing"

	"github.com/grapnel-io/grapnel/internal/testwait"
	"github.com/grapnel-io/grapnel/state"
)

// An update is Deleted(old) + Added(new) of one workload; as in Ankaios the
// old instance is deleted before the new one is created.
//
// swdd~agent-updates-deleted-and-added-workloads~1
// swdd~agent-executes-update-workload-operation~1
// swdd~agent-update-on-add-known-workload~1
func TestUpdateDeletesThenCreates(t *testing.T) {
	tests := []struct {
		name        string
		withDeleted bool
	}{
		{"deleted and added", true},
		{"added of a known workload", false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			h := newHarness(t)
			v1 := workload("svc", "image: v1")
			v2 := workload("svc", "image: v2")
			h.m.Update([]Added{v1}, nil)
			h.waitState(v1.Instance, state.RunningOk)
			oldID, _ := h.rt.liveID(v1.Instance)

			var del []Deleted
			if tt.withDeleted {
				del = []Deleted{{Instance: v1.Instance}}
			}
			h.m.Update([]Added{v2}, del)
			h.waitState(v2.Instance, state.RunningOk)
			newID, _ := h.rt.liveID(v2.Instance)

			wantOld := []state.ExecutionState{startingTriggered, state.RunningOk, requested, state.Removed}
			if got := h.rec.history(v1.Instance); fmt.Sprint(got) != fmt.Sprint(wantOld) {
				t.Fatalf("old history %v, want %v", got, wantOld)
			}
			if h.rec.index(v1.Instance, state.Removed) > h.rec.index(v2.Instance, startingTriggered) {
				t.Fatal("new instance reported before the old one was removed")
			}
			want := []string{"create svc/" + string(oldID), "delete svc/" + string(oldID), "create svc/" + string(newID)}
			if got := h.rt.eventLog(); fmt.Sprint(got) != fmt.Sprint(want) {
				t.Fatalf("runtime calls %v, want %v", got, want)
			}
		})
	}
}

// An Added of an instance that already runs unchanged does nothing.
func TestAddedUnchangedIsNoop(t *testing.T) {
	h := newHarness(t)
	a := workload("svc", "cfg")
	h.m.Update([]Added{a}, nil)
	h.waitState(a.Instance, state.RunningOk)
	h.m.Update([]Added{workload("svc", "cfg")}, nil)
	h.settle(10)
	if n := h.rt.createCount(a.Instance); n != 1 {
		t.Fatalf("created %d times", n)
	}
	if got := h.rec.history(a.Instance); len(got) != 2 {
		t.Fatalf("history %v", got)
	}
}

// Deleting and re-adding the same instance in one message restarts it
// (Ankaios treats it as an update of the workload).
func TestSameInstanceDeletedAndAdded(t *testing.T) {
	h := newHarness(t)
	a := workload("svc", "cfg")
	h.m.Update([]Added{a}, nil)
	h.waitState(a.Instance, state.RunningOk)
	first, _ := h.rt.liveID(a.Instance)
	h.m.Update([]Added{a}, []Deleted{{Instance: a.Instance}})
	testwait.For(t, waitWithin, func() bool { return h.rt.createCount(a.Instance) == 2 }, "the re-creation")
	h.waitLast(a.Instance, state.RunningOk)
	want := []state.ExecutionState{startingTriggered, state.RunningOk, requested, state.Removed, startingTriggered, state.RunningOk}
	if got := h.rec.history(a.Instance); fmt.Sprint(got) != fmt.Sprint(want) {
		t.Fatalf("history %v, want %v", got, want)
	}
	if second, _ := h.rt.liveID(a.Instance); second == first {
		t.Fatal("same runtime ID after delete + add")
	}
}

// The whole update waits for the old instance's delete conditions; the new
// instance says nothing meanwhile.
//
// swdd~agent-enqueues-update-with-unfulfilled-delete~1
func TestUpdateWaitsForDeleteConditions(t *testing.T) {
	h := newHarness(t)
	h.startTicker()
	v1 := workload("db", "v1")
	v2 := workload("db", "v2")
	client := state.InstanceName{WorkloadName: "client", AgentName: "agent_B", ID: "c"}
	h.m.Update([]Added{v1}, nil)
	h.waitState(v1.Instance, state.RunningOk)
	h.m.States([]state.WorkloadState{{Instance: client, State: state.RunningOk}})
	h.m.Update([]Added{v2}, []Deleted{{Instance: v1.Instance, Dependencies: map[string]state.DeleteCondition{"client": state.DelCondNotPendingNorRunning}}})
	h.waitState(v1.Instance, waitingToStop)
	h.settle(5)
	if got := h.rec.history(v2.Instance); len(got) != 0 {
		t.Fatalf("new instance reported %v while the old waits to stop", got)
	}
	h.m.States([]state.WorkloadState{{Instance: client, State: waitingToStart}})
	h.waitState(v2.Instance, state.RunningOk)
	h.waitState(v1.Instance, state.Removed)
}

// When the old instance may go but the new one's dependencies are unmet,
// the old one is deleted and the new one waits to start.
//
// swdd~agent-handles-update-with-fulfilled-delete~1
func TestUpdateWithUnmetAddConditions(t *testing.T) {
	h := newHarness(t)
	v1 := workload("app", "v1")
	v2 := workload("app", "v2", withDeps(map[string]state.AddCondition{"db": state.AddCondRunning}))
	h.m.Update([]Added{v1}, nil)
	h.waitState(v1.Instance, state.RunningOk)
	h.m.Update([]Added{v2}, []Deleted{{Instance: v1.Instance}})
	h.waitState(v1.Instance, state.Removed)
	h.waitState(v2.Instance, waitingToStart)
	h.m.States([]state.WorkloadState{{Instance: state.InstanceName{WorkloadName: "db", AgentName: "agent_B", ID: "1"}, State: state.RunningOk}})
	h.waitState(v2.Instance, state.RunningOk)
}
