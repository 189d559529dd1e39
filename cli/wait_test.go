package cli

import (
	"reflect"
	"sort"
	"strings"
	"testing"

	"github.com/grapnel-io/grapnel/rpc/ankbase"
	"github.com/grapnel-io/grapnel/state"
)

func inst(s string) state.InstanceName {
	n, err := state.ParseInstanceName(s)
	if err != nil {
		panic(err)
	}
	return n
}

func es(st state.ExecState, sub string) state.ExecutionState {
	return state.ExecutionState{State: st, SubState: sub}
}

func waiting(w *WaitList) []string {
	var out []string
	for k := range w.added {
		out = append(out, "+"+k)
	}
	for k := range w.deleted {
		out = append(out, "-"+k)
	}
	sort.Strings(out)
	return out
}

// swdd~cli-checks-for-final-workload-state~3
func TestFinalStates(t *testing.T) {
	tests := []struct {
		state       state.ExecutionState
		afterAdd    bool
		afterDelete bool
	}{
		{es(state.StateRunning, state.SubOk), true, false},
		{es(state.StateSucceeded, state.SubOk), true, false},
		{es(state.StateFailed, state.SubExecFailed), true, false},
		{es(state.StateFailed, state.SubLost), true, false},
		{state.NotScheduled, true, false},
		{es(state.StatePending, state.SubStartingFailed), true, false},
		{state.AgentDisconnected, true, true},
		{state.Removed, false, true},
		{state.PendingInitial, false, false},
		{es(state.StatePending, state.SubWaitingToStart), false, false},
		{es(state.StatePending, state.SubStarting), false, false},
		{es(state.StateStopping, state.SubWaitingToStop), false, false},
		{es(state.StateStopping, state.SubRequestedAtRuntime), false, false},
		{es(state.StateStopping, state.SubDeleteFailed), false, false},
	}
	for _, tt := range tests {
		if got := finalAfterAdd(tt.state); got != tt.afterAdd {
			t.Errorf("finalAfterAdd(%s) = %v", tt.state, got)
		}
		if got := finalAfterDelete(tt.state); got != tt.afterDelete {
			t.Errorf("finalAfterDelete(%s) = %v", tt.state, got)
		}
	}
}

func TestWaitListUpdate(t *testing.T) {
	const (
		webNew = "web.new.agent_A"
		webOld = "web.old.agent_A"
		db     = "db.1.agent_B"
		remote = "job.2.agent_Z" // agent not connected
	)
	tests := []struct {
		name        string
		updates     [][]state.WorkloadState
		wantWaiting []string
		wantChanged int // rows reported changed by the last update
	}{
		{
			name:        "nothing reported yet",
			wantWaiting: []string{"+" + db, "+" + webNew, "-" + webOld},
		},
		{
			name: "pending is not final, running is",
			updates: [][]state.WorkloadState{
				{{Instance: inst(webNew), State: state.PendingInitial}},
				{{Instance: inst(webNew), State: es(state.StateRunning, state.SubOk)}},
			},
			wantWaiting: []string{"+" + db, "-" + webOld},
			wantChanged: 1,
		},
		{
			name: "stopping is not final for a delete, removed is",
			updates: [][]state.WorkloadState{
				{{Instance: inst(webOld), State: es(state.StateStopping, state.SubRequestedAtRuntime)}},
				{{Instance: inst(webOld), State: state.Removed}, {Instance: inst(db), State: es(state.StatePending, state.SubStartingFailed)}},
			},
			wantWaiting: []string{"+" + webNew},
			wantChanged: 2,
		},
		{
			name: "a repeated state changes nothing",
			updates: [][]state.WorkloadState{
				{{Instance: inst(db), State: state.PendingInitial}},
				{{Instance: inst(db), State: state.PendingInitial}},
			},
			wantWaiting: []string{"+" + db, "+" + webNew, "-" + webOld},
			wantChanged: 0,
		},
		{
			name: "untracked instances are ignored",
			updates: [][]state.WorkloadState{
				{{Instance: inst("other.9.agent_A"), State: es(state.StateRunning, state.SubOk)}},
			},
			wantWaiting: []string{"+" + db, "+" + webNew, "-" + webOld},
		},
		{
			name: "a disconnected agent settles adds and deletes",
			updates: [][]state.WorkloadState{
				{{Instance: inst(webNew), State: state.AgentDisconnected}, {Instance: inst(webOld), State: state.AgentDisconnected}, {Instance: inst(db), State: state.NotScheduled}},
			},
			wantWaiting: nil,
			wantChanged: 3,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			w := NewWaitList([]state.InstanceName{inst(webNew), inst(db), inst(remote)}, []state.InstanceName{inst(webOld)}, []string{"agent_A", "agent_B"})
			var changed []WorkloadRow
			for _, u := range tt.updates {
				changed = w.Update(u)
			}
			if got := waiting(w); !reflect.DeepEqual(got, tt.wantWaiting) {
				t.Fatalf("waiting for %v, want %v", got, tt.wantWaiting)
			}
			if len(changed) != tt.wantChanged {
				t.Fatalf("changed = %v, want %d rows", changed, tt.wantChanged)
			}
			if w.Done() != (len(tt.wantWaiting) == 0) {
				t.Fatalf("Done() = %v", w.Done())
			}
			if len(w.Rows()) != 4 {
				t.Fatalf("rows = %v, want all 4 tracked instances shown", w.Rows())
			}
		})
	}
}

