package workload

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	goruntime "runtime"
	"strings"
	"testing"
	"time"

	"github.com/grapnel-io/grapnel/agent/runtime"
	"github.com/grapnel-io/grapnel/internal/testwait"
	"github.com/grapnel-io/grapnel/state"
)

// swdd~agent-workload-control-loop-executes-create~4
// swdd~agent-control-interface-created-for-eligible-workloads~1
func TestCreateBuildsSpecAndReportsStarting(t *testing.T) {
	h := newHarness(t)
	a := workload("web", "cfg-web", withAllowRule(), func(w *state.Workload) {
		w.Files = []state.File{{MountPoint: "/etc/web/index.html", Content: "<h1>hi</h1>"}}
	})
	h.m.Update([]Added{a}, nil)
	h.waitState(a.Instance, state.RunningOk)

	if got := h.rec.history(a.Instance); len(got) != 2 || got[0] != startingTriggered || got[0].AdditionalInfo != "Triggered at runtime." {
		t.Fatalf("history %v, want [Pending(Starting): 'Triggered at runtime.' Running(Ok)]", got)
	}
	spec := h.rt.lastSpec()
	wantRun := filepath.Join(h.run, testAgent+"_io", a.Instance.String())
	if spec.RunDir != wantRun {
		t.Errorf("RunDir %q, want %q", spec.RunDir, wantRun)
	}
	if spec.FilesDir != filepath.Join(wantRun, "files") {
		t.Errorf("FilesDir %q", spec.FilesDir)
	}
	if len(spec.Mounts) != 1 || spec.Mounts[0].MountPoint != "/etc/web/index.html" ||
		spec.Mounts[0].HostPath != filepath.Join(wantRun, "files", "etc", "web", "index.html") {
		t.Errorf("Mounts %+v", spec.Mounts)
	}
	if b, err := os.ReadFile(spec.Mounts[0].HostPath); err != nil || string(b) != "<h1>hi</h1>" {
		t.Errorf("file content %q, %v", b, err)
	}
	if spec.ControlInterface == "" || !strings.HasSuffix(spec.ControlInterface, "control_interface") {
		t.Errorf("ControlInterface %q", spec.ControlInterface)
	}
	if opened, _ := h.ctl.counts(a.Instance); opened != 1 {
		t.Errorf("control interface opened %d times", opened)
	}
	rt, id, ok := h.m.Lookup(a.Instance)
	live, _ := h.rt.liveID(a.Instance)
	if !ok || rt != runtime.Runtime(h.rt) || id != live {
		t.Errorf("Lookup = %v %q %v, want the live instance %q", rt, id, ok, live)
	}
}

func TestNoControlInterfaceWithoutAllowRules(t *testing.T) {
	h := newHarness(t)
	a := workload("plain", "cfg")
	h.m.Update([]Added{a}, nil)
	h.waitState(a.Instance, state.RunningOk)
	if spec := h.rt.lastSpec(); spec.ControlInterface != "" || spec.FilesDir != "" || spec.Mounts != nil {
		t.Fatalf("spec %+v has a control interface or files", spec)
	}
	if opened, _ := h.ctl.counts(a.Instance); opened != 0 {
		t.Fatalf("control interface opened")
	}
}

// swdd~workload-control-loop-sends-workload-states~2
func TestStatesReportedOnlyOnChange(t *testing.T) {
	h := newHarness(t)
	a := workload("steady", "cfg")
	h.m.Update([]Added{a}, nil)
	h.waitState(a.Instance, state.RunningOk)
	h.settle(20)
	if got := h.rec.history(a.Instance); len(got) != 2 {
		t.Fatalf("after 20 polls of a running instance: %v", got)
	}
	h.rt.set(t, a.Instance, execFailed)
	h.waitState(a.Instance, execFailed)
	h.settle(20)
	want := []state.ExecutionState{startingTriggered, state.RunningOk, execFailed}
	if got := h.rec.history(a.Instance); fmt.Sprint(got) != fmt.Sprint(want) {
		t.Fatalf("history %v, want %v", got, want)
	}
}

func TestRuntimeStateErrors(t *testing.T) {
	h := newHarness(t)
	a := workload("vanishing", "cfg")
	h.m.Update([]Added{a}, nil)
	h.waitState(a.Instance, state.RunningOk)
	id, _ := h.rt.liveID(a.Instance)
	h.rt.mu.Lock()
	delete(h.rt.insts, id)
	h.rt.mu.Unlock()
	// ErrNotFound means the instance vanished: Failed(Lost), a drift.
	// NEVER does not restart it.
	h.waitLost(a.Instance, "drift: removed behind the agent's back; repair: none (restartPolicy NEVER)")
	h.settle(10)
	if n := h.rt.createCount(a.Instance); n != 1 {
		t.Fatalf("created %d times", n)
	}
}

