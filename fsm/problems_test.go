package fsm

import (
	"bytes"
	"reflect"
	"testing"

	"github.com/hashicorp/raft"

	"github.com/grapnel-io/grapnel/state"
)

// problemsGolden opens two problems and closes one that is not open.
func problemsGolden() *ProblemsChangedRequest {
	return &ProblemsChangedRequest{TimeMs: 1_700_000_000_300, Closed: []uint64{99}, Opened: []state.Problem{
		{Kind: "MissingDependency", Key: "MissingDependency/app/db", Summary: "app depends on db", Detail: "add db",
			Objects: []state.ProblemObject{{Kind: "workload", Name: "app"}, {Kind: "workload", Name: "db"}}},
		{Kind: "AgentGone", Key: "AgentGone/agent_B", Summary: "agent_B is gone"},
	}}
}

// Requirement (issue 16, point 3): a problem gets a stable id and the
// leader's time from the replicated entry that opens it, the same on
// every replica and after a snapshot; a closed problem that recurs gets a
// new id; an entry that changes nothing answers nothing.
func TestProblemsChangedNumbersAndDates(t *testing.T) {
	f, g := New(), New()
	for _, fs := range []*FSM{f, g} {
		applyResp(t, fs, problemsGolden())
	}
	st := read(f)
	if len(st.Problems.Open) != 2 || st.Problems.LastID != 2 {
		t.Fatalf("open %v, last id %d; want 2 problems numbered 1 and 2", st.Problems.Open, st.Problems.LastID)
	}
	dep := st.Problems.Open["MissingDependency/app/db"]
	if dep.ID != 1 || dep.SinceMs != 1_700_000_000_300 || len(dep.Objects) != 2 {
		t.Fatalf("problem %+v: want id 1 since the entry's time with its objects", dep)
	}
	if !reflect.DeepEqual(read(f).Problems, read(g).Problems) {
		t.Fatal("two replicas applying the same entries number the problems differently")
	}
	// Opened again while open: nothing; closed: gone; recurring: id 3.
	resp := f.Apply(&raft.Log{Index: 9, Type: raft.LogCommand, Data: mustEncode(t, &ProblemsChangedRequest{TimeMs: 5,
		Opened: []state.Problem{{Kind: "AgentGone", Key: "AgentGone/agent_B"}}})})
	if resp != nil {
		t.Fatalf("opening an open problem answered %#v", resp)
	}
	resp = f.Apply(&raft.Log{Index: 10, Type: raft.LogCommand, Data: mustEncode(t, &ProblemsChangedRequest{TimeMs: 6, Closed: []uint64{1}})})
	if r, ok := resp.(*ProblemsChangedResponse); !ok || len(r.Closed) != 1 || r.Closed[0].Key != "MissingDependency/app/db" {
		t.Fatalf("closing answered %#v", resp)
	}
	resp = f.Apply(&raft.Log{Index: 11, Type: raft.LogCommand, Data: mustEncode(t, &ProblemsChangedRequest{TimeMs: 7,
		Opened: []state.Problem{{Kind: "MissingDependency", Key: "MissingDependency/app/db"}}})})
	r, ok := resp.(*ProblemsChangedResponse)
	if !ok || len(r.Opened) != 1 || r.Opened[0].ID != 3 || r.Opened[0].SinceMs != 7 {
		t.Fatalf("the recurrence answered %#v; want id 3 since 7", resp)
	}
	var buf bytes.Buffer
	if err := WriteSnapshot(&buf, read(f), 11); err != nil {
		t.Fatal(err)
	}
	back, _, err := ReadSnapshot(&buf)
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(back.Problems, read(f).Problems) {
		t.Fatalf("after a snapshot: %+v, want %+v", back.Problems, read(f).Problems)
	}
	if p, _ := back.Problems.OpenProblem(state.Problem{Key: "new"}); p.ID != 4 {
		t.Fatalf("a problem opened after a restore has id %d, want 4", p.ID)
	}
}

// The golden entry is part of the log format: it must decode to the same
// command in every later version.
func TestProblemsGoldenEntry(t *testing.T) {
	c := problemsGolden()
	buf := goldenEntry(t, "entry-ProblemsChanged.golden", mustEncode(t, c))
	typ, got, err := Decode(buf)
	if err != nil || typ != ProblemsChangedType {
		t.Fatalf("decodes as %s: %v", typ, err)
	}
	if !reflect.DeepEqual(got, c) {
		t.Fatalf("decodes to\n%+v\nwant\n%+v", got, c)
	}
}

