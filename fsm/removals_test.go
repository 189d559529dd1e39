package fsm

import (
	"bytes"
	"reflect"
	"testing"

	"github.com/hashicorp/raft"

	"github.com/grapnel-io/grapnel/state"
)

// removalGolden is one ReplicaRemoval of each kind; the recorded one is
// the golden entry in testdata.
func removalGolden() map[string]Command {
	return map[string]Command{
		"ReplicaRemoval":        &ReplicaRemovalRequest{ID: "s2", Incarnation: 0x8000_0000_0000_0001},
		"ReplicaRemoval-forget": &ReplicaRemovalRequest{ID: "s2", Forget: true},
		"ReplicaRemoval-revokes": &ReplicaRemovalRequest{ID: "s2", Incarnation: 5,
			Certs: []state.ReplicaCert{{Serial: "1f2e", NotAfterMs: 2_000_000_000_000}}, TimeMs: 1_700_000_000_000},
		"ReplicaCertificate": &ReplicaCertificateRequest{ID: "s2", Cert: state.ReplicaCert{Serial: "a0b1", NotAfterMs: 2_000_000_000_000}},
	}
}

// The golden entries of issue 27: a removal that revokes certificates,
// and a recorded certificate. They must decode to the same command in
// every later version.
func TestReplicaCertificateGoldenEntries(t *testing.T) {
	for name, typ := range map[string]MessageType{"ReplicaRemoval-revokes": ReplicaRemovalType, "ReplicaCertificate": ReplicaCertificateType} {
		c := removalGolden()[name]
		buf := goldenEntry(t, "entry-"+name+".golden", mustEncode(t, c))
		gotType, got, err := Decode(buf)
		if err != nil || gotType != typ || !reflect.DeepEqual(got, c) {
			t.Fatalf("%s decodes to %s %+v, %v", name, gotType, got, err)
		}
	}
	for _, bad := range []Command{
		&ReplicaCertificateRequest{Cert: state.ReplicaCert{Serial: "1"}},
		&ReplicaCertificateRequest{ID: "s2"},
		&ReplicaRemovalRequest{ID: "s2", Certs: []state.ReplicaCert{{}}},
	} {
		if _, err := Encode(bad); err == nil {
			t.Errorf("%+v encoded", bad)
		}
	}
	if ReplicaCertificateType&IgnoreUnknownTypeFlag == 0 {
		t.Fatal("ReplicaCertificate must be skippable by replicas that do not know it")
	}
}

// Requirement (issue 27, hole 1): an operator's removal revokes every
// certificate recorded for the replica and those the removing leader saw;
// every replica then finds them by serial without the lock, after a
// snapshot restore too. A rotation keeps the last few certificates; an
// expired revocation is dropped at the next removal; a forget (cluster
// add) keeps the revocations; a revoked certificate is never recorded
// again.
func TestRevocationLedger(t *testing.T) {
	f := New()
	index := uint64(0)
	apply := func(c Command) {
		t.Helper()
		index++
		buf, err := Encode(c)
		if err != nil {
			t.Fatal(err)
		}
		if resp := f.Apply(&raft.Log{Index: index, Type: raft.LogCommand, Data: buf}); resp != nil {
			t.Fatalf("apply: %v", resp)
		}
	}
	record := func(id, serial string, notAfter int64) {
		t.Helper()
		buf, err := f.CertificateEntry(id, state.ReplicaCert{Serial: serial, NotAfterMs: notAfter})
		if err != nil {
			t.Fatal(err)
		}
		index++
		if resp := f.Apply(&raft.Log{Index: index, Type: raft.LogCommand, Data: buf}); resp != nil {
			t.Fatalf("apply: %v", resp)
		}
	}
	remove := func(id string, seen []state.ReplicaCert, nowMs int64) {
		t.Helper()
		buf, err := f.RemovalEntry(id, 0, false, seen, nowMs)
		if err != nil {
			t.Fatal(err)
		}
		index++
		if resp := f.Apply(&raft.Log{Index: index, Type: raft.LogCommand, Data: buf}); resp != nil {
			t.Fatalf("apply: %v", resp)
		}
	}
	revoked := func(f *FSM, serial string) bool { _, ok := f.RevokedCert(serial); return ok }
	for i, serial := range []string{"a1", "a2", "a2", "a3", "a4", "a5"} {
		record("s2", serial, int64(1000+i))
	}
	record("s3", "b1", 5000)
	if got := f.RecordedCerts("s2"); len(got) != state.MaxCertsPerReplica || got[0].Serial != "a2" || got[3].Serial != "a5" {
		t.Fatalf("recorded for s2: %+v", got)
	}
	remove("s2", []state.ReplicaCert{{Serial: "c9", NotAfterMs: 9000}}, 500)
	for _, serial := range []string{"a2", "a3", "a4", "a5", "c9"} {
		if !revoked(f, serial) {
			t.Errorf("%s not revoked", serial)
		}
	}
	if r, _ := f.RevokedCert("a5"); r.ID != "s2" || r.Index != index {
		t.Errorf("revocation of a5: %+v", r)
	}
	if revoked(f, "b1") || revoked(f, "a1") || f.RecordedCerts("s2") != nil {
		t.Fatalf("s3's certificate revoked, or s2 still recorded: %+v", f.RecordedCerts("s2"))
	}
	record("s2", "a5", 1005) // the removed certificate shown again
	if f.RecordedCerts("s2") != nil {
		t.Fatal("a revoked certificate was recorded again")
	}
	apply(&ReplicaRemovalRequest{ID: "s2", Forget: true})
	if !revoked(f, "a5") {
		t.Fatal("cluster add took the revocation back")
	}
	// Travel through a snapshot: every replica finds the same.
	snap, err := f.Snapshot()
	if err != nil {
		t.Fatal(err)
	}
	sink := &memSink{}
	if err := snap.Persist(sink); err != nil {
		t.Fatal(err)
	}
	g := New()
	if err := g.Restore(nopCloser{bytes.NewReader(sink.Bytes())}); err != nil {
		t.Fatal(err)
	}
	if !revoked(g, "c9") || !revoked(g, "a2") || len(g.RecordedCerts("s3")) != 1 {
		t.Fatal("the revocations or records did not survive the snapshot")
	}
	// Expired revocations go at the next removal.
	remove("s3", nil, 2000)
	if revoked(f, "a2") || !revoked(f, "c9") || !revoked(f, "b1") {
		t.Fatalf("after expiry: %v", read(f).Revoked)
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
		buf, err := f.RemovalEntry(id, inc, forget, nil, 0)
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
