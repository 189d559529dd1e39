package cli

import (
	"bytes"
	"maps"
	"slices"
	"strings"
	"testing"

	"github.com/grapnel-io/grapnel/graph"
	"github.com/grapnel-io/grapnel/rpc/grapnelpb"
	"github.com/grapnel-io/grapnel/state"
)

// Requirement (issue 30 point 7): get graph --txn N draws the desired
// state right after transaction N, rewound from the current one through
// the history (an added workload taken out, a changed dependency put
// back, a deleted workload restored as its updates made it), with the
// workloads N changed marked: bold in DOT, "changed" in JSON.
func TestGraphAtTxn(t *testing.T) {
	runs := `{"db":"ADD_COND_RUNNING"}`
	txs := []*grapnelpb.Transaction{
		{Seq: 1, Kind: "Update", Workloads: []*grapnelpb.TxWorkload{
			{Name: "db", Op: "Added", Instance: "db.aaa.a1", Changes: []*grapnelpb.TxFieldChange{{Field: "agent", New: "a1"}, {Field: "runtime", New: "process"}}},
			{Name: "web", Op: "Added", Instance: "web.bbb.a1", Changes: []*grapnelpb.TxFieldChange{{Field: "agent", New: "a1"}, {Field: "dependencies", New: runs}}},
		}},
		{Seq: 2, Kind: "Update", Workloads: []*grapnelpb.TxWorkload{
			{Name: "cache", Op: "Added", Instance: "cache.ccc.a2", Changes: []*grapnelpb.TxFieldChange{{Field: "agent", New: "a2"}}},
			{Name: "web", Op: "Updated", OldInstance: "web.bbb.a1", Instance: "web.ddd.a2", Changes: []*grapnelpb.TxFieldChange{
				{Field: "agent", Old: "a1", New: "a2"}, {Field: "dependencies", Old: runs, New: `{"cache":"ADD_COND_RUNNING"}`}}},
		}},
		{Seq: 3, Kind: "Update", Workloads: []*grapnelpb.TxWorkload{{Name: "db", Op: "Deleted", OldInstance: "db.aaa.a1"}}},
		{Seq: 4, Kind: "Placement", Workloads: []*grapnelpb.TxWorkload{{Name: "web", Op: "Added"}}},
	}
	cur := graph.Input{Workloads: map[string]*state.Workload{
		"web":   {Agent: "a2", Dependencies: map[string]state.AddCondition{"cache": "ADD_COND_RUNNING"}},
		"cache": {Agent: "a2"},
	}, Agents: map[string]string{"web": "a2", "cache": "a2"}}

	in, changed, notes, err := GraphAtTxn(cur, txs, 1)
	if err != nil || len(notes) > 0 {
		t.Fatal(err, notes)
	}
	if got := slices.Sorted(maps.Keys(in.Workloads)); !slices.Equal(got, []string{"db", "web"}) {
		t.Fatalf("workloads at txn 1: %v", got)
	}
	if in.Workloads["web"].Dependencies["db"] != "ADD_COND_RUNNING" || len(in.Workloads["web"].Dependencies) != 1 ||
		in.Agents["web"] != "a1" || in.Workloads["db"].Agent != "a1" || in.Workloads["db"].Runtime != "process" {
		t.Fatalf("at txn 1: web %+v db %+v agents %v", in.Workloads["web"], in.Workloads["db"], in.Agents)
	}
	if !slices.Equal(changed, []string{"db", "web"}) {
		t.Fatalf("changed at txn 1: %v", changed)
	}
	g := graph.Build(in)
	MarkChanged(g, changed)
	var dot, js bytes.Buffer
	if err := graph.WriteDOT(&dot, g); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(dot.String(), `"web" -> "db"`) || !strings.Contains(dot.String(), "bold") {
		t.Fatalf("DOT at txn 1:\n%s", dot.String())
	}

	in, changed, _, err = GraphAtTxn(cur, txs, 2)
	if err != nil {
		t.Fatal(err)
	}
	if got := slices.Sorted(maps.Keys(in.Workloads)); !slices.Equal(got, []string{"cache", "db", "web"}) || !slices.Equal(changed, []string{"cache", "web"}) {
		t.Fatalf("at txn 2: %v, changed %v", got, changed)
	}
	g = graph.Build(in)
	MarkChanged(g, changed)
	if err := graph.WriteJSON(&js, g); err != nil {
		t.Fatal(err)
	}
	if strings.Count(js.String(), `"changed": true`)+strings.Count(js.String(), `"changed":true`) != 2 {
		t.Fatalf("JSON at txn 2 marks other than cache and web:\n%s", js.String())
	}

	in, changed, _, err = GraphAtTxn(cur, txs, 4)
	if err != nil || len(in.Workloads) != 2 || !slices.Equal(changed, []string{"web"}) {
		t.Fatalf("at the newest txn: %v %v %v", in.Workloads, changed, err)
	}
	if _, _, _, err := GraphAtTxn(cur, txs, 9); err == nil || !strings.Contains(err.Error(), "--txn 9") {
		t.Fatalf("an unknown txn: %v", err)
	}
	if _, _, _, err := GraphAtTxn(cur, txs[1:], 1); err == nil || !strings.Contains(err.Error(), "pruned") {
		t.Fatalf("a pruned txn: %v", err)
	}
	// A deleted workload whose addition was pruned is drawn, with a note.
	_, _, notes, err = GraphAtTxn(cur, txs[1:], 2)
	if err != nil || len(notes) != 1 || !strings.Contains(notes[0], "workload db") {
		t.Fatalf("notes %v, %v", notes, err)
	}
}
