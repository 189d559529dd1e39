package state

import (
	"fmt"
	"testing"
)

func wlDeps(deps map[string]AddCondition) *Workload {
	return &Workload{Runtime: "p", Dependencies: deps}
}

func TestFindCycle(t *testing.T) {
	cases := []struct {
		name string
		// swdd id the case proves
		req   string
		wls   map[string]*Workload
		from  []string
		cycle bool
	}{
		{"no dependencies", "swdd~server-state-rejects-state-with-cyclic-dependencies~1",
			map[string]*Workload{"a": wlDeps(nil), "b": wlDeps(nil)}, nil, false},
		{"chain", "swdd~server-state-rejects-state-with-cyclic-dependencies~1",
			map[string]*Workload{"a": wlDeps(map[string]AddCondition{"b": AddCondRunning}), "b": wlDeps(map[string]AddCondition{"c": AddCondSucceeded}), "c": wlDeps(nil)}, nil, false},
		{"two-cycle", "swdd~server-state-rejects-state-with-cyclic-dependencies~1",
			map[string]*Workload{"a": wlDeps(map[string]AddCondition{"b": AddCondRunning}), "b": wlDeps(map[string]AddCondition{"a": AddCondFailed})}, nil, true},
		{"self loop", "swdd~server-state-rejects-state-with-cyclic-dependencies~1",
			map[string]*Workload{"a": wlDeps(map[string]AddCondition{"a": AddCondRunning})}, nil, true},
		{"edge to absent workload ignored", "swdd~cycle-detection-ignores-non-existing-workloads~1",
			map[string]*Workload{"a": wlDeps(map[string]AddCondition{"ghost": AddCondRunning})}, nil, false},
		{"search from a changed workload finds its cycle", "swdd~server-state-rejects-state-with-cyclic-dependencies~1",
			map[string]*Workload{"a": wlDeps(map[string]AddCondition{"b": AddCondRunning}), "b": wlDeps(map[string]AddCondition{"a": AddCondRunning}), "x": wlDeps(nil)}, []string{"a"}, true},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			got := FindCycle(c.wls, c.from) != ""
			if got != c.cycle {
				t.Fatalf("%s: cycle=%v, want %v", c.req, got, c.cycle)
			}
		})
	}
}

// Two disjoint cycles: the search stops at the first one, in name order,
// and reports a workload of that cycle only.
//
// swdd~cycle-detection-stops-on-the-first-cycle~1
func TestFindCycleStopsAtFirst(t *testing.T) {
	wls := map[string]*Workload{
		"a1": wlDeps(map[string]AddCondition{"a2": AddCondRunning}),
		"a2": wlDeps(map[string]AddCondition{"a1": AddCondRunning}),
		"b1": wlDeps(map[string]AddCondition{"b2": AddCondRunning}),
		"b2": wlDeps(map[string]AddCondition{"b1": AddCondRunning}),
	}
	got := FindCycle(wls, nil)
	if got != "a1" && got != "a2" {
		t.Fatalf("first cycle reported as %q", got)
	}
}

// swdd~server-state-stores-delete-condition~1
// swdd~server-state-adds-delete-conditions-to-deleted-workload~1
// swdd~server-removes-obsolete-delete-graph-entires~1
func TestDeleteGraph(t *testing.T) {
	g := DeleteGraph{}
	g.Insert("w1", wlDeps(map[string]AddCondition{"w2": AddCondRunning}))
	g.Insert("w4", wlDeps(map[string]AddCondition{"w1": AddCondFailed}))
	g.Insert("w3", wlDeps(map[string]AddCondition{"w5": AddCondRunning, "w6": AddCondSucceeded}))
	if len(g) != 2 || g["w2"]["w1"] != DelCondNotPendingNorRunning || g["w5"]["w3"] != DelCondNotPendingNorRunning {
		t.Fatalf("graph %v", g)
	}
	if c := g.ConditionsFor("w2"); len(c) != 1 || c["w1"] != DelCondNotPendingNorRunning {
		t.Fatalf("conditions %v", c)
	}
	if c := g.ConditionsFor("w4"); c != nil {
		t.Fatalf("w4 has conditions %v", c)
	}
	c := g.ConditionsFor("w2")
	c["x"] = DelCondRunning
	if len(g["w2"]) != 1 {
		t.Fatal("ConditionsFor returned the graph's own map")
	}
	g.RemoveWorkload("w3")
	if len(g) != 1 {
		t.Fatalf("w3's entries kept: %v", g)
	}
	g.RemoveWorkload("w2")
	if len(g) != 0 {
		t.Fatalf("graph not empty: %v", g)
	}
}

// Cycles lists every cycle reachable from the given workloads, where
// FindCycle stops at the first; edges to absent workloads are ignored.
//
// swdd~cycle-detection-ignores-non-existing-workloads~1
func TestCyclesListsAll(t *testing.T) {
	w := func(deps ...string) *Workload {
		m := map[string]AddCondition{}
		for _, d := range deps {
			m[d] = AddCondRunning
		}
		return wlDeps(m)
	}
	wls := map[string]*Workload{
		"a": w("b"), "b": w("a"), "c": w("d", "ghost"), "d": w("e"), "e": w("c"), "f": w("f"), "g": w("a"), "h": w("g"),
	}
	tests := []struct {
		from []string
		want [][]string
	}{
		{nil, [][]string{{"a", "b"}, {"c", "d", "e"}, {"f"}}},
		{[]string{"h"}, [][]string{{"a", "b"}}},
		{[]string{"ghost", "g"}, [][]string{{"a", "b"}}},
		{[]string{"f", "c"}, [][]string{{"c", "d", "e"}, {"f"}}},
	}
	for _, tt := range tests {
		if got := Cycles(wls, tt.from); fmt.Sprint(got) != fmt.Sprint(tt.want) {
			t.Errorf("from %v: cycles %v, want %v", tt.from, got, tt.want)
		}
	}
	if got := Cycles(map[string]*Workload{"x": w("y"), "y": w()}, nil); len(got) != 0 {
		t.Errorf("acyclic: %v", got)
	}
}
