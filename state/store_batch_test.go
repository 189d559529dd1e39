package state

import (
	"reflect"
	"testing"
)

func mapID[K comparable, V any](m map[K]V) uintptr { return reflect.ValueOf(m).Pointer() }

// Within a batch the updates after the first change the maps the first
// one copied; a reader holding the maps from before the batch keeps its
// view, and after the batch the next update copies again.
func TestBatchCopiesTheDesiredStateOnce(t *testing.T) {
	s := NewStore()
	put := func(name string) *DesiredUpdate {
		w := &Workload{Agent: "agent_A", Runtime: "podman", RuntimeConfig: "image: " + name}
		in := NewInstanceName(name, "agent_A", w.RuntimeConfig)
		return &DesiredUpdate{PutWorkloads: map[string]*Workload{name: w}, PutRendered: map[string]Rendered{name: {Instance: in, Workload: w}}}
	}
	s.ApplyDesired(put("a"), 1)
	before, beforeRendered := s.Desired, s.Rendered

	s.BeginBatch()
	s.ApplyDesired(put("b"), 2)
	first, firstRendered := mapID(s.Desired.Workloads), mapID(s.Rendered)
	s.ApplyDesired(put("c"), 2)
	if mapID(s.Desired.Workloads) != first || mapID(s.Rendered) != firstRendered {
		t.Fatal("the second update of a batch copied the maps again")
	}
	s.EndBatch()

	if first == mapID(before.Workloads) || firstRendered == mapID(beforeRendered) {
		t.Fatal("the first update of a batch changed the maps a reader held")
	}
	if len(before.Workloads) != 1 || len(beforeRendered) != 1 {
		t.Fatalf("a reader's view changed: %d workloads, %d renderings", len(before.Workloads), len(beforeRendered))
	}
	if len(s.Desired.Workloads) != 3 || len(s.Rendered) != 3 || s.DesiredSeq != 3 {
		t.Fatalf("store after the batch: %d workloads, %d renderings, seq %d", len(s.Desired.Workloads), len(s.Rendered), s.DesiredSeq)
	}

	held := s.Desired
	s.ApplyDesired(put("d"), 3)
	if mapID(s.Desired.Workloads) == mapID(held.Workloads) || len(held.Workloads) != 3 {
		t.Fatal("an update after the batch changed the maps in place")
	}
}
