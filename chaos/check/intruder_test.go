package check

import "testing"

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
	}
	for _, c := range cases {
		if got := IntruderRefused(c.in); got.OK != c.ok {
			t.Errorf("%s: OK = %v (%s), want %v", c.name, got.OK, got.Detail, c.ok)
		}
	}
}
