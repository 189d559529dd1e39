package state

import (
	"fmt"
	"reflect"
	"testing"
)

type tmap = map[string]any

func nginxTree() tmap {
	return tmap{
		"agent":         "agent_A",
		"runtime":       "podman",
		"runtimeConfig": "image: nginx",
		"tags":          tmap{"owner": "team-a", "env": "prod"},
		"files": []any{
			tmap{"mountPoint": "/etc/a", "data": "a"},
			tmap{"mountPoint": "/etc/b", "binaryData": "Yg=="},
		},
	}
}

func execTree(state, sub string) tmap {
	return tmap{"state": state, "subState": sub, "additionalInfo": "info"}
}

// sampleTree is a small complete state in its Tree view.
func sampleTree() Tree {
	return Tree{
		"desiredState": tmap{
			"apiVersion": "v1",
			"workloads": tmap{
				"nginx":   nginxTree(),
				"api":     tmap{"agent": "agent_B", "runtime": "podman", "runtimeConfig": "image: api", "tags": tmap{"owner": "team-b"}},
				"sidecar": tmap{"agent": "agent_B", "runtime": "podman", "runtimeConfig": "image: side", "tags": tmap{}},
			},
			"configs": tmap{"web": tmap{"port": "80"}},
		},
		"workloadStates": tmap{
			"agent_A": tmap{"nginx": tmap{"id-1": execTree("Running", "Ok")}},
			"agent_B": tmap{
				"api":   tmap{"id-2": execTree("Pending", "Starting")},
				"nginx": tmap{"id-3": execTree("Failed", "ExecFailed")},
			},
		},
		"agents": tmap{
			"agent_A": tmap{"status": tmap{"cpuUsage": int64(5)}, "tags": tmap{"zone": "a"}},
			"agent_B": tmap{"status": tmap{}, "tags": tmap{}},
		},
	}
}

