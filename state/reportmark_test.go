package state

import "testing"

func TestReportMarkStaleAfter(t *testing.T) {
	m := func(inc, gen uint64) ReportMark { return ReportMark{Incarnation: inc, Generation: gen} }
	cases := []struct {
		name      string
		m, last   ReportMark
		wantStale bool
	}{
		{"first report", m(1, 1), m(0, 0), false},
		{"unmarked after marked", m(0, 0), m(3, 3), false},
		{"next generation", m(1, 2), m(1, 1), false},
		{"same generation", m(1, 1), m(1, 1), true},
		{"older generation", m(1, 1), m(1, 2), true},
		{"new incarnation restarts generations", m(2, 1), m(1, 9), false},
		{"old incarnation", m(1, 9), m(2, 1), true},
		{"no generation, same incarnation", m(2, 0), m(2, 7), false},
		{"no generation, old incarnation", m(1, 0), m(2, 7), true},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			if got := c.m.StaleAfter(c.last); got != c.wantStale {
				t.Fatalf("%v after %v: stale %v, want %v", c.m, c.last, got, c.wantStale)
			}
		})
	}
	if got := m(2, 0).Max(m(2, 7)); got != m(2, 7) {
		t.Fatalf("Max lowered the generation: %v", got)
	}
}

// swdd~server-stores-workload-state~1
func TestApplyReportKeepsNewestMark(t *testing.T) {
	s := NewStore()
	in := NewInstanceName("w", "a", "x")
	if !s.ApplyReport("a", ReportMark{Incarnation: 1, Generation: 2}, []WorkloadState{{Instance: in, State: RunningOk}}) {
		t.Fatal("first report dropped")
	}
	if s.ApplyReport("a", ReportMark{Incarnation: 1, Generation: 1}, []WorkloadState{{Instance: in, State: Removed}}) {
		t.Fatal("stale report applied")
	}
	if got, _ := s.States.Get(in); got != RunningOk {
		t.Fatalf("state %v", got)
	}
	c := s.Clone()
	s.ReportMarks["a"] = ReportMark{}
	if c.ReportMarks["a"] != (ReportMark{Incarnation: 1, Generation: 2}) {
		t.Fatal("Clone shares the marks")
	}
}

// ApplyDesiredUpdate leaves the maps it was given alone: readers holding
// the old desired state and renderings keep a consistent view.
func TestApplyDesiredUpdateIsCopyOnWrite(t *testing.T) {
	s := NewStore()
	w := &Workload{Agent: "a", Runtime: "p", RuntimeConfig: "x"}
	in := NewInstanceName("w", "a", "x")
	s.ApplyDesired(&DesiredUpdate{PutWorkloads: map[string]*Workload{"w": w}, PutRendered: map[string]Rendered{"w": {Instance: in, Workload: w}}}, 7)
	oldD, oldR := s.Desired, s.Rendered
	d, r := ApplyDesiredUpdate(oldD, oldR, &DesiredUpdate{DeleteWorkloads: []string{"w"}, DeleteRendered: []string{"w"}, PutConfigs: map[string]any{"k": "v"}})
	if len(d.Workloads) != 0 || len(r) != 0 || d.Configs["k"] != "v" {
		t.Fatalf("result %v %v", d, r)
	}
	if oldD.Workloads["w"] != w || oldR["w"].Instance != in || len(oldD.Configs) != 0 {
		t.Fatal("the input maps changed")
	}
	if s.DesiredSeq != 1 || s.Revision != 7 {
		t.Fatalf("seq %d revision %d", s.DesiredSeq, s.Revision)
	}
	if _, r := ApplyDesiredUpdate(State{}, nil, &DesiredUpdate{PutRendered: map[string]Rendered{"w": {Instance: in, Workload: w}}}); len(r) != 1 {
		t.Fatal("nil renderings not handled")
	}
}