// swdd~workload-control-loop-restarts-workload-with-enabled-restart-policy~2
// swdd~workload-control-loop-handles-workload-restarts~2
func TestRestartPolicies(t *testing.T) {
	tests := []struct {
		policy  state.RestartPolicy
		end     state.ExecutionState
		restart bool
	}{
		{state.RestartNever, state.SucceededOk, false},
		{state.RestartNever, execFailed, false},
		{state.RestartOnFailure, state.SucceededOk, false},
		{state.RestartOnFailure, execFailed, true},
		{state.RestartAlways, state.SucceededOk, true},
		{state.RestartAlways, execFailed, true},
		{"", execFailed, false}, // unset is NEVER
	}
	for _, tt := range tests {
		t.Run(fmt.Sprintf("%s/%s", tt.policy, tt.end.Short()), func(t *testing.T) {
			h := newHarness(t)
			a := workload("job", "cfg", withPolicy(tt.policy))
			h.m.Update([]Added{a}, nil)
			h.waitState(a.Instance, state.RunningOk)
			first, _ := h.rt.liveID(a.Instance)
			h.rt.set(t, a.Instance, tt.end)
			h.waitState(a.Instance, tt.end)
			if !tt.restart {
				h.settle(10)
				if n := h.rt.createCount(a.Instance); n != 1 {
					t.Fatalf("created %d times, want no restart", n)
				}
				return
			}
			testwait.For(t, waitWithin, func() bool { return h.rt.createCount(a.Instance) == 2 }, "the restart")
			h.waitLast(a.Instance, state.RunningOk)
			want := []state.ExecutionState{startingTriggered, state.RunningOk, tt.end, startingTriggered, state.RunningOk}
			if got := h.rec.history(a.Instance); fmt.Sprint(got) != fmt.Sprint(want) {
				t.Fatalf("history %v, want %v", got, want)
			}
			second, _ := h.rt.liveID(a.Instance)
			if second == first {
				t.Fatalf("restart kept ID %q; a restart is delete + create", first)
			}
			ev := h.rt.eventLog()
			want2 := []string{"create job/" + string(first), "delete job/" + string(first), "create job/" + string(second)}
			if fmt.Sprint(ev) != fmt.Sprint(want2) {
				t.Fatalf("runtime calls %v, want %v", ev, want2)
			}
		})
	}
}

// A workload deleted on purpose is not restarted, whatever its policy.
func TestNoRestartAfterDelete(t *testing.T) {
	h := newHarness(t)
	a := workload("always", "cfg", withPolicy(state.RestartAlways))
	h.m.Update([]Added{a}, nil)
	h.waitState(a.Instance, state.RunningOk)
	h.m.Update(nil, []Deleted{{Instance: a.Instance}})
	h.waitState(a.Instance, state.Removed)
	want := []state.ExecutionState{startingTriggered, state.RunningOk, requested, state.Removed}
	if got := h.rec.history(a.Instance); fmt.Sprint(got) != fmt.Sprint(want) {
		t.Fatalf("history %v, want %v", got, want)
	}
	if n := h.rt.createCount(a.Instance); n != 1 {
		t.Fatalf("created %d times", n)
	}
	if _, ok := h.rt.liveID(a.Instance); ok {
		t.Fatal("instance still live")
	}
	if _, err := os.Stat(filepath.Join(h.run, testAgent+"_io", a.Instance.String())); !os.IsNotExist(err) {
		t.Fatalf("run directory left behind: %v", err)
	}
	if _, _, ok := h.m.Lookup(a.Instance); ok {
		t.Fatal("Lookup finds a removed instance")
	}
	if cur := h.m.Current(); len(cur) != 0 {
		t.Fatalf("Current after removal: %v", cur)
	}
}

// swdd~agent-skips-unknown-runtime~2
func TestCannotStart(t *testing.T) {
	tests := []struct {
		name     string
		added    func(h *harness) Added
		wantInfo string
		wantErr  error
	}{
		{
			name:     "unknown runtime",
			added:    func(*harness) Added { return workload("w", "cfg", withRuntime("foo")) },
			wantInfo: "runtime 'foo' is not available on agent 'agent_A'",
		},
		{
			name: "bad runtimeConfig",
			added: func(h *harness) Added {
				h.rt.checkErr = fmt.Errorf("runtimeConfig.command: required: %w", runtime.ErrBadConfig)
				return workload("w", "cfg")
			},
			wantInfo: "runtimeConfig.command: required: invalid runtimeConfig",
		},
		{
			name: "bad binaryData",
			added: func(*harness) Added {
				return workload("w", "cfg", func(w *state.Workload) {
					w.Files = []state.File{{MountPoint: "/a", Content: "b2s="}, {MountPoint: "/b", Content: "!!not base64", Binary: true}}
				})
			},
			wantInfo: "files[1].binaryData: not valid base64",
		},
		{
			name: "no spec",
			added: func(*harness) Added {
				a := workload("w", "cfg")
				a.Workload = nil
				return a
			},
			wantInfo: "the server sent no workload spec for this instance",
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			h := newHarness(t)
			a := tt.added(h)
			h.m.Update([]Added{a}, nil)
			testwait.For(t, waitWithin, func() bool {
				s, _ := h.rec.last(a.Instance)
				return s.Is(state.StatePending, state.SubStartingFailed)
			}, "StartingFailed")
			got, _ := h.rec.last(a.Instance)
			if !strings.HasPrefix(got.AdditionalInfo, tt.wantInfo) {
				t.Fatalf("additionalInfo %q, want prefix %q", got.AdditionalInfo, tt.wantInfo)
			}
			if n := h.rt.createCount(a.Instance); n != 0 {
				t.Fatalf("Create called %d times", n)
			}
			// It stays deletable.
			h.m.Update(nil, []Deleted{{Instance: a.Instance}})
			h.waitLast(a.Instance, state.Removed)
		})
	}
}

