package fsm

import (
	"bytes"
	"reflect"
	"testing"

	"github.com/hashicorp/raft"

	"github.com/grapnel-io/grapnel/state"
)

var index uint64

func apply(t *testing.T, f *FSM, typ MessageType, body any) {
	t.Helper()
	buf, err := Encode(typ, body)
	if err != nil {
		t.Fatal(err)
	}
	index++
	if resp := f.Apply(&raft.Log{Index: index, Type: raft.LogCommand, Data: buf}); resp != nil {
		t.Fatalf("apply %s: %v", typ, resp)
	}
}

func read(f *FSM) *state.Store {
	var c *state.Store
	f.Read(func(s *state.Store, _ uint64) { c = s.Clone() })
	return c
}

var inst = state.NewInstanceName("web", "agent_A", "image: nginx")

func webUpdate() UpdateDesiredStateRequest {
	w := &state.Workload{Agent: "agent_A", Runtime: "podman", RuntimeConfig: "image: nginx", RestartPolicy: state.RestartAlways,
		Dependencies: map[string]state.AddCondition{"db": state.AddCondRunning}, Tags: map[string]string{"a": "b"}}
	return UpdateDesiredStateRequest{Update: state.DesiredUpdate{
		APIVersion:   state.APIVersion,
		PutWorkloads: map[string]*state.Workload{"web": w},
		PutConfigs:   map[string]any{"cfg": map[string]any{"k": "v", "l": []any{"x"}}},
		PutRendered:  map[string]state.Rendered{"web": {Instance: inst, Workload: w}},
		SetStates:    []state.WorkloadState{{Instance: inst, State: state.PendingInitial}},
	}}
}

func TestFSM_UpdateDesiredState(t *testing.T) {
	f := New()
	apply(t, f, UpdateDesiredStateType, webUpdate())
	s := read(f)
	if s.Desired.Workloads["web"] == nil || s.Rendered["web"].Instance != inst || s.Revision != index {
		t.Fatalf("store %+v", s)
	}
	if got, _ := s.States.Get(inst); got != state.PendingInitial {
		t.Fatalf("initial state %v", got)
	}
	if s.DeleteGraph["db"]["web"] != state.DelCondNotPendingNorRunning {
		t.Fatalf("delete graph %v", s.DeleteGraph)
	}
	apply(t, f, UpdateDesiredStateType, UpdateDesiredStateRequest{Update: state.DesiredUpdate{
		DeleteWorkloads: []string{"web"}, DeleteRendered: []string{"web"}, DeleteConfigs: []string{"cfg"}, DeleteStates: []state.InstanceName{inst}}})
	s = read(f)
	if len(s.Desired.Workloads)+len(s.Rendered)+len(s.Desired.Configs)+s.States.Len()+len(s.DeleteGraph) != 0 {
		t.Fatalf("not deleted: %+v", s)
	}
}

func TestFSM_AgentConnectedAndGone(t *testing.T) {
	f := New()
	apply(t, f, UpdateDesiredStateType, webUpdate())
	apply(t, f, AgentConnectedType, AgentConnectedRequest{Name: "agent_A", Tags: map[string]string{"z": "1"}})
	if a := read(f).Agents["agent_A"]; a == nil || a.Tags["z"] != "1" || a.Status.CPUUsage != nil {
		t.Fatalf("agent %+v", a)
	}
	apply(t, f, AgentGoneType, AgentGoneRequest{Name: "agent_A"})
	s := read(f)
	if _, ok := s.Agents["agent_A"]; ok {
		t.Fatal("agent kept")
	}
	if got, _ := s.States.Get(inst); got != state.AgentDisconnected {
		t.Fatalf("state %v", got)
	}
}

func TestFSM_AgentLoad(t *testing.T) {
	f := New()
	apply(t, f, AgentConnectedType, AgentConnectedRequest{Name: "a"})
	apply(t, f, AgentLoadType, AgentLoadRequest{Loads: []AgentLoad{{Name: "a", CPUUsage: 5, FreeMemory: 6}, {Name: "unknown", CPUUsage: 1}}})
	s := read(f)
	if st := s.Agents["a"].Status; *st.CPUUsage != 5 || *st.FreeMemory != 6 {
		t.Fatalf("status %+v", st)
	}
	if _, ok := s.Agents["unknown"]; ok {
		t.Fatal("load of an unknown agent created it")
	}
}

func TestFSM_WorkloadStates(t *testing.T) {
	f := New()
	apply(t, f, UpdateDesiredStateType, webUpdate())
	apply(t, f, WorkloadStatesType, WorkloadStatesRequest{States: []state.WorkloadState{{Instance: inst, State: state.RunningOk}}})
	if got, _ := read(f).States.Get(inst); got != state.RunningOk {
		t.Fatalf("state %v", got)
	}
	apply(t, f, WorkloadStatesType, WorkloadStatesRequest{States: []state.WorkloadState{{Instance: inst, State: state.Removed}}})
	if _, ok := read(f).States.Get(inst); ok {
		t.Fatal("Removed state kept")
	}
}

