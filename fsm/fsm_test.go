package fsm

import (
	"bufio"
	"bytes"
	"encoding/binary"
	"errors"
	"io"
	"reflect"
	"testing"

	"github.com/hashicorp/raft"

	"github.com/grapnel-io/grapnel/state"
)

var index uint64

// apply applies c at the next index and fails on an error. An update
// without a sequence number gets the one that follows the store's.
func apply(t *testing.T, f *FSM, c Command) {
	t.Helper()
	if u, ok := c.(*UpdateDesiredStateRequest); ok && u.Seq == 0 {
		next := *u
		next.Seq = read(f).DesiredSeq + 1
		c = &next
	}
	buf, err := Encode(c)
	if err != nil {
		t.Fatal(err)
	}
	index++
	if resp := f.Apply(&raft.Log{Index: index, Type: raft.LogCommand, Data: buf}); resp != nil {
		if _, ok := resp.(*AgentGoneResponse); !ok {
			t.Fatalf("apply %s: %v", c.Type(), resp)
		}
	}
}

func read(f *FSM) *state.Store {
	var c *state.Store
	f.Read(func(s *state.Store, _ uint64) { c = s.Clone() })
	return c
}

var inst = state.NewInstanceName("web", "agent_A", "image: nginx")

func webUpdate() *UpdateDesiredStateRequest {
	w := &state.Workload{Agent: "agent_A", Runtime: "podman", RuntimeConfig: "image: nginx", RestartPolicy: state.RestartAlways,
		Dependencies: map[string]state.AddCondition{"db": state.AddCondRunning}, Tags: map[string]string{"a": "b"}}
	return &UpdateDesiredStateRequest{Update: state.DesiredUpdate{
		APIVersion:   state.APIVersion,
		PutWorkloads: map[string]*state.Workload{"web": w},
		PutConfigs:   map[string]any{"cfg": map[string]any{"k": "v", "l": []any{"x"}}},
		PutRendered:  map[string]state.Rendered{"web": {Instance: inst, Workload: w}},
		SetStates:    []state.WorkloadState{{Instance: inst, State: state.PendingInitial}},
	}}
}

func TestFSM_UpdateDesiredState(t *testing.T) {
	f := New()
	apply(t, f, webUpdate())
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
	apply(t, f, &UpdateDesiredStateRequest{Update: state.DesiredUpdate{
		DeleteWorkloads: []string{"web"}, DeleteRendered: []string{"web"}, DeleteConfigs: []string{"cfg"}, DeleteStates: []state.InstanceName{inst}}})
	s = read(f)
	if len(s.Desired.Workloads)+len(s.Rendered)+len(s.Desired.Configs)+s.States.Len()+len(s.DeleteGraph) != 0 {
		t.Fatalf("not deleted: %+v", s)
	}
}

func TestFSM_AgentConnectedAndGone(t *testing.T) {
	f := New()
	apply(t, f, webUpdate())
	apply(t, f, &AgentConnectedRequest{Name: "agent_A", Tags: map[string]string{"z": "1"}})
	if a := read(f).Agents["agent_A"]; a == nil || a.Tags["z"] != "1" || a.Status.CPUUsage != nil {
		t.Fatalf("agent %+v", a)
	}
	resp := applyResp(t, f, &AgentGoneRequest{Name: "agent_A"})
	if r, ok := resp.(*AgentGoneResponse); !ok || len(r.Disconnected) != 1 || r.Disconnected[0] != (state.WorkloadState{Instance: inst, State: state.AgentDisconnected}) {
		t.Fatalf("response %v", resp)
	}
	s := read(f)
	if _, ok := s.Agents["agent_A"]; ok {
		t.Fatal("agent kept")
	}
	if got, _ := s.States.Get(inst); got != state.AgentDisconnected {
		t.Fatalf("state %v", got)
	}
}

func TestFSM_UnknownType(t *testing.T) {
	f := New()
	if resp := f.Apply(&raft.Log{Type: raft.LogCommand, Data: []byte{byte(IgnoreUnknownTypeFlag | 99), '{', '}'}}); resp != nil {
		t.Fatalf("ignorable unknown type: %v", resp)
	}
	requireHalts(t, f, []byte{99, '{', '}'})
}

