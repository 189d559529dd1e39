package check

import (
	"strings"
	"testing"
)

func TestIntruderRefused(t *testing.T) {
	cases := []struct {
		name string
		in   []IntruderFinding
		ok   bool
	}{
		{"none scheduled", nil, true},
		{"all refused", []IntruderFinding{{Attempts: 20}}, true},
		{"an accepted attempt", []IntruderFinding{{Attempts: 20, Accepted: []string{"r1 raft: AppendEntries over plain TCP"}}}, false},
		{"a trace", []IntruderFinding{{Attempts: 20, Traces: []string{"intruder_srv in r2's Raft configuration"}}}, false},
		{"no attempt at all", []IntruderFinding{{}}, false},
		{"a failed control", []IntruderFinding{{Attempts: 20, Controls: []Control{{What: "metrics on loopback", Detail: "connection refused"}}}}, false},
		{"a control held", []IntruderFinding{{Attempts: 20, Controls: []Control{{What: "metrics on loopback", OK: true}}}}, true},
	}
	for _, c := range cases {
		if got := IntruderRefused(c.in); got.OK != c.ok {
			t.Errorf("%s: OK = %v (%s), want %v", c.name, got.OK, got.Detail, c.ok)
		}
	}
}

// The tally counts each kind once per attempt, by outcome, and merges
// the intrusions' tallies kind by kind; skipped attempts are said apart.
func TestTally(t *testing.T) {
	var a, b []AttemptTally
	a = Tally(a, "forward", "SnapshotSave", false, false)
	a = Tally(a, "forward", "SnapshotSave", false, false)
	a = Tally(a, "forward", "revoked", false, true)
	b = Tally(b, "forward", "SnapshotSave", true, false)
	b = Tally(b, "metrics", "GET", false, false)
	got := MergeTallies([]IntruderFinding{{Tally: a}, {Tally: b}})
	want := []AttemptTally{{"forward", "SnapshotSave", 3, 2, 1, 0}, {"forward", "revoked", 1, 0, 0, 1}, {"metrics", "GET", 1, 1, 0, 0}}
	if len(got) != len(want) {
		t.Fatalf("got %+v", got)
	}
	for i := range want {
		if got[i] != want[i] {
			t.Errorf("tally %d: %+v, want %+v", i, got[i], want[i])
		}
	}
	res := IntruderRefused([]IntruderFinding{{Attempts: 3, Tally: a}})
	if !res.OK || !strings.Contains(res.Detail, "2 attempts, every one refused (1 not tried") {
		t.Errorf("detail %q", res.Detail)
	}
}
