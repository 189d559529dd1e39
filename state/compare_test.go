package state

import (
	"reflect"
	"testing"
)

// swdd~server-calculates-state-differences~1
func TestCompareTrees(t *testing.T) {
	tests := []struct {
		name          string
		before, after Tree
		want          StateDiff
	}{
		{
			name:   "equal trees",
			before: sampleTree(),
			after:  sampleTree(),
		},
		{
			name: "both empty",
		},
		{
			name:   "leaf updated",
			before: Tree{"a": tmap{"b": "1"}},
			after:  Tree{"a": tmap{"b": "2"}},
			want:   StateDiff{Updated: []string{"a.b"}},
		},
		{
			name:   "scalar type change is an update",
			before: Tree{"a": int64(5)},
			after:  Tree{"a": "5"},
			want:   StateDiff{Updated: []string{"a"}},
		},
		{
			name:   "added subtree is reported at its top only",
			before: Tree{"desiredState": tmap{"workloads": tmap{}}},
			after:  Tree{"desiredState": tmap{"workloads": tmap{"nginx": tmap{"agent": "A", "tags": tmap{"x": "y"}}}}},
			want:   StateDiff{Added: []string{"desiredState.workloads.nginx"}},
		},
		{
			name:   "removed subtree is reported at its top only",
			before: Tree{"desiredState": tmap{"workloads": tmap{"nginx": tmap{"agent": "A"}, "api": tmap{"agent": "B"}}}},
			after:  Tree{"desiredState": tmap{"workloads": tmap{"api": tmap{"agent": "B"}}}},
			want:   StateDiff{Removed: []string{"desiredState.workloads.nginx"}},
		},
		{
			name:   "sequence from empty to non-empty is added",
			before: Tree{"l": []any{}},
			after:  Tree{"l": []any{"x"}},
			want:   StateDiff{Added: []string{"l"}},
		},
		{
			name:   "sequence from non-empty to empty is removed",
			before: Tree{"l": []any{"x"}},
			after:  Tree{"l": []any{}},
			want:   StateDiff{Removed: []string{"l"}},
		},
		{
			name:   "sequence element changed is an update of the sequence",
			before: Tree{"l": []any{"x", tmap{"k": "v"}}},
			after:  Tree{"l": []any{"x", tmap{"k": "w"}}},
			want:   StateDiff{Updated: []string{"l"}},
		},
		{
			name:   "sequence grown is an update",
			before: Tree{"l": []any{"x"}},
			after:  Tree{"l": []any{"x", "y"}},
			want:   StateDiff{Updated: []string{"l"}},
		},
		{
			name:   "equal sequences",
			before: Tree{"l": []any{"x", tmap{"k": []any{"v"}}}},
			after:  Tree{"l": []any{"x", tmap{"k": []any{"v"}}}},
		},
		{
			name:   "map replaced by a scalar is an update",
			before: Tree{"a": tmap{"b": "c"}},
			after:  Tree{"a": "c"},
			want:   StateDiff{Updated: []string{"a"}},
		},
		{
			name:   "scalar replaced by a map is an update",
			before: Tree{"a": "c"},
			after:  Tree{"a": tmap{"b": "c"}},
			want:   StateDiff{Updated: []string{"a"}},
		},
		{
			name:   "sequence replaced by a map is an update",
			before: Tree{"a": []any{}},
			after:  Tree{"a": tmap{}},
			want:   StateDiff{Updated: []string{"a"}},
		},
		{
			name:   "nil before: every top key added",
			before: nil,
			after:  Tree{"b": "1", "a": tmap{"x": "y"}},
			want:   StateDiff{Added: []string{"a", "b"}},
		},
		{
			name: "all kinds at once, sorted",
			before: Tree{
				"workloadStates": tmap{"agent_A": tmap{"nginx": tmap{"id-1": execTree("Running", "Ok")}}},
				"agents":         tmap{"agent_B": tmap{"tags": tmap{}}, "agent_A": tmap{"tags": tmap{}}},
			},
			after: Tree{
				"workloadStates": tmap{"agent_A": tmap{"nginx": tmap{"id-1": execTree("Failed", "Lost")}, "api": tmap{}}},
				"agents":         tmap{"agent_C": tmap{}, "agent_A": tmap{"tags": tmap{"zone": "a"}}},
			},
			want: StateDiff{
				Added:   []string{"agents.agent_A.tags.zone", "agents.agent_C", "workloadStates.agent_A.api"},
				Updated: []string{"workloadStates.agent_A.nginx.id-1.state", "workloadStates.agent_A.nginx.id-1.subState"},
				Removed: []string{"agents.agent_B"},
			},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := CompareTrees(tt.before, tt.after)
			if !reflect.DeepEqual(normalDiff(got), normalDiff(tt.want)) {
				t.Fatalf("CompareTrees:\n got %+v\nwant %+v", got, tt.want)
			}
			if got.Empty() != (len(tt.want.Added)+len(tt.want.Updated)+len(tt.want.Removed) == 0) {
				t.Fatalf("Empty() = %v for %+v", got.Empty(), got)
			}
			back := CompareTrees(tt.after, tt.before)
			if !reflect.DeepEqual(normalDiff(back), normalDiff(StateDiff{Added: got.Removed, Updated: got.Updated, Removed: got.Added})) {
				t.Fatalf("reverse comparison %+v is not the mirror of %+v", back, got)
			}
		})
	}
}

// swdd~server-calculates-state-differences~1
func TestCompareTreesOfCompleteStates(t *testing.T) {
	before := CompleteState{DesiredState: sampleState(), WorkloadStates: WorkloadStatesMap{}, Agents: AgentMap{}}
	after := before
	after.DesiredState = editWorkload("nginx", func(w *Workload) { w.Agent = "agent_B" })
	after.DesiredState.Workloads["new"] = &Workload{Runtime: "podman"}
	delete(after.DesiredState.Workloads, "api")
	got := CompareTrees(before.ToTree(), after.ToTree())
	want := StateDiff{
		Added:   []string{"desiredState.workloads.new"},
		Updated: []string{"desiredState.workloads.nginx.agent"},
		Removed: []string{"desiredState.workloads.api"},
	}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("got %+v, want %+v", got, want)
	}
}

// normalDiff maps empty lists to nil so that tables can leave them out.
func normalDiff(d StateDiff) StateDiff {
	n := func(s []string) []string {
		if len(s) == 0 {
			return nil
		}
		return s
	}
	return StateDiff{Added: n(d.Added), Updated: n(d.Updated), Removed: n(d.Removed)}
}