func TestFSM_UnknownType(t *testing.T) {
	f := New()
	if resp := f.Apply(&raft.Log{Type: raft.LogCommand, Data: []byte{byte(IgnoreUnknownTypeFlag | 99), '{', '}'}}); resp != nil {
		t.Fatalf("ignorable unknown type: %v", resp)
	}
	defer func() {
		if recover() == nil {
			t.Fatal("an unknown type without the ignore flag did not stop the FSM")
		}
	}()
	f.Apply(&raft.Log{Type: raft.LogCommand, Data: []byte{99, '{', '}'}})
}

// The numbers are part of the log format: changing one breaks every
// existing Raft log.
func TestMessageTypeNumbersAreStable(t *testing.T) {
	want := map[MessageType]uint8{UpdateDesiredStateType: 1, AgentConnectedType: 2, AgentGoneType: 3, AgentLoadType: 4, WorkloadStatesType: 5}
	for typ, n := range want {
		if uint8(typ) != n {
			t.Errorf("%s is %d, must stay %d", typ, typ, n)
		}
		if typeNames[typ] == "" {
			t.Errorf("%d has no name", n)
		}
	}
	if len(typeNames) != len(want) {
		t.Errorf("a command type was added without a stability entry here")
	}
	snaps := map[SnapshotType]uint8{SnapAPIVersion: 1, SnapWorkload: 2, SnapConfig: 3, SnapRendered: 4, SnapDeleteEdge: 5, SnapAgent: 6, SnapWorkloadState: 7, SnapRevision: 8}
	for typ, n := range snaps {
		if uint8(typ) != n {
			t.Errorf("snapshot type %d must stay %d", typ, n)
		}
	}
	if len(AllSnapshotTypes) != len(snaps) {
		t.Error("AllSnapshotTypes and the stability table differ")
	}
}

type memSink struct {
	bytes.Buffer
	cancelled bool
}

func (m *memSink) ID() string    { return "mem" }
func (m *memSink) Cancel() error { m.cancelled = true; return nil }
func (m *memSink) Close() error  { return nil }

// A state holding every record type survives Snapshot → Persist → Restore.
func TestSnapshotRoundTrip(t *testing.T) {
	f := New()
	apply(t, f, UpdateDesiredStateType, webUpdate())
	apply(t, f, AgentConnectedType, AgentConnectedRequest{Name: "agent_A", Tags: map[string]string{"z": "1"}})
	apply(t, f, AgentLoadType, AgentLoadRequest{Loads: []AgentLoad{{Name: "agent_A", CPUUsage: 3, FreeMemory: 4}}})
	apply(t, f, WorkloadStatesType, WorkloadStatesRequest{States: []state.WorkloadState{{Instance: inst, State: state.RunningOk}}})
	snap, err := f.Snapshot()
	if err != nil {
		t.Fatal(err)
	}
	sink := &memSink{}
	if err := snap.Persist(sink); err != nil {
		t.Fatal(err)
	}
	// Every record type appears in the snapshot.
	seen := map[SnapshotType]bool{}
	data := sink.Bytes()
	s, _, err := ReadSnapshot(bytes.NewReader(data))
	if err != nil {
		t.Fatal(err)
	}
	_ = s
	for _, typ := range AllSnapshotTypes {
		seen[typ] = bytes.Contains(data, []byte{byte(typ)})
	}
	for typ, ok := range seen {
		if !ok {
			t.Errorf("record type %d missing from the snapshot", typ)
		}
	}
	g := New()
	if err := g.Restore(nopCloser{bytes.NewReader(data)}); err != nil {
		t.Fatal(err)
	}
	a, b := read(f), read(g)
	if !reflect.DeepEqual(normalize(a), normalize(b)) || f.AppliedIndex() != g.AppliedIndex() {
		t.Fatalf("restored store differs:\n%+v\n%+v", a, b)
	}
	var again bytes.Buffer
	if err := WriteSnapshot(&again, b, g.AppliedIndex()); err != nil || !bytes.Equal(again.Bytes(), data) {
		t.Fatal("a restored store does not snapshot to the same bytes")
	}
	if _, _, err := ReadSnapshot(bytes.NewReader(data[:len(data)-3])); err == nil {
		t.Fatal("a truncated snapshot was accepted")
	}
}

type nopCloser struct{ *bytes.Reader }

func (nopCloser) Close() error { return nil }

// normalize compares stores through their Tree views plus the parts a
// Tree does not show.
func normalize(s *state.Store) any {
	cs := s.CompleteState()
	rendered := map[string]any{}
	for n, r := range s.Rendered {
		rendered[n] = []any{r.Instance, r.Workload.ToTree()}
	}
	return []any{cs.ToTree(), rendered, s.DeleteGraph, s.Revision}
}