// swdd~server-filters-get-complete-state-result~2
// swdd~server-filters-get-complete-state-result-with-wildcards~1
func TestFilterTree(t *testing.T) {
	apiOnly := tmap{"apiVersion": "v1"}
	tests := []struct {
		name  string
		in    Tree
		masks []string
		want  Tree
	}{
		{
			name:  "one workload comes with the apiVersion",
			masks: []string{"desiredState.workloads.api"},
			want: Tree{"desiredState": tmap{"apiVersion": "v1", "workloads": tmap{
				"api": tmap{"agent": "agent_B", "runtime": "podman", "runtimeConfig": "image: api", "tags": tmap{"owner": "team-b"}},
			}}},
		},
		{
			name:  "a field of a workload",
			masks: []string{"desiredState.workloads.nginx.agent"},
			want:  Tree{"desiredState": tmap{"apiVersion": "v1", "workloads": tmap{"nginx": tmap{"agent": "agent_A"}}}},
		},
		{
			name:  "missing fields are skipped silently",
			masks: []string{"workloadStates.agent_X", "agents.agent_A.nope", "nothing"},
			want:  Tree{},
		},
		{
			name:  "a missing field under desiredState still gives the apiVersion",
			masks: []string{"desiredState.workloads.ghost"},
			want:  Tree{"desiredState": apiOnly},
		},
		{
			name:  "union of masks",
			masks: []string{"desiredState.configs", "agents.agent_A.tags"},
			want: Tree{
				"desiredState": tmap{"apiVersion": "v1", "configs": tmap{"web": tmap{"port": "80"}}},
				"agents":       tmap{"agent_A": tmap{"tags": tmap{"zone": "a"}}},
			},
		},
		{
			name:  "a wider mask after a narrower one wins",
			masks: []string{"desiredState.workloads.nginx.agent", "desiredState.workloads.nginx"},
			want:  Tree{"desiredState": tmap{"apiVersion": "v1", "workloads": tmap{"nginx": nginxTree()}}},
		},
		{
			name:  "a narrower mask after a wider one changes nothing",
			masks: []string{"desiredState.workloads.nginx", "desiredState.workloads.nginx.agent", "desiredState.workloads.nginx.files.0.data"},
			want:  Tree{"desiredState": tmap{"apiVersion": "v1", "workloads": tmap{"nginx": nginxTree()}}},
		},
		{
			name:  "state mask also returns subState",
			masks: []string{"workloadStates.agent_A.nginx.id-1.state"},
			want:  Tree{"workloadStates": tmap{"agent_A": tmap{"nginx": tmap{"id-1": tmap{"state": "Running", "subState": "Ok"}}}}},
		},
		{
			name:  "subState mask also returns state",
			masks: []string{"workloadStates.agent_B.api.id-2.subState"},
			want:  Tree{"workloadStates": tmap{"agent_B": tmap{"api": tmap{"id-2": tmap{"state": "Pending", "subState": "Starting"}}}}},
		},
		{
			name:  "additionalInfo is not paired",
			masks: []string{"workloadStates.agent_B.api.id-2.additionalInfo"},
			want:  Tree{"workloadStates": tmap{"agent_B": tmap{"api": tmap{"id-2": tmap{"additionalInfo": "info"}}}}},
		},
		{
			name:  "several wildcards",
			masks: []string{"workloadStates.*.*.*.state"},
			want: Tree{"workloadStates": tmap{
				"agent_A": tmap{"nginx": tmap{"id-1": tmap{"state": "Running", "subState": "Ok"}}},
				"agent_B": tmap{
					"api":   tmap{"id-2": tmap{"state": "Pending", "subState": "Starting"}},
					"nginx": tmap{"id-3": tmap{"state": "Failed", "subState": "ExecFailed"}},
				},
			}},
		},
		{
			name:  "wildcard in the middle",
			masks: []string{"workloadStates.*.nginx"},
			want: Tree{"workloadStates": tmap{
				"agent_A": tmap{"nginx": tmap{"id-1": execTree("Running", "Ok")}},
				"agent_B": tmap{"nginx": tmap{"id-3": execTree("Failed", "ExecFailed")}},
			}},
		},
		{
			name:  "wildcard over workloads, missing tag skipped",
			masks: []string{"desiredState.workloads.*.tags.owner"},
			want: Tree{"desiredState": tmap{"apiVersion": "v1", "workloads": tmap{
				"nginx": tmap{"tags": tmap{"owner": "team-a"}},
				"api":   tmap{"tags": tmap{"owner": "team-b"}},
			}}},
		},
		{
			name:  "leading wildcard pairs state under workloadStates and adds apiVersion",
			masks: []string{"*.agent_A.nginx.id-1.state"},
			want: Tree{
				"desiredState":   apiOnly,
				"workloadStates": tmap{"agent_A": tmap{"nginx": tmap{"id-1": tmap{"state": "Running", "subState": "Ok"}}}},
			},
		},
		{
			name:  "leading wildcard",
			masks: []string{"*.agent_A.tags"},
			want: Tree{
				"desiredState": apiOnly,
				"agents":       tmap{"agent_A": tmap{"tags": tmap{"zone": "a"}}},
			},
		},
		{
			name:  "a sequence element keeps only what was selected",
			masks: []string{"desiredState.workloads.nginx.files.1.mountPoint"},
			want: Tree{"desiredState": tmap{"apiVersion": "v1", "workloads": tmap{"nginx": tmap{
				"files": []any{tmap{"mountPoint": "/etc/b"}},
			}}}},
		},
		{
			name: "sequence elements stay in order whatever the mask order",
			masks: []string{
				"desiredState.workloads.nginx.files.1.mountPoint",
				"desiredState.workloads.nginx.files.0.data",
			},
			want: Tree{"desiredState": tmap{"apiVersion": "v1", "workloads": tmap{"nginx": tmap{
				"files": []any{tmap{"data": "a"}, tmap{"mountPoint": "/etc/b"}},
			}}}},
		},
		{
			name:  "wildcard over a sequence",
			masks: []string{"desiredState.workloads.nginx.files.*.mountPoint"},
			want: Tree{"desiredState": tmap{"apiVersion": "v1", "workloads": tmap{"nginx": tmap{
				"files": []any{tmap{"mountPoint": "/etc/a"}, tmap{"mountPoint": "/etc/b"}},
			}}}},
		},
		{
			name:  "a whole sequence after a partial one",
			masks: []string{"desiredState.workloads.nginx.files.1.mountPoint", "desiredState.workloads.nginx.files"},
			want: Tree{"desiredState": tmap{"apiVersion": "v1", "workloads": tmap{"nginx": tmap{
				"files": nginxTree()["files"],
			}}}},
		},
		{
			name:  "an index out of range is skipped",
			masks: []string{"desiredState.workloads.nginx.files.2"},
			want:  Tree{"desiredState": apiOnly},
		},
		{
			name: "effectiveState gets its apiVersion too",
			in: Tree{
				"effectiveState": tmap{"apiVersion": "v1", "workloads": tmap{"w": tmap{"agent": "a"}}},
				"desiredState":   tmap{"apiVersion": "v1"},
			},
			masks: []string{"effectiveState.workloads.w.agent"},
			want:  Tree{"effectiveState": tmap{"apiVersion": "v1", "workloads": tmap{"w": tmap{"agent": "a"}}}},
		},
		{
			name:  "empty mask strings select nothing",
			masks: []string{""},
			want:  Tree{},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			in := tt.in
			if in == nil {
				in = sampleTree()
			}
			before := CloneValue(in)
			got := FilterTree(in, tt.masks)
			if !reflect.DeepEqual(got, tt.want) {
				t.Fatalf("FilterTree(%q):\n got %v\nwant %v", tt.masks, got, tt.want)
			}
			if !reflect.DeepEqual(in, before) {
				t.Fatal("FilterTree changed its input")
			}
		})
	}
}

