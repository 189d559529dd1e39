package podman

import (
	"testing"

	"github.com/grapnel-io/grapnel/state"
)

// swdd~podman-kube-state-getter-maps-state~2
// swdd~podman-kube-state-getter-combines-states~2
func TestKubeState(t *testing.T) {
	ctr := func(id, pod, st string, code int) container {
		return container{ID: id, Pod: pod, State: st, ExitCode: code}
	}
	failed := func(sub, info string) state.ExecutionState {
		return state.ExecutionState{State: state.StateFailed, SubState: sub, AdditionalInfo: info}
	}
	starting := state.ExecutionState{State: state.StatePending, SubState: state.SubStarting, AdditionalInfo: "starting container"}
	stopping := state.ExecutionState{State: state.StateStopping, SubState: state.SubStopping, AdditionalInfo: "stopping container"}
	tests := []struct {
		name string
		pods []string
		cs   []container
		want state.ExecutionState
	}{
		{"all running", []string{"p1"}, []container{ctr("i", "p1", "running", 0), ctr("a", "p1", "running", 0)}, state.RunningOk},
		{"one exited 0, one running: running", []string{"p1"}, []container{ctr("i", "p1", "running", 0), ctr("a", "p1", "exited", 0)}, state.RunningOk},
		{"all exited 0: succeeded", []string{"p1"}, []container{ctr("i", "p1", "exited", 0), ctr("a", "p1", "exited", 0)}, state.SucceededOk},
		{"a failure wins over running", []string{"p1"}, []container{ctr("i", "p1", "running", 0), ctr("a", "p1", "exited", 2)}, failed(state.SubExecFailed, "exit code 2")},
		{"a failure in another pod wins", []string{"p1", "p2"}, []container{ctr("a", "p1", "running", 0), ctr("b", "p2", "exited", 137)}, failed(state.SubExecFailed, "exit code 137")},
		{"created is starting", []string{"p1"}, []container{ctr("i", "p1", "running", 0), ctr("a", "p1", "created", 0)}, starting},
		{"configured and initialized are starting", []string{"p1"}, []container{ctr("a", "p1", "configured", 0), ctr("b", "p1", "Initialized", 0)}, starting},
		{"starting wins over a gone pod", []string{"p1", "p2"}, []container{ctr("a", "p1", "created", 0)}, starting},
		{"a gone pod is lost, even next to a running one", []string{"p1", "p2"}, []container{ctr("a", "p1", "running", 0)}, failed(state.SubLost, "pod p2 is gone")},
		{"every pod gone: lost", []string{"0123456789abcdef"}, nil, failed(state.SubLost, "pod 0123456789ab is gone")},
		{"paused is unknown", []string{"p1"}, []container{ctr("a", "p1", "paused", 0), ctr("b", "p1", "running", 0)}, failed(state.SubUnknown, "unknown container state")},
		{"a state podman may add is unknown", []string{"p1"}, []container{ctr("a", "p1", "hibernating", 0)}, failed(state.SubUnknown, "unknown container state")},
		{"stopping, stopped, removing are stopping", []string{"p1"}, []container{ctr("a", "p1", "stopping", 0), ctr("b", "p1", "stopped", 0), ctr("c", "p1", "removing", 0), ctr("d", "p1", "exited", 0)}, stopping},
		{"running wins over stopping", []string{"p1"}, []container{ctr("a", "p1", "stopping", 0), ctr("b", "p1", "running", 0)}, state.RunningOk},
		{"no pod in the manifest: succeeded", nil, nil, state.SucceededOk},
		{"containers of other pods do not count", []string{"p1"}, []container{ctr("a", "p1", "running", 0), ctr("x", "p9", "exited", 1), ctr("y", "", "exited", 1)}, state.RunningOk},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			snap := &snapshot{byID: map[string]container{}}
			for _, c := range tt.cs {
				snap.byID[c.ID] = c
			}
			if got := kubeState(tt.pods, podsOf(snap, tt.pods)); got != tt.want {
				t.Fatalf("state %v, want %v", got, tt.want)
			}
		})
	}
}

func TestParsePSPod(t *testing.T) {
	cs, err := parsePS(`[{"Id": "c1", "Pod": "p1", "IsInfra": true, "State": "running"}, {"Id": "c2", "Pod": "", "State": "exited"}]`)
	if err != nil {
		t.Fatal(err)
	}
	if cs[0].Pod != "p1" || !cs[0].IsInfra || cs[1].Pod != "" || cs[1].IsInfra {
		t.Fatalf("parsed %+v", cs)
	}
}
