package events

import (
	"reflect"
	"slices"
	"testing"

	"github.com/grapnel-io/grapnel/state"
)

// newState is the CompleteState tree after a change: workload_1 owned by
// "me" on agent_A, workload_2 without tags on agent_B.
func newState() state.Tree {
	return state.Tree{
		"desiredState": map[string]any{
			"apiVersion": "v1",
			"workloads": map[string]any{
				"workload_1": map[string]any{"agent": "agent_A", "runtime": "podman", "tags": map[string]any{"owner": "me"}},
				"workload_2": map[string]any{"agent": "agent_B", "runtime": "podman", "tags": map[string]any{}},
			},
			"configs": map[string]any{},
		},
		"workloadStates": map[string]any{
			"agent_A": map[string]any{
				"workload_1": map[string]any{
					"id1": map[string]any{"state": "Running", "subState": "Ok", "additionalInfo": ""},
				},
			},
		},
		"agents": map[string]any{
			"agent_A": map[string]any{"status": map[string]any{"cpuUsage": int64(5)}, "tags": map[string]any{}},
		},
	}
}

// want is the expected event of one subscriber; the filter masks are the
// added and updated fields, which State must be filtered by.
type want struct {
	id                      string
	added, updated, removed []string
}

// swdd~event-handler-sends-complete-state-differences-including-altered-fields~1
// swdd~event-handler-creates-altered-fields-and-filter-masks~1
// swdd~event-handler-expands-subscriber-field-mask-using-altered-field-masks~1
func TestEvents(t *testing.T) {
	tests := []struct {
		name        string
		subscribers map[string][]string
		diff        state.StateDiff
		want        []want
	}{
		{
			name:        "requirement example: shorter subscriber mask",
			subscribers: map[string][]string{"cli-conn-1@1": {"desiredState.workloads.*"}},
			diff:        state.StateDiff{Updated: []string{"desiredState.workloads.workload_1.agent"}},
			want:        []want{{id: "cli-conn-1@1", updated: []string{"desiredState.workloads.workload_1.agent"}}},
		},
		{
			name:        "requirement example: shorter altered field",
			subscribers: map[string][]string{"cli-conn-1@1": {"desiredState.workloads.*.agent"}},
			diff:        state.StateDiff{Added: []string{"desiredState.workloads.workload_1"}},
			want:        []want{{id: "cli-conn-1@1", added: []string{"desiredState.workloads.workload_1.agent"}}},
		},
		{
			name:        "equal length",
			subscribers: map[string][]string{"cli-conn-1@1": {"agents.*"}},
			diff:        state.StateDiff{Added: []string{"agents.agent_A"}},
			want:        []want{{id: "cli-conn-1@1", added: []string{"agents.agent_A"}}},
		},
		{
			name:        "wildcards beyond the altered field expand against the new state",
			subscribers: map[string][]string{"cli-conn-1@1": {"workloadStates.*.*.*.state"}},
			diff:        state.StateDiff{Updated: []string{"workloadStates.agent_A.workload_1"}},
			want:        []want{{id: "cli-conn-1@1", updated: []string{"workloadStates.agent_A.workload_1.id1.state"}}},
		},
		{
			name:        "wildcards beyond an added workload name its existing fields",
			subscribers: map[string][]string{"cli-conn-1@1": {"desiredState.workloads.*.tags.*"}},
			diff:        state.StateDiff{Added: []string{"desiredState.workloads.workload_1", "desiredState.workloads.workload_2"}},
			want:        []want{{id: "cli-conn-1@1", added: []string{"desiredState.workloads.workload_1.tags.owner"}}},
		},
		{
			name:        "expanded field missing in the new state gives no event",
			subscribers: map[string][]string{"cli-conn-1@1": {"desiredState.workloads.*.tags.owner"}},
			diff:        state.StateDiff{Added: []string{"desiredState.workloads.workload_2"}},
		},
		{
			name:        "removed field expands the subscriber mask without the new state",
			subscribers: map[string][]string{"cli-conn-1@1": {"desiredState.workloads.*.agent"}},
			diff:        state.StateDiff{Removed: []string{"desiredState.workloads.workload_9"}},
			want:        []want{{id: "cli-conn-1@1", removed: []string{"desiredState.workloads.workload_9.agent"}}},
		},
		{
			name:        "removed field keeps wildcards it cannot expand",
			subscribers: map[string][]string{"cli-conn-1@1": {"desiredState.workloads.*.tags.*"}},
			diff:        state.StateDiff{Removed: []string{"desiredState.workloads.workload_9"}},
			want:        []want{{id: "cli-conn-1@1", removed: []string{"desiredState.workloads.workload_9.tags.*"}}},
		},
		{
			name:        "removed field below the subscriber mask",
			subscribers: map[string][]string{"agent_A@wl@1": {"agents"}},
			diff:        state.StateDiff{Removed: []string{"agents.agent_B"}},
			want:        []want{{id: "agent_A@wl@1", removed: []string{"agents.agent_B"}}},
		},
		{
			name:        "non-matching masks give no event",
			subscribers: map[string][]string{"cli-conn-1@1": {"agents", "desiredState.workloads.workload_2"}},
			diff: state.StateDiff{
				Added:   []string{"desiredState.workloads.workload_1"},
				Updated: []string{"workloadStates.agent_A.workload_1.id1"},
				Removed: []string{"desiredState.configs.c1"},
			},
		},
		{
			name: "several masks of one subscriber",
			subscribers: map[string][]string{"cli-conn-1@1": {
				"desiredState.workloads.workload_1",
				"workloadStates.*.*.*.state",
				"agents.*",
			}},
			diff: state.StateDiff{
				Added:   []string{"agents.agent_A"},
				Updated: []string{"desiredState.workloads.workload_1.agent", "desiredState.workloads.workload_2.agent", "workloadStates.agent_A.workload_1.id1"},
				Removed: []string{"agents.agent_B"},
			},
			want: []want{{
				id:      "cli-conn-1@1",
				added:   []string{"agents.agent_A"},
				updated: []string{"desiredState.workloads.workload_1.agent", "workloadStates.agent_A.workload_1.id1.state"},
				removed: []string{"agents.agent_B"},
			}},
		},
		{
			name:        "overlapping masks yield one altered field",
			subscribers: map[string][]string{"cli-conn-1@1": {"desiredState", "desiredState.workloads.*", "desiredState.workloads.workload_1.agent"}},
			diff:        state.StateDiff{Updated: []string{"desiredState.workloads.workload_1.agent"}},
			want:        []want{{id: "cli-conn-1@1", updated: []string{"desiredState.workloads.workload_1.agent"}}},
		},
		{
			name:        "no masks subscribe to everything",
			subscribers: map[string][]string{"cli-conn-1@1": nil},
			diff: state.StateDiff{
				Added:   []string{"agents.agent_A", "desiredState.workloads.workload_1"},
				Updated: []string{"workloadStates.agent_A.workload_1.id1"},
				Removed: []string{"agents.agent_B"},
			},
			want: []want{{
				id:      "cli-conn-1@1",
				added:   []string{"agents.agent_A", "desiredState.workloads.workload_1"},
				updated: []string{"workloadStates.agent_A.workload_1.id1"},
				removed: []string{"agents.agent_B"},
			}},
		},
		{
			name: "several subscribers, sorted, only matching ones",
			subscribers: map[string][]string{
				"cli-conn-2@7":  {"desiredState.workloads.*.agent"},
				"agent_B@wl@3":  {"agents"},
				"agent_A@wl@1":  {"desiredState.workloads.workload_2"},
				"cli-conn-1@99": {"workloadStates"},
			},
			diff: state.StateDiff{Updated: []string{"desiredState.workloads.workload_1.agent", "desiredState.workloads.workload_2.agent"}},
			want: []want{
				{id: "agent_A@wl@1", updated: []string{"desiredState.workloads.workload_2.agent"}},
				{id: "cli-conn-2@7", updated: []string{"desiredState.workloads.workload_1.agent", "desiredState.workloads.workload_2.agent"}},
			},
		},
		{
			name:        "empty diff",
			subscribers: map[string][]string{"cli-conn-1@1": nil},
		},
		{
			name: "no subscribers",
			diff: state.StateDiff{Added: []string{"agents.agent_A"}},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			h := NewHandler()
			for id, masks := range tt.subscribers {
				h.Add(id, masks)
			}
			ns := newState()
			got := h.Events(tt.diff, ns)
			if len(got) != len(tt.want) {
				t.Fatalf("got %d events %+v, want %d", len(got), got, len(tt.want))
			}
			for i, w := range tt.want {
				e := got[i]
				if e.RequestID != w.id {
					t.Errorf("event %d RequestID = %q, want %q", i, e.RequestID, w.id)
				}
				check := func(field string, got, want []string) {
					if !slices.Equal(got, want) {
						t.Errorf("%s: %s = %v, want %v", w.id, field, got, want)
					}
				}
				check("Added", e.Added, w.added)
				check("Updated", e.Updated, w.updated)
				check("Removed", e.Removed, w.removed)
				filter := append(slices.Clone(w.added), w.updated...)
				wantState := state.Tree{}
				if len(filter) > 0 {
					wantState = state.FilterTree(newState(), filter)
				}
				if !reflect.DeepEqual(e.State, wantState) {
					t.Errorf("%s: State = %v, want %v", w.id, e.State, wantState)
				}
			}
			if !reflect.DeepEqual(ns, newState()) {
				t.Errorf("Events changed the new state")
			}
		})
	}
}

