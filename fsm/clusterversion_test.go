package fsm

import (
	"bytes"
	"errors"
	"fmt"
	"reflect"
	"strings"
	"testing"

	"github.com/hashicorp/raft"

	"github.com/grapnel-io/grapnel/state"
)

// The entry that raises the cluster version has a golden form; it is not
// skippable, and a version of 0 is refused when encoding and decoding.
func TestSetClusterVersionGoldenEntry(t *testing.T) {
	c := &SetClusterVersionRequest{Version: 1}
	buf := goldenEntry(t, "entry-SetClusterVersion.golden", mustEncode(t, c))
	typ, got, err := Decode(buf)
	if err != nil || typ != SetClusterVersionType || !reflect.DeepEqual(got, c) {
		t.Fatalf("the golden entry decodes to %s %+v, %v", typ, got, err)
	}
	if SetClusterVersionType&IgnoreUnknownTypeFlag != 0 {
		t.Fatal("a replica that does not know SetClusterVersion must stop, not skip it")
	}
	if _, err := Encode(&SetClusterVersionRequest{}); err == nil {
		t.Fatal("version 0 encoded")
	}
	if _, _, err := Decode([]byte{byte(SetClusterVersionType)}); err == nil {
		t.Fatal("version 0 decoded")
	}
}

// Requirement (issue 28, point 2): the cluster version is replicated and
// never goes down, and the leader's gates read it without the lock.
func TestClusterVersionNeverGoesDown(t *testing.T) {
	f := New()
	if f.ClusterVersion() != state.ClusterVersionBaseline {
		t.Fatalf("a new store is at %d", f.ClusterVersion())
	}
	for i, v := range []uint32{1, 1, 0, 1} {
		if v == 0 {
			// A store restored from an older snapshot is at the baseline,
			// and the raise applies again.
			continue
		}
		apply(t, f, &SetClusterVersionRequest{Version: v})
		if f.ClusterVersion() != 1 || read(f).ClusterVersion != 1 {
			t.Fatalf("step %d: at %d / %d", i, f.ClusterVersion(), read(f).ClusterVersion)
		}
	}
	st := state.NewStore()
	st.SetClusterVersion(1)
	st.SetClusterVersion(0)
	if st.ClusterVersion != 1 {
		t.Fatal("the cluster version went down")
	}
}

// Requirement (issue 28, point 3): a build never misreads what a newer
// release wrote. An entry that raises the cluster version past what it
// reads halts the FSM naming both versions; a snapshot at such a version
// is refused the same way. Neither changes the store.
func TestNewerClusterVersionHalts(t *testing.T) {
	f := New()
	apply(t, f, webUpdate())
	before := read(f)
	buf, err := Encode(&SetClusterVersionRequest{Version: state.MaxClusterVersion + 1})
	if err != nil {
		t.Fatal(err)
	}
	resp := f.Apply(&raft.Log{Index: 9, Type: raft.LogCommand, Data: buf})
	var h *HaltError
	if !errors.As(resp.(error), &h) || !errors.Is(h, ErrNewerFormat) {
		t.Fatalf("response %v, want a halt for a newer format", resp)
	}
	msg := h.Error()
	for _, want := range []string{fmt.Sprintf("raised to %d", state.MaxClusterVersion+1), fmt.Sprintf("up to %d", state.MaxClusterVersion)} {
		if !strings.Contains(msg, want) {
			t.Fatalf("halt %q does not name %q", msg, want)
		}
	}
	if f.ClusterVersion() != state.ClusterVersionBaseline || !reflect.DeepEqual(normalize(read(f)), normalize(before)) {
		t.Fatal("the store changed")
	}

	// A snapshot at a newer cluster version.
	st := state.NewStore()
	st.ClusterVersion = state.MaxClusterVersion + 1
	var snap bytes.Buffer
	if err := WriteSnapshot(&snap, st, 3); err != nil {
		t.Fatal(err)
	}
	if _, _, err := ReadSnapshot(bytes.NewReader(snap.Bytes())); !errors.Is(err, ErrNewerFormat) || !strings.Contains(err.Error(), fmt.Sprintf("cluster version %d", state.MaxClusterVersion+1)) {
		t.Fatalf("reading a newer snapshot: %v", err)
	}
}

// A snapshot at the baseline holds no cluster version record, so that the
// previous release, which does not know it, can read it (rollback).
func TestBaselineSnapshotHasNoClusterVersionRecord(t *testing.T) {
	f := New()
	apply(t, f, webUpdate())
	snap, err := f.Snapshot()
	if err != nil {
		t.Fatal(err)
	}
	sink := &memSink{}
	if err := snap.Persist(sink); err != nil {
		t.Fatal(err)
	}
	for _, typ := range []SnapshotType{SnapClusterVersion, SnapReplicaCerts, SnapRevokedCert} {
		if n := recordTypes(t, sink.Bytes())[typ]; n != 0 {
			t.Fatalf("a baseline snapshot holds %d records of type %d", n, typ)
		}
	}
}