func TestDeleteFailedIsRetried(t *testing.T) {
	h := newHarness(t)
	h.rt.failDelete = func(id runtime.ID, n int) error {
		if n <= 2 {
			return errors.New("device busy")
		}
		return nil
	}
	a := workload("sticky", "cfg")
	h.m.Update([]Added{a}, nil)
	h.waitState(a.Instance, state.RunningOk)
	h.m.Update(nil, []Deleted{{Instance: a.Instance}})
	h.waitLast(a.Instance, state.Removed)
	deleteFailed := state.ExecutionState{State: state.StateStopping, SubState: state.SubDeleteFailed, AdditionalInfo: "device busy"}
	want := []state.ExecutionState{startingTriggered, state.RunningOk, requested, deleteFailed, state.Removed}
	if got := h.rec.history(a.Instance); fmt.Sprint(got) != fmt.Sprint(want) {
		t.Fatalf("history %v, want %v", got, want)
	}
	if n := h.rt.deleteCount(); n != 3 {
		t.Fatalf("Delete called %d times, want 3", n)
	}
}

// The server waits for Removed of every instance it deletes, even one this
// agent never ran.
//
// swdd~agent-executes-delete-workload-operation~1
func TestDeleteOfUnknownInstanceReportsRemoved(t *testing.T) {
	h := newHarness(t)
	inst := state.NewInstanceName("ghost", testAgent, "cfg")
	h.m.Update(nil, []Deleted{{Instance: inst}})
	h.waitState(inst, state.Removed)
}

func TestCurrentHoldsLastStates(t *testing.T) {
	h := newHarness(t)
	a, b := workload("a", "cfg-a"), workload("b", "cfg-b")
	h.m.Update([]Added{b, a}, nil)
	h.waitState(a.Instance, state.RunningOk)
	h.waitState(b.Instance, state.RunningOk)
	h.rt.set(t, b.Instance, state.SucceededOk)
	h.waitState(b.Instance, state.SucceededOk)
	got := h.m.Current()
	want := []state.WorkloadState{{Instance: a.Instance, State: state.RunningOk}, {Instance: b.Instance, State: state.SucceededOk}}
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Fatalf("Current %v, want %v", got, want)
	}
}

// Close stops the loops only: the instances keep running for the next
// agent process to adopt, no goroutine is left and Report is not called
// afterwards.
func TestCloseLeavesInstancesRunning(t *testing.T) {
	before := goruntime.NumGoroutine()
	h := newHarness(t, withFakeClock())
	h.rt.failCreate = func(s runtime.Spec, n int) error {
		if s.Instance.WorkloadName == "retrying" {
			return errors.New("image pull failed")
		}
		return nil
	}
	a, b := workload("a", "cfg-a"), workload("retrying", "cfg-r")
	c := workload("waiting", "cfg-w", withDeps(map[string]state.AddCondition{"never": state.AddCondRunning}))
	h.m.Update([]Added{a, b, c}, nil)
	h.waitState(a.Instance, state.RunningOk)
	h.waitState(b.Instance, retrying(1, errors.New("image pull failed")))
	h.waitState(c.Instance, waitingToStart)

	h.close()
	if n := h.rt.deleteCount(); n != 0 {
		t.Fatalf("Close deleted %d instances", n)
	}
	if _, ok := h.rt.liveID(a.Instance); !ok {
		t.Fatal("instance gone after Close")
	}
	// Calls after Close do nothing.
	h.m.Update([]Added{workload("late", "cfg")}, []Deleted{{Instance: a.Instance}})
	h.m.States([]state.WorkloadState{{Instance: state.NewInstanceName("never", "agent_B", "x"), State: state.RunningOk}})
	h.clk.Advance(time.Hour)
	testwait.For(t, waitWithin, func() bool { return goruntime.NumGoroutine() <= before }, "goroutines to end")
	h.rec.mu.Lock()
	defer h.rec.mu.Unlock()
	if h.rec.late {
		t.Fatal("Report called after Close returned")
	}
	if h.rt.createCount(workload("late", "cfg").Instance) != 0 || h.rt.deleteCount() != 0 {
		t.Fatal("Update after Close acted")
	}
}