// swdd~server-filters-get-complete-state-result~2
func TestFilterTreeWithoutMasksCopiesEverything(t *testing.T) {
	in := sampleTree()
	got := FilterTree(in, nil)
	if !reflect.DeepEqual(got, in) {
		t.Fatalf("FilterTree(nil) = %v, want the whole tree", got)
	}
	got["desiredState"].(tmap)["workloads"].(tmap)["nginx"].(tmap)["tags"].(tmap)["owner"] = "someone"
	got["desiredState"].(tmap)["workloads"].(tmap)["nginx"].(tmap)["files"].([]any)[0] = "x"
	if !reflect.DeepEqual(in, sampleTree()) {
		t.Fatal("the result shares storage with the input")
	}
	if got := FilterTree(nil, nil); got == nil || len(got) != 0 {
		t.Fatalf("FilterTree(nil, nil) = %#v, want an empty tree", got)
	}
}

func TestFilterTreeResultIsIndependent(t *testing.T) {
	in := sampleTree()
	got := FilterTree(in, []string{"desiredState.workloads.nginx", "workloadStates.*.*.*.state"})
	got["desiredState"].(tmap)["workloads"].(tmap)["nginx"].(tmap)["tags"].(tmap)["owner"] = "someone"
	got["workloadStates"].(tmap)["agent_A"].(tmap)["nginx"].(tmap)["id-1"].(tmap)["state"] = "Removed"
	if !reflect.DeepEqual(in, sampleTree()) {
		t.Fatal("the filtered result shares storage with the input")
	}
}

// bigWorkloadStates has agents × workloads execution states with one
// instance each, in the Tree view of a CompleteState.
func bigWorkloadStates(agents, workloads int) Tree {
	ws := WorkloadStatesMap{}
	for a := 0; a < agents; a++ {
		for w := 0; w < workloads; w++ {
			n := NewInstanceName(fmt.Sprintf("wl-%d", w), fmt.Sprintf("agent-%d", a), fmt.Sprintf("image: %d-%d", a, w))
			ws.Set(n, ExecutionState{State: StateRunning, SubState: SubOk, AdditionalInfo: "started"})
		}
	}
	cs := CompleteState{DesiredState: State{APIVersion: APIVersion}, WorkloadStates: ws, Agents: AgentMap{}}
	return cs.ToTree()
}

func TestFilterTreeWorkloadStatesAtScale(t *testing.T) {
	in := bigWorkloadStates(50, 10)
	got := FilterTree(in, []string{"workloadStates.*.*.*.state"})
	paths := ExpandWildcards(got, "workloadStates.*.*.*.*")
	if len(paths) != 50*10*2 {
		t.Fatalf("got %d leaves, want %d (state and subState of every instance)", len(paths), 50*10*2)
	}
	if len(got) != 1 {
		t.Fatalf("got roots %v, want only workloadStates", SortedKeys(got))
	}
}

func BenchmarkFilterTreeWorkloadStates(b *testing.B) {
	in := bigWorkloadStates(1000, 10)
	masks := []string{"workloadStates.*.*.*.state"}
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		FilterTree(in, masks)
	}
}
