package fsm

import (
	"bytes"
	"errors"
	"reflect"
	"strings"
	"testing"

	"github.com/hashicorp/raft"

	"github.com/grapnel-io/grapnel/state"
)

// lockGolden is one command of each lock type, as the golden entries in
// testdata hold them.
func lockGolden() map[string]Command {
	return map[string]Command{
		"LockObjects": &LockObjectsRequest{Objects: []string{"config/cfg", "workload/web"}, Owner: "alice@host", Reason: "migration",
			NowMs: 1_700_000_000_000, ExpiresMs: 1_700_000_600_000},
		"UnlockObjects": &UnlockObjectsRequest{Objects: []string{"workload/web"}, Owner: "alice@host", NowMs: 1_700_000_100_000, Force: true},
	}
}

func TestLockGoldenEntries(t *testing.T) {
	for name, c := range lockGolden() {
		t.Run(name, func(t *testing.T) {
			if c.Type().String() != name {
				t.Fatalf("%s is named %s", name, c.Type())
			}
			buf := goldenEntry(t, "entry-"+name+".golden", mustEncode(t, c))
			typ, got, err := Decode(buf)
			if err != nil || typ != c.Type() {
				t.Fatalf("decodes as %s: %v", typ, err)
			}
			if !reflect.DeepEqual(got, c) {
				t.Fatalf("decodes to\n%+v\nwant\n%+v", got, c)
			}
			if err := CheckType(buf); err != nil {
				t.Fatalf("CheckType refuses %s: %v", name, err)
			}
		})
	}
}

func applyLockResp(t *testing.T, f *FSM, c Command) any {
	t.Helper()
	buf, err := Encode(c)
	if err != nil {
		t.Fatal(err)
	}
	index++
	return f.Apply(&raft.Log{Index: index, Type: raft.LogCommand, Data: buf})
}

// Requirement (issue 16, point 5): a lock expires by the leader's time as
// replicated, not by the replica's clock: the FSM compares with the time
// in the next command; another owner is refused until then, the owner
// renews, and an expired lock is pruned by the next lock write.
func TestLocksApply(t *testing.T) {
	f := New()
	apply(t, f, &LockObjectsRequest{Objects: []string{"workload/web"}, Owner: "alice", Reason: "upgrade", NowMs: 1000, ExpiresMs: 61_000})
	resp := applyLockResp(t, f, &LockObjectsRequest{Objects: []string{"workload/web", "config/x"}, Owner: "bob", NowMs: 2000, ExpiresMs: 9000})
	var le *state.LockedError
	if err, _ := resp.(error); !errors.As(err, &le) || !strings.Contains(err.Error(), "workload/web is locked by alice until 1970-01-01T00:01:01Z (upgrade)") {
		t.Fatalf("bob's lock on alice's object: %v", resp)
	}
	if _, ok := read(f).Locks["config/x"]; ok {
		t.Fatal("a refused lock command locked part of its objects")
	}
	apply(t, f, &LockObjectsRequest{Objects: []string{"workload/web"}, Owner: "alice", NowMs: 3000, ExpiresMs: 90_000})
	if lk := read(f).Locks["workload/web"]; lk.ExpiresMs != 90_000 || lk.Owner != "alice" {
		t.Fatalf("renewed lock %+v", lk)
	}
	if err, _ := applyLockResp(t, f, &UnlockObjectsRequest{Objects: []string{"workload/web"}, Owner: "bob", NowMs: 4000}).(error); err == nil ||
		!strings.Contains(err.Error(), "bob may release it only with force") {
		t.Fatalf("bob unlocking alice's lock: %v", err)
	}
	// At 90 s the lock is over: bob takes it, and the expired one is gone.
	apply(t, f, &LockObjectsRequest{Objects: []string{"config/x"}, Owner: "bob", NowMs: 90_000, ExpiresMs: 95_000})
	if got := read(f).Locks; len(got) != 1 || got["config/x"].Owner != "bob" {
		t.Fatalf("after expiry: %+v", got)
	}
	apply(t, f, &UnlockObjectsRequest{Objects: []string{"config/x"}, Owner: "alice", NowMs: 91_000, Force: true})
	if got := read(f).Locks; len(got) != 0 {
		t.Fatalf("after a forced unlock: %+v", got)
	}
}

// Requirement (issue 16, point 4): every workload and config item has the
// revision of the update that last put it, a deletion leaves a tombstone,
// and both survive a snapshot with the locks.
func TestRevisionsAndLocksSnapshot(t *testing.T) {
	f := New()
	apply(t, f, webUpdate()) // seq 1: web, cfg
	apply(t, f, &UpdateDesiredStateRequest{Update: state.DesiredUpdate{DeleteConfigs: []string{"cfg"}, PutConfigs: map[string]any{"n": "2"}}})
	apply(t, f, &LockObjectsRequest{Objects: []string{"workload/web"}, Owner: "alice", NowMs: 1, ExpiresMs: 2})
	st := read(f)
	want := &state.Revisions{Mod: map[string]uint64{"workload/web": 1, "config/n": 2}, Tombstones: map[string]uint64{"config/cfg": 2}}
	if !reflect.DeepEqual(st.Revs, want) {
		t.Fatalf("revisions %+v, want %+v", st.Revs, want)
	}
	var buf bytes.Buffer
	if err := WriteSnapshot(&buf, st, 9); err != nil {
		t.Fatal(err)
	}
	back, _, err := ReadSnapshot(&buf)
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(back.Revs, want) || !reflect.DeepEqual(back.Locks, st.Locks) {
		t.Fatalf("restored revisions %+v locks %+v", back.Revs, back.Locks)
	}
}