// The event state carries the changed field and nothing the subscriber did
// not ask for.
// swdd~event-handler-sends-complete-state-differences-including-altered-fields~1
func TestEventStateHoldsOnlyDifferences(t *testing.T) {
	h := NewHandler()
	h.Add("cli-conn-1@1", []string{"desiredState.workloads.*.agent"})
	events := h.Events(state.StateDiff{Added: []string{"desiredState.workloads.workload_1"}}, newState())
	if len(events) != 1 {
		t.Fatalf("got %d events, want 1", len(events))
	}
	st := events[0].State
	if v, ok := state.GetPath(st, state.SplitMask("desiredState.workloads.workload_1.agent")); !ok || v != "agent_A" {
		t.Errorf("State lacks workload_1.agent: got %v, %v", v, ok)
	}
	for _, absent := range []string{
		"desiredState.workloads.workload_1.runtime",
		"desiredState.workloads.workload_2",
		"workloadStates",
		"agents",
	} {
		if _, ok := state.GetPath(st, state.SplitMask(absent)); ok {
			t.Errorf("State holds %s, which was not altered", absent)
		}
	}
}

// A subscriber told only about removed fields gets an empty state, not the
// whole CompleteState that an empty filter would select.
// swdd~event-handler-sends-complete-state-differences-including-altered-fields~1
func TestRemovedOnlyEventHasEmptyState(t *testing.T) {
	h := NewHandler()
	h.Add("cli-conn-1@1", nil)
	events := h.Events(state.StateDiff{Removed: []string{"agents.agent_B"}}, newState())
	if len(events) != 1 {
		t.Fatalf("got %d events, want 1", len(events))
	}
	if len(events[0].State) != 0 {
		t.Errorf("State = %v, want empty", events[0].State)
	}
}
