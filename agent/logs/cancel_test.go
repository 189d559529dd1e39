package logs

import (
	"errors"
	"reflect"
	"strings"
	"testing"

	"github.com/grapnel-io/grapnel/agent/runtime"
	"github.com/grapnel-io/grapnel/rpc/ankbase"
)

func entriesOf(t *testing.T, f *fixture) []string {
	t.Helper()
	m := f.nextFlushing()
	r := m.GetLogEntriesResponse()
	if r == nil {
		t.Fatalf("want entries, got %v", m)
	}
	var out []string
	for _, e := range r.GetLogEntriesResponse().GetLogEntries() {
		out = append(out, e.GetMessage())
	}
	return out
}

// TestFollowUntilCancel: a followed source keeps sending until the
// campaign is cancelled; then its reader is closed and nothing more is
// sent.
//
// swdd~agent-log-fetching-stops-collection-when-dropped~1
func TestFollowUntilCancel(t *testing.T) {
	f := newFixture(t, 0)
	s := newStream()
	f.add("wl", s)
	f.c.Start(request("r", &ankbase.LogsRequest{Follow: ptr(true), Tail: ptr(int32(3))}, "wl"))
	for i, want := range [][]string{{"one"}, {"two", "three"}} {
		s.line(t, want...)
		// The batch timer may fire between two lines: gather batches
		// until the round's lines are in.
		var got []string
		for len(got) < len(want) {
			got = append(got, entriesOf(t, f)...)
		}
		if !reflect.DeepEqual(got, want) {
			t.Fatalf("round %d: %v, want %v", i, got, want)
		}
	}
	if got := f.rt.asked(); len(got) != 1 || got[0] != (runtime.LogOptions{Follow: true, Tail: 3}) {
		t.Fatalf("runtime asked for %+v", got)
	}
	// A line waits in the batch when the campaign is cancelled.
	s.line(t, "pending")
	f.c.Cancel("r")
	s.waitClosed(t)
	f.clk.Advance(flushAfter)
	f.c.wait()
	f.none()
	if err := func() error { _, err := s.w.Write([]byte("late\n")); return err }(); err == nil {
		t.Fatal("the source still accepts lines")
	}
	f.c.Cancel("r") // again: nothing happens
	f.c.Cancel("unknown")
}

// TestStopAll ends every campaign, as when the server goes away.
func TestStopAll(t *testing.T) {
	f := newFixture(t, 0)
	a, b := newStream(), newStream()
	f.add("a", a)
	f.add("b", b)
	f.c.Start(request("r1", &ankbase.LogsRequest{Follow: ptr(true)}, "a"))
	f.c.Start(request("r2", &ankbase.LogsRequest{Follow: ptr(true)}, "b"))
	a.line(t, "a1")
	b.line(t, "b1")
	got := map[string]bool{}
	for range 2 {
		for _, l := range entriesOf(t, f) {
			got[l] = true
		}
	}
	if !got["a1"] || !got["b1"] {
		t.Fatalf("before StopAll: %v", got)
	}
	f.c.StopAll()
	a.waitClosed(t)
	b.waitClosed(t)
	f.c.wait()
	f.none()
	// A new campaign after the server came back works.
	f.add("c", readerOf("c1\n"))
	f.c.Start(request("r3", nil, "c"))
	if entries, _ := f.collect("r3", "c"); !reflect.DeepEqual(entries["c"], []string{"c1"}) {
		t.Fatalf("after StopAll: %v", entries)
	}
}

// TestSameRequestID: a second request with the same id replaces the
// first campaign.
func TestSameRequestID(t *testing.T) {
	f := newFixture(t, 0)
	first := newStream()
	f.add("a", first)
	f.add("b", readerOf("b1\n"))
	f.c.Start(request("r", &ankbase.LogsRequest{Follow: ptr(true)}, "a"))
	f.c.Start(request("r", nil, "b"))
	first.waitClosed(t)
	if entries, _ := f.collect("r", "b"); !reflect.DeepEqual(entries["b"], []string{"b1"}) {
		t.Fatalf("second campaign: %v", entries)
	}
}

// TestBadTime: a since or until that is not RFC 3339 reaches the
// requester as the sources' only line, then each source stops; no
// runtime is asked.
func TestBadTime(t *testing.T) {
	f := newFixture(t, 0)
	f.add("a", newStream())
	f.c.Start(request("r", &ankbase.LogsRequest{Since: ptr("10m")}, "a", "unknown"))
	entries, stops := f.collect("r", "a", "unknown")
	for _, n := range []string{"a", "unknown"} {
		if len(entries[n]) != 1 || !strings.Contains(entries[n][0], "logsRequest.since: '10m' is not an RFC 3339 time") {
			t.Fatalf("%s: %v", n, entries[n])
		}
	}
	if !reflect.DeepEqual(stops, []string{"a", "unknown"}) {
		t.Fatalf("stops %v", stops)
	}
	if got := f.rt.asked(); len(got) != 0 {
		t.Fatalf("runtime asked %v", got)
	}
}

// TestSendFails: a campaign whose messages cannot be sent is dropped and
// its readers closed.
func TestSendFails(t *testing.T) {
	f := newFixture(t, 0)
	s := newStream()
	f.add("wl", s)
	f.mu.Lock()
	f.fail = errors.New("not connected")
	f.mu.Unlock()
	f.c.Start(request("r", &ankbase.LogsRequest{Follow: ptr(true)}, "wl"))
	s.line(t, "lost")
	f.clk.Advance(flushAfter)
	f.nextFlushingOrClosed(s)
	f.c.wait()
	f.mu.Lock()
	f.fail = nil
	f.mu.Unlock()
	f.none()
}
