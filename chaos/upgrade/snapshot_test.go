package upgrade

import (
	"bytes"
	"strings"
	"testing"

	"github.com/grapnel-io/grapnel/fsm"
	"github.com/grapnel-io/grapnel/state"
)

func snapOf(t *testing.T, st *state.Store, index uint64) *Snap {
	t.Helper()
	var b bytes.Buffer
	if err := fsm.WriteSnapshot(&b, st, index); err != nil {
		t.Fatal(err)
	}
	s, err := ParseSnap(b.Bytes())
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// The harness reads the snapshot format fsm writes, record by record.
func TestParseSnapReadsWhatFSMWrites(t *testing.T) {
	st := state.NewStore()
	st.RecordReplicaCert("r1", state.ReplicaCert{Serial: "ab12", NotAfterMs: 5})
	s := snapOf(t, st, 42)
	if s.Index != 42 || s.Version != 2 {
		t.Fatalf("header: index %d version %d", s.Index, s.Version)
	}
	recs := s.Records[int(fsm.SnapReplicaCerts)]
	if len(recs) != 1 || !strings.Contains(recs[0], `"ab12"`) {
		t.Fatalf("replica certificate records: %q", recs)
	}
	if len(s.Records[int(fsm.SnapAPIVersion)]) != 1 {
		t.Fatalf("records: %v", s.Records)
	}
	if _, err := ParseSnap([]byte("NOT-A-SNAPSHOT")); err == nil {
		t.Fatal("bad magic accepted")
	}
	var b bytes.Buffer
	if err := fsm.WriteSnapshot(&b, st, 1); err != nil {
		t.Fatal(err)
	}
	if _, err := ParseSnap(b.Bytes()[:b.Len()-10]); err == nil {
		t.Fatal("a truncated snapshot accepted")
	}
}

// Two replicas' states compare record type by record type: the same
// state gives no difference, a record only one has names its type and
// count.
func TestDiffSnaps(t *testing.T) {
	a, b := state.NewStore(), state.NewStore()
	if d := DiffSnaps(snapOf(t, a, 1), snapOf(t, b, 1)); len(d) != 0 {
		t.Fatalf("equal states differ: %v", d)
	}
	a.RecordReplicaCert("r1", state.ReplicaCert{Serial: "ab12", NotAfterMs: 5})
	a.RecordReplicaCert("r2", state.ReplicaCert{Serial: "cd34", NotAfterMs: 5})
	b.RecordReplicaCert("r2", state.ReplicaCert{Serial: "cd34", NotAfterMs: 5})
	d := DiffSnaps(snapOf(t, a, 1), snapOf(t, b, 1))
	if len(d) != 1 || d[0].Type != int(fsm.SnapReplicaCerts) || d[0].OnlyA != 1 || d[0].OnlyB != 0 || !strings.Contains(d[0].FirstA, "ab12") {
		t.Fatalf("diff: %+v", d)
	}
}

// The fsm types are read from the sources: the tree's own declarations
// are every type fsm knows.
func TestParseFSMTypesOfThisTree(t *testing.T) {
	snaps, entries, err := fsmTypes("../..")
	if err != nil {
		t.Fatal(err)
	}
	if len(snaps) != len(fsm.AllSnapshotTypes) {
		t.Errorf("snapshot types %v, fsm declares %d", snaps, len(fsm.AllSnapshotTypes))
	}
	for _, want := range []int{int(fsm.SnapWorkload), int(fsm.SnapReplicaCerts)} {
		if !containsInt(snaps, want) {
			t.Errorf("snapshot type %d missing from %v", want, snaps)
		}
	}
	for _, want := range []int{int(fsm.UpdateDesiredStatePackedType), int(fsm.ReplicaCertificateType)} {
		if !containsInt(entries, want) {
			t.Errorf("command type %d missing from %v", want, entries)
		}
	}
	if _, _, err := ParseFSMTypes([]byte("package fsm"), []byte("package fsm")); err == nil {
		t.Error("sources without declarations accepted")
	}
}

func containsInt(xs []int, x int) bool {
	for _, y := range xs {
		if y == x {
			return true
		}
	}
	return false
}
