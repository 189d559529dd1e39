package state

import (
	"fmt"
	"strings"
	"testing"
)

// Requirement (issue 16, point 4): an update at an expected revision is
// refused, naming both revisions, when what it addresses changed since;
// with masks only the masked objects count; a deletion is a change; an
// expected revision older than the kept tombstones is refused.
func TestCheckExpected(t *testing.T) {
	r := NewRevisions()
	// seq 1: web and db and cfg; seq 2: web changes; seq 3: db deleted.
	r.record(&DesiredUpdate{PutWorkloads: map[string]*Workload{"web": {}, "db": {}}, PutConfigs: map[string]any{"cfg": "1"}}, 1)
	r.record(&DesiredUpdate{PutWorkloads: map[string]*Workload{"web": {}}}, 2)
	r.record(&DesiredUpdate{DeleteWorkloads: []string{"db"}}, 3)
	for _, tc := range []struct {
		name     string
		expected uint64
		masks    []string
		want     string // "" accepts
	}{
		{"current revision", 3, nil, ""},
		{"whole state changed since", 1, nil, "workload/db was deleted at revision 3"},
		{"mask on an unchanged config", 1, []string{"desiredState.configs.cfg"}, ""},
		{"mask on a changed workload", 1, []string{"desiredState.workloads.web.agent"}, "workload/web changed at revision 2"},
		{"mask on a deleted workload", 2, []string{"desiredState.workloads.db"}, "workload/db was deleted at revision 3"},
		{"change outside the mask", 2, []string{"desiredState.workloads.web", "desiredState.configs"}, ""},
		{"all workloads", 2, []string{"desiredState.workloads"}, "workload/db"},
		{"agent tags address no object", 0, []string{"agents.agent_A.tags"}, ""},
		{"future revision", 4, nil, "expected revision 4, but the desired state is at revision 3"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := r.CheckExpected(tc.expected, 3, ScopeOfMasks(tc.masks))
			switch {
			case tc.want == "" && err != nil:
				t.Fatalf("refused: %v", err)
			case tc.want != "" && (err == nil || !strings.Contains(err.Error(), tc.want)):
				t.Fatalf("got %v, want it to say %q", err, tc.want)
			case err != nil && tc.expected <= 3 && !strings.Contains(err.Error(), fmt.Sprintf("expected revision %d, the desired state is at revision 3", tc.expected)):
				t.Fatalf("%v does not name both revisions", err)
			}
		})
	}
}

// Requirement (issue 16, point 4): tombstones are bounded; past the bound
// an expected revision older than the oldest kept is refused for what
// might have been deleted, and still checked exactly for what was not.
func TestTombstonesBounded(t *testing.T) {
	r := NewRevisions()
	r.record(&DesiredUpdate{PutWorkloads: map[string]*Workload{"keep": {}}}, 1)
	seq := uint64(1)
	for i := range MaxTombstones + 1 {
		seq++
		r.record(&DesiredUpdate{PutWorkloads: map[string]*Workload{fmt.Sprint("w", i): {}}}, seq)
		seq++
		r.record(&DesiredUpdate{DeleteWorkloads: []string{fmt.Sprint("w", i)}}, seq)
	}
	if len(r.Tombstones) > MaxTombstones || r.Floor == 0 {
		t.Fatalf("%d tombstones, floor %d", len(r.Tombstones), r.Floor)
	}
	err := r.CheckExpected(1, seq, ScopeOfMasks([]string{"desiredState.workloads.w0"}))
	if err == nil || !strings.Contains(err.Error(), "no longer recorded") {
		t.Fatalf("a pruned tombstone: %v", err)
	}
	if err := r.CheckExpected(1, seq, ScopeOfMasks([]string{"desiredState.workloads.keep"})); err != nil {
		t.Fatalf("an object with its revision kept: %v", err)
	}
}

// BenchmarkCheckExpected10k is the check of an update of one workload at
// an older revision among 10,000 workloads (the scan of every revision).
func BenchmarkCheckExpected10k(b *testing.B) {
	r := NewRevisions()
	u := &DesiredUpdate{PutWorkloads: map[string]*Workload{}}
	for i := range 10_000 {
		u.PutWorkloads[fmt.Sprint("w", i)] = &Workload{}
	}
	r.record(u, 1)
	scope := ScopeOfMasks([]string{"desiredState.workloads.w5"})
	b.ResetTimer()
	for range b.N {
		if err := r.CheckExpected(1, 2, scope); err != nil {
			b.Fatal(err)
		}
	}
}