// A replica that does not know the type skips it: it carries
// IgnoreUnknownTypeFlag, and the transport admits it.
func TestProblemsChangedIsSkippable(t *testing.T) {
	if ProblemsChangedType&IgnoreUnknownTypeFlag == 0 {
		t.Fatal("ProblemsChanged must be skippable by older replicas")
	}
	if err := CheckType(mustEncode(t, problemsGolden())); err != nil {
		t.Fatalf("CheckType refuses ProblemsChanged: %v", err)
	}
}

// problemsUpdateGolden rewrites an open problem (cluster version 2).
func problemsUpdateGolden() *ProblemsChangedRequest {
	return &ProblemsChangedRequest{TimeMs: 1_700_000_000_900, Updated: []state.Problem{
		{Kind: "AgentGone", Key: "AgentGone/agent_B", Summary: "agent_B is gone; 2 workloads are not observed",
			Objects: []state.ProblemObject{{Kind: "agent", Name: "agent_B"}, {Kind: "workload", Name: "a"}, {Kind: "workload", Name: "b"}}},
	}}
}

// Requirement (issue 30 point 6, MAMID's LastUpdated): an update of an
// open problem rewrites its objects and descriptions and dates them, the
// same on every replica and after a snapshot; below cluster version 2,
// where a replica of the previous release would not apply it, it changes
// nothing; one that says what the problem says already changes nothing.
func TestProblemsChangedUpdatesFromClusterVersion2(t *testing.T) {
	old, now := New(), New()
	for _, f := range []*FSM{old, now} {
		applyResp(t, f, problemsGolden())
	}
	if resp := applyResp(t, old, problemsUpdateGolden()); resp != nil {
		t.Fatalf("at cluster version 0 an update answered %#v", resp)
	}
	if p := read(old).Problems.Open["AgentGone/agent_B"]; p.UpdatedMs != 0 || p.Summary != "agent_B is gone" || p.LastUpdatedMs() != p.SinceMs {
		t.Fatalf("at cluster version 0 the problem changed: %+v", p)
	}
	applyResp(t, now, &SetClusterVersionRequest{Version: state.ClusterVersionProblemUpdates})
	before := read(now).Problems.Open["AgentGone/agent_B"]
	r, ok := applyResp(t, now, problemsUpdateGolden()).(*ProblemsChangedResponse)
	if !ok || len(r.Updated) != 1 || r.Updated[0].ID != before.ID {
		t.Fatalf("the update answered %#v", r)
	}
	p := read(now).Problems.Open["AgentGone/agent_B"]
	if p.ID != before.ID || p.SinceMs != before.SinceMs || p.UpdatedMs != 1_700_000_000_900 || p.LastUpdatedMs() != 1_700_000_000_900 ||
		len(p.Objects) != 3 || p.Summary != "agent_B is gone; 2 workloads are not observed" {
		t.Fatalf("updated problem %+v", p)
	}
	if before.Summary != "agent_B is gone" {
		t.Fatal("the update changed the record a clone shares")
	}
	if resp := applyResp(t, now, problemsUpdateGolden()); resp != nil {
		t.Fatalf("the same update again answered %#v", resp)
	}
	var buf bytes.Buffer
	if err := WriteSnapshot(&buf, read(now), 100); err != nil {
		t.Fatal(err)
	}
	back, _, err := ReadSnapshot(&buf)
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(back.Problems, read(now).Problems) {
		t.Fatalf("after a snapshot: %+v, want %+v", back.Problems, read(now).Problems)
	}
}

// The golden entry with updated problems is part of the log format.
func TestProblemsUpdateGoldenEntry(t *testing.T) {
	c := problemsUpdateGolden()
	buf := goldenEntry(t, "entry-ProblemsChanged-updated.golden", mustEncode(t, c))
	typ, got, err := Decode(buf)
	if err != nil || typ != ProblemsChangedType || !reflect.DeepEqual(got, c) {
		t.Fatalf("decodes as %s %+v, %v; want %+v", typ, got, err, c)
	}
}
