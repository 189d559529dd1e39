package events

import (
	"slices"
	"testing"

	"github.com/grapnel-io/grapnel/state"
)

// Problem events reach only the subscribers that ask for problems by
// name: an Ankaios client subscribed to everything (no mask) or to its
// workloads gets no path its CompleteState lacks.
func TestExplicitEventsOnlyForNamedRoot(t *testing.T) {
	h := NewHandler()
	h.Add("cli@all", nil)
	h.Add("cli@wild", []string{"*"})
	h.Add("cli@wl", []string{"desiredState.workloads"})
	h.Add("cli@problems", []string{"problems", "desiredState"})
	h.Add("cli@one", []string{"problems.7"})
	evs := h.ExplicitEvents("problems", state.StateDiff{Added: []string{"problems.8"}, Removed: []string{"problems.7"}}, state.Tree{})
	var ids []string
	for _, ev := range evs {
		ids = append(ids, ev.RequestID)
	}
	if !slices.Equal(ids, []string{"cli@one", "cli@problems"}) {
		t.Fatalf("events for %v, want cli@one and cli@problems", ids)
	}
	if got := evs[1]; !slices.Equal(got.Added, []string{"problems.8"}) || !slices.Equal(got.Removed, []string{"problems.7"}) {
		t.Fatalf("event %+v: want problems.8 added and problems.7 removed", got)
	}
	if got := evs[0]; len(got.Added) != 0 || !slices.Equal(got.Removed, []string{"problems.7"}) {
		t.Fatalf("a subscriber of problem 7 got %+v", got)
	}
}