// The numbers are part of the log format: changing one breaks every
// existing Raft log.
func TestMessageTypeNumbersAreStable(t *testing.T) {
	want := map[MessageType]uint8{UpdateDesiredStateType: 1, AgentConnectedType: 2, AgentGoneType: 3, AgentLoadType: 4, WorkloadStatesType: 5,
		UpdateDesiredStateSeqType: 6, WorkloadReportsType: 7, UpdateDesiredStatePackedType: 8, BatchType: 9, HistoryNotesType: 138,
		SetAgentModeType: 11, PlacementType: 12,
		ProblemsChangedType: 141,
		LockObjectsType:     14, UnlockObjectsType: 15,
		ReplicaRemovalType: 144, ReplicaCertificateType: 145, SetClusterVersionType: 18}
	for typ, n := range want {
		if uint8(typ) != n {
			t.Errorf("%s is %d, must stay %d", typ, typ, n)
		}
		if c := commands[typ]; c == nil || c.name == "" {
			t.Errorf("%d has no name", n)
		}
	}
	if len(commands) != len(want) {
		t.Errorf("a command type was added without a stability entry here")
	}
	snaps := map[SnapshotType]uint8{SnapAPIVersion: 1, SnapWorkload: 2, SnapConfig: 3, SnapRendered: 4, SnapDeleteEdge: 5, SnapAgent: 6, SnapWorkloadState: 7, SnapRevision: 8,
		SnapDesiredSeq: 9, SnapReportMark: 10, SnapHistoryMeta: 11, SnapTx: 12, SnapTransition: 13,
		SnapAgentMode: 14, SnapPlacement: 15,
		SnapProblems: 16, SnapGuard: 17, SnapRemovedReplica: 18, SnapReplicaCerts: 19, SnapRevokedCert: 20, SnapClusterVersion: 21}
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
	apply(t, f, webUpdate())
	apply(t, f, &AgentConnectedRequest{Name: "agent_A", Tags: map[string]string{"z": "1"}})
	apply(t, f, &WorkloadReportsRequest{Reports: []AgentReport{{Agent: "agent_A", States: []state.WorkloadState{{Instance: inst, State: state.RunningOk}}}}})
	apply(t, f, &WorkloadReportsRequest{Reports: []AgentReport{
		{Agent: "agent_A", Mark: state.ReportMark{Incarnation: 3, Generation: 9}, States: []state.WorkloadState{{Instance: inst, State: state.SucceededOk}}}}})
	apply(t, f, &SetAgentModeRequest{Agent: "agent_B", Mode: state.ModeDisabled})
	apply(t, f, &PlacementRequest{Update: state.PlacementUpdate{Layout: map[string][]string{"web2": {"agent_A"}}}})
	apply(t, f, &UpdateDesiredStateRequest{Seq: 2, Update: state.DesiredUpdate{PutConfigs: map[string]any{"n": "2"}}})
	applyResp(t, f, problemsGolden())
	apply(t, f, &ReplicaRemovalRequest{ID: "s2", Incarnation: 7, Certs: []state.ReplicaCert{{Serial: "5e", NotAfterMs: 1 << 50}}})
	apply(t, f, &ReplicaCertificateRequest{ID: "s1", Cert: state.ReplicaCert{Serial: "1a", NotAfterMs: 1 << 50}})
	apply(t, f, &SetClusterVersionRequest{Version: state.MaxClusterVersion})
	snap, err := f.Snapshot()
	if err != nil {
		t.Fatal(err)
	}
	sink := &memSink{}
	if err := snap.Persist(sink); err != nil {
		t.Fatal(err)
	}
	data := sink.Bytes()
	seen := recordTypes(t, data)
	for _, typ := range AllSnapshotTypes {
		if seen[typ] == 0 {
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
	if b.DesiredSeq != 2 || b.ReportMarks["agent_A"] != (state.ReportMark{Incarnation: 3, Generation: 9}) {
		t.Fatalf("restored seq %d, marks %v", b.DesiredSeq, b.ReportMarks)
	}
	var again bytes.Buffer
	if err := WriteSnapshot(&again, b, g.AppliedIndex()); err != nil || !bytes.Equal(again.Bytes(), data) {
		t.Fatal("a restored store does not snapshot to the same bytes")
	}
	if _, _, err := ReadSnapshot(bytes.NewReader(data[:len(data)-3])); err == nil {
		t.Fatal("a truncated snapshot was accepted")
	}
}

// recordTypes walks a snapshot's records and counts each type.
func recordTypes(t *testing.T, data []byte) map[SnapshotType]int {
	t.Helper()
	br := bufio.NewReader(bytes.NewReader(data[len(snapshotMagic):]))
	for i := 0; i < 2; i++ { // version, index
		if _, err := binary.ReadUvarint(br); err != nil {
			t.Fatal(err)
		}
	}
	seen := map[SnapshotType]int{}
	for {
		b, err := br.ReadByte()
		if err != nil {
			t.Fatal("snapshot without end record")
		}
		if SnapshotType(b) == snapEnd {
			return seen
		}
		seen[SnapshotType(b)]++
		n, err := binary.ReadUvarint(br)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := io.CopyN(io.Discard, br, int64(n)); err != nil {
			t.Fatal(err)
		}
	}
}

// A restore replaces the store, counts itself and tells the observer.
func TestRestoreCountsAndNotifies(t *testing.T) {
	f := New()
	apply(t, f, webUpdate())
	var buf bytes.Buffer
	if err := WriteSnapshot(&buf, read(f), f.AppliedIndex()); err != nil {
		t.Fatal(err)
	}
	g := New()
	notified := 0
	g.SetRestoreObserver(func() { notified++ })
	if err := g.Restore(nopCloser{bytes.NewReader(buf.Bytes())}); err != nil {
		t.Fatal(err)
	}
	var m Meta
	g.ReadMeta(func(_ *state.Store, meta Meta) { m = meta })
	if m.Restores != 1 || g.Restores() != 1 || notified != 1 || m.Applied != f.AppliedIndex() {
		t.Fatalf("meta %+v, restores %d, notified %d", m, g.Restores(), notified)
	}
	if err := g.Restore(nopCloser{bytes.NewReader([]byte("junk"))}); !errors.Is(err, ErrBadSnapshot) || g.Restores() != 1 {
		t.Fatalf("a bad snapshot: %v, restores %d", err, g.Restores())
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
	return []any{cs.ToTree(), rendered, s.DeleteGraph, s.Revision, s.DesiredSeq, s.ReportMarks, s.History}
}

// Every snapshot record type has a name (--version lists them by it).
func TestSnapshotTypesNamed(t *testing.T) {
	if len(snapNames) != len(AllSnapshotTypes) {
		t.Errorf("%d record types, %d names", len(AllSnapshotTypes), len(snapNames))
	}
	for _, typ := range AllSnapshotTypes {
		if snapNames[typ] == "" {
			t.Errorf("record type %d has no name", typ)
		}
	}
	if got := SnapshotType(99).String(); got != "SnapshotType(99)" {
		t.Errorf("unknown type: %q", got)
	}
}