func TestWaitListSeed(t *testing.T) {
	before := tree(t, `
desiredState:
  workloads:
    web: {agent: agent_A, runtime: podman, runtimeConfig: old}
workloadStates:
  agent_A:
    web:
      old: {state: Running, subState: Ok}
    gone:
      g1: {state: Running, subState: Ok}
agents: {agent_A: {}}
`)
	after := tree(t, `
desiredState:
  workloads:
    web: {agent: agent_A, runtime: podman, runtimeConfig: new}
    cron: {agent: agent_A, runtime: containerd, runtimeConfig: c}
workloadStates:
  agent_A:
    web:
      old: {state: Stopping, subState: RequestedAtRuntime}
      new: {state: Pending, subState: Initial}
    cron:
      c1: {state: Succeeded, subState: Ok}
agents: {agent_A: {}}
`)
	w := NewWaitList(
		[]state.InstanceName{inst("web.new.agent_A"), inst("cron.c1.agent_A")},
		[]state.InstanceName{inst("web.old.agent_A"), inst("gone.g1.agent_A")},
		connectedAgents(after))
	w.Seed(before, after)
	// cron already succeeded, gone is no longer in the states: both done,
	// and gone shows as removed.
	if got, want := waiting(w), []string{"+web.new.agent_A", "-web.old.agent_A"}; !reflect.DeepEqual(got, want) {
		t.Fatalf("waiting for %v, want %v", got, want)
	}
	got := w.Table("|").Render(0, FitNone, 0)
	want := lines(
		"WORKLOAD NAME   AGENT     RUNTIME        EXECUTION STATE                ADDITIONAL INFO",
		"cron            agent_A   containerd     Succeeded(Ok)                                 ",
		"gone            agent_A                  Removed                                       ",
		"web             agent_A   podman       | Pending(Initial)                              ",
		"web             agent_A   podman       | Stopping(RequestedAtRuntime)                  ",
	)
	if got != want {
		t.Fatalf("got\n%s\nwant\n%s", got, want)
	}
}

func TestWaitListDoesNotWaitForDisconnectedAgents(t *testing.T) {
	w := NewWaitList([]state.InstanceName{inst("a.1.gone")}, []state.InstanceName{inst("b.2.gone"), inst("c.3.")}, []string{"agent_A"})
	if !w.Done() {
		t.Fatalf("waiting for %v on agents that are not connected", waiting(w))
	}
}

func TestProgressLine(t *testing.T) {
	r := WorkloadRow{Instance: inst("web.1.agent_A"), State: state.ExecutionState{State: state.StatePending, SubState: state.SubStartingFailed, AdditionalInfo: "no image"}}
	if got, want := ProgressLine(r), "web on agent_A: Pending(StartingFailed): 'no image'"; got != want {
		t.Fatalf("got %q, want %q", got, want)
	}
}

func TestParseUpdateSuccess(t *testing.T) {
	added, deleted, err := ParseUpdateSuccess(&ankbase.UpdateStateSuccess{
		AddedWorkloads:   []string{"web.abc.agent_A"},
		DeletedWorkloads: []string{"db.def.agent_B", "x.y."},
	})
	if err != nil {
		t.Fatal(err)
	}
	if added[0] != inst("web.abc.agent_A") || len(deleted) != 2 || deleted[1].AgentName != "" {
		t.Fatalf("added %v deleted %v", added, deleted)
	}
	if _, _, err := ParseUpdateSuccess(&ankbase.UpdateStateSuccess{AddedWorkloads: []string{"nodots"}}); err == nil || !strings.Contains(err.Error(), "malformed") {
		t.Fatalf("err = %v", err)
	}
}
