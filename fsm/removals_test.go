package fsm

import (
	"reflect"
	"testing"

	"github.com/hashicorp/raft"
)

// removalGolden is one ReplicaRemoval of each kind; the recorded one is
// the golden entry in testdata.
func removalGolden() map[string]Command {
	return map[string]Command{
		"ReplicaRemoval":        &ReplicaRemovalRequest{ID: "s2", Incarnation: 0x8000_0000_0000_0001},
		"ReplicaRemoval-forget": &ReplicaRemovalRequest{ID: "s2", Forget: true},
	}
}

func TestReplicaRemovalGoldenEntry(t *testing.T) {
	c := removalGolden()["ReplicaRemoval"]
	buf := goldenEntry(t, "entry-ReplicaRemoval.golden", mustEncode(t, c))
	typ, got, err := Decode(buf)
	if err != nil || typ != ReplicaRemovalType || !reflect.DeepEqual(got, c) {
		t.Fatalf("the golden entry decodes to %s %+v, %v", typ, got, err)
	}
	if err := CheckType(buf); err != nil {
		t.Fatalf("CheckType refuses it: %v", err)
	}
	if _, err := Encode(&ReplicaRemovalRequest{Incarnation: 3}); err == nil {
		t.Fatal("a removal naming no replica encoded")
	}
	if _, _, err := Decode([]byte{byte(ReplicaRemovalType), 0x10, 3}); err == nil {
		t.Fatal("a removal naming no replica decoded")
	}
}

// The ledger the cluster reads (cluster.RemovalLedger): a removal is kept
// with the index of its entry, a later one of the same id replaces it,
// forget drops it, and a replica that does not know the type skips it.
func TestReplicaRemovalLedger(t *testing.T) {
	f := New()
	step := func(index uint64, id string, inc uint64, forget bool) {
		t.Helper()
		buf, err := f.RemovalEntry(id, inc, forget)
		if err != nil {
			t.Fatal(err)
		}
		if resp := f.Apply(&raft.Log{Index: index, Type: raft.LogCommand, Data: buf}); resp != nil {
			t.Fatalf("apply: %v", resp)
		}
	}
	want := func(id string, inc, index uint64, ok bool) {
		t.Helper()
		gi, gx, gok := f.RemovedRun(id)
		if gi != inc || gx != index || gok != ok {
			t.Fatalf("%s: run %d at %d (%v), want run %d at %d (%v)", id, gi, gx, gok, inc, index, ok)
		}
	}
	want("s2", 0, 0, false)
	step(5, "s2", 11, false)
	want("s2", 11, 5, true)
	step(9, "s2", 12, false)
	want("s2", 12, 9, true)
	step(10, "s3", 4, false)
	step(12, "s2", 0, true)
	want("s2", 0, 0, false)
	want("s3", 4, 10, true)
	step(13, "s3", 0, true)
	if read(f).Removed != nil {
		t.Fatalf("no removals left, the map is %v", read(f).Removed)
	}
	// The skip flag: an unknown type with it is skipped, so an older
	// replica reading this entry goes on.
	if ReplicaRemovalType&IgnoreUnknownTypeFlag == 0 {
		t.Fatal("ReplicaRemoval must be skippable by replicas that do not know it")
	}
}
