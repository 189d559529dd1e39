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
// the intrusions' tallies kind by kind; skipped attempts and those with
// no refusal owed are said apart and fail nothing, even accepted.
func TestTally(t *testing.T) {
	const why = "revocation waits for cluster version 1"
	var a, b []AttemptTally
	a = Tally(a, "forward", "SnapshotSave", Outcome{})
	a = Tally(a, "forward", "SnapshotSave", Outcome{})
	a = Tally(a, "forward", "revoked", Outcome{Skipped: true})
	a = Tally(a, "forward", "removed at 0", Outcome{NotExpected: why})
	a = Tally(a, "forward", "removed at 0", Outcome{Accepted: true, NotExpected: why})
	b = Tally(b, "forward", "SnapshotSave", Outcome{Accepted: true})
	b = Tally(b, "metrics", "GET", Outcome{})
	got := MergeTallies([]IntruderFinding{{Tally: a}, {Tally: b}})
	want := []AttemptTally{
		{Channel: "forward", What: "SnapshotSave", Tries: 3, Refused: 2, Accepted: 1},
		{Channel: "forward", What: "revoked", Tries: 1, Skipped: 1},
		{Channel: "forward", What: "removed at 0", Tries: 2, NotExpected: 2, NotExpectedRefused: 1, Why: why},
		{Channel: "metrics", What: "GET", Tries: 1, Refused: 1}}
	if len(got) != len(want) {
		t.Fatalf("got %+v", got)
	}
	for i := range want {
		if got[i] != want[i] {
			t.Errorf("tally %d: %+v, want %+v", i, got[i], want[i])
		}
	}
	res := IntruderRefused([]IntruderFinding{{Attempts: 5, Tally: a}})
	if !res.OK || !strings.Contains(res.Detail, "2 attempts, every one refused (1 not tried") ||
		!strings.Contains(res.Detail, "2 more not expected refused ("+why+"), 1 of them refused anyway") {
		t.Errorf("OK %v, detail %q", res.OK, res.Detail)
	}
}
