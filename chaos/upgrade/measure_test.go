package upgrade

import (
	"strings"
	"testing"
	"time"

	"github.com/grapnel-io/grapnel/chaos/history"
)

var t0 = time.Date(2026, 11, 28, 12, 0, 0, 0, time.UTC)

func at(ms int) time.Time { return t0.Add(time.Duration(ms) * time.Millisecond) }

func op(client int, kind history.Kind, call, ret int, out history.Outcome, err string) history.Op {
	o := history.Op{Client: client, Kind: kind, Key: "k", Call: at(call), Outcome: out, Err: err}
	if ret >= 0 {
		o.Return = at(ret)
	}
	return o
}

// The next acknowledged write is the first acknowledgement of a write or
// delete called at or after the moment, not one called before it, not a
// read, not a failure.
func TestNextAck(t *testing.T) {
	ops := []history.Op{
		op(0, history.Write, 90, 150, history.OK, ""),       // called before
		op(0, history.Read, 110, 120, history.OK, ""),       // a read
		op(1, history.Write, 105, 130, history.Fail, "x"),   // failed
		op(2, history.Delete, 120, 400, history.OK, ""),     // acknowledged late
		op(3, history.Write, 140, 300, history.OK, ""),      // the first acknowledgement
		op(4, history.Write, 150, -1, history.Unknown, "?"), // never answered
	}
	d, ok := NextAck(ops, at(100), nil)
	if !ok || d != 200*time.Millisecond {
		t.Fatalf("next ack %v %v, want 200ms", d, ok)
	}
	if d, ok := NextAck(ops, at(100), func(o history.Op) bool { return o.Client == 2 }); !ok || d != 300*time.Millisecond {
		t.Fatalf("next ack of client 2 %v %v, want 300ms", d, ok)
	}
	if _, ok := NextAck(ops, at(500), nil); ok {
		t.Fatal("an acknowledgement after the last call")
	}
}

// The longest gap counts from the start of the window to the first
// acknowledgement and from the last one to its end.
func TestLongestGap(t *testing.T) {
	ops := []history.Op{
		op(0, history.Write, 0, 100, history.OK, ""),
		op(0, history.Write, 100, 250, history.OK, ""),
		op(0, history.Read, 250, 900, history.OK, ""), // reads do not count
		op(0, history.Write, 250, 1000, history.OK, ""),
	}
	if g := LongestGap(ops, at(0), at(1100)); g != 750*time.Millisecond {
		t.Fatalf("gap %v, want 750ms", g)
	}
	if g := LongestGap(nil, at(0), at(1100)); g != 1100*time.Millisecond {
		t.Fatalf("gap without acks %v, want the whole window", g)
	}
}

// Routes counts each route's outcomes in the window and leaves out what
// the end of the window cut off.
func TestRoutes(t *testing.T) {
	via := func(c int) string { return map[int]string{0: "leader-aware", 1: "via r1", 2: "via r2"}[c] }
	ops := []history.Op{
		op(0, history.Write, 10, 20, history.OK, ""),
		op(0, history.Write, 30, 40, history.OK, ""),
		op(1, history.Write, 10, 20, history.Fail, "permission denied"),
		op(1, history.Write, 30, 40, history.Unknown, "EOF"),
		op(2, history.Write, 50, 200, history.Unknown, "context canceled"), // cut off by the end
		op(2, history.Write, 5, 8, history.Fail, "too early"),              // before the window
		op(9, history.Write, 10, 20, history.OK, ""),                       // no route
	}
	got := Routes(ops, at(10), at(100), via, []string{"leader-aware", "via r1", "via r2"})
	want := []Route{{Via: "leader-aware", OK: 2}, {Via: "via r1", Fail: 1, Unknown: 1, FirstError: "permission denied"}}
	if len(got) != len(want) {
		t.Fatalf("routes %+v, want %+v", got, want)
	}
	for i := range want {
		if got[i] != want[i] {
			t.Errorf("route %d: %+v, want %+v", i, got[i], want[i])
		}
	}
}

// Every route must be served once the cluster is healthy: a refusal, a
// route without a request or without anything acknowledged fails the
// check; unavailability for a moment (an election) does not.
func TestRoutesServe(t *testing.T) {
	want := []string{"leader-aware", "via r1", "via r2"}
	ok := RoutesServe([]Route{{Via: "leader-aware", OK: 3, Unknown: 2, FirstError: "Update failed: not the leader"}, {Via: "via r1", OK: 1}, {Via: "via r2", OK: 2}}, nil, want)
	if !ok.OK || !strings.Contains(ok.Detail, "leader-aware 2 failed or unknown (unavailable: Update failed: not the leader)") {
		t.Fatalf("served routes: %+v", ok)
	}
	refused := map[string][]string{"via r1": {"stream ended: rpc error: code = PermissionDenied desc = permission denied: replica 'r1' may not forward"}}
	bad := RoutesServe([]Route{{Via: "leader-aware", OK: 3}, {Via: "via r1", OK: 1, Fail: 2}, {Via: "via r2", Unknown: 2, FirstError: "EOF"}}, refused, []string{"leader-aware", "via r1", "via r2", "via r3"})
	for _, w := range []string{
		"via r1: 1 ok, 1 requests refused once healthy; first: stream ended: rpc error: code = PermissionDenied",
		"via r2: nothing acknowledged once healthy (0 failed, 2 unknown; first error: EOF)",
		"via r3: no request once healthy",
	} {
		if bad.OK || !strings.Contains(bad.Detail, w) {
			t.Errorf("check lacks %q: %+v", w, bad)
		}
	}
}

// Refusals are the errors a server answered with, not a broken stream.
func TestRefusals(t *testing.T) {
	via := func(c int) string { return map[int]string{0: "leader-aware", 1: "via r1"}[c] }
	ops := []history.Op{
		op(0, history.Write, 10, 20, history.Unknown, "Update failed: not the leader"),
		op(0, history.Write, 10, 20, history.Unknown, "stream ended: rpc error: code = Unavailable desc = the leader changed"),
		op(1, history.Write, 10, 20, history.Unknown, "stream ended: rpc error: code = PermissionDenied desc = permission denied"),
		op(1, history.Write, 10, 20, history.Fail, "Update rejected: workload/x is locked by chaos"),
		op(1, history.Write, 5, 6, history.Fail, "Update rejected: before the window"),
	}
	got := Refusals(ops, at(10), at(100), via)
	if len(got["leader-aware"]) != 0 || len(got["via r1"]) != 2 {
		t.Fatalf("refusals %v", got)
	}
}
