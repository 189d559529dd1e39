package campaign

import (
	"errors"
	"testing"
	"time"

	"github.com/grapnel-io/grapnel/chaos/check"
	"github.com/grapnel-io/grapnel/chaos/intruder"
)

// The leader's commits during the flood: a commit index that advances
// every sample passes; one that stands still longer than stallBound, or
// no samples, is an accepted flood.
func TestCommitsDuring(t *testing.T) {
	t0 := time.Date(2026, 11, 28, 12, 0, 0, 0, time.UTC)
	win := intruder.Window{From: t0, To: t0.Add(5 * time.Second)}
	samples := func(stallFrom, stallTo int) []commitSample {
		var out []commitSample
		idx := uint64(100)
		for i := range 26 { // every 200 ms over 5 s
			if i <= stallFrom || i > stallTo {
				idx += 10
			}
			out = append(out, commitSample{at: t0.Add(time.Duration(i) * 200 * time.Millisecond), index: idx})
		}
		return out
	}
	for _, c := range []struct {
		name     string
		commits  []commitSample
		accepted bool
	}{
		{"steady", samples(-1, -1), false},
		{"a 1 s pause", samples(5, 10), false},
		{"a 3 s stall", samples(5, 20), true},
		{"no samples", nil, true},
	} {
		w := &watcher{commits: c.commits}
		if a := w.commitsDuring(win, "r1"); a.Accepted != c.accepted {
			t.Errorf("%s: accepted %v (%s), want %v", c.name, a.Accepted, a.Detail, c.accepted)
		}
	}
}

// The operator's reads during the dry-run: only those that overlap the
// window count; a slow or failed one, or none, is an accepted bomb.
func TestReadsDuring(t *testing.T) {
	t0 := time.Date(2026, 11, 28, 12, 0, 0, 0, time.UTC)
	win := intruder.Window{From: t0, To: t0.Add(time.Second)}
	fast := []readSample{{at: t0.Add(-time.Second), took: 5 * time.Second}, {at: t0.Add(100 * time.Millisecond), took: 3 * time.Millisecond},
		{at: t0.Add(3 * time.Second), took: 9 * time.Second}}
	for _, c := range []struct {
		name     string
		reads    []readSample
		accepted bool
	}{
		{"fast reads (slow ones outside the window)", fast[1:2], false},
		{"a slow read that began before", fast[:2], true},
		{"a failed read", []readSample{{at: t0, took: time.Millisecond, err: errors.New("no leader")}}, true},
		{"a read after the window", fast[2:], true},
		{"none", nil, true},
	} {
		w := &watcher{reads: c.reads}
		if a := w.readsDuring(win, "r1"); a.Accepted != c.accepted {
			t.Errorf("%s: accepted %v (%s), want %v", c.name, a.Accepted, a.Detail, c.accepted)
		}
	}
}

// The fault's detail carries the timed attacks' figures, the campaign's
// judgements and the controls.
func TestMeasured(t *testing.T) {
	attempts := []intruder.Attempt{{What: intruder.WhatDryRun, Detail: "7 workloads, refused after 1.2s: desiredState.workloads.intruder_bomb_05.runtimeConfig: rendering took more"},
		{What: intruder.WhatFlood, Detail: "128 connections (cap 64)"}, {What: intruder.WhatHeld, Detail: "64 closed after 5s"},
		{What: "Status without TLS", Detail: "EOF"}}
	judged := []intruder.Attempt{{Detail: "the leader committed 583 entries"}}
	got := measured(attempts, judged, []check.Control{{What: "r3 serves /metrics", Detail: "200 OK"}})
	want := "; dry-run: 7 workloads, refused after 1.2s; flood: 128 connections (cap 64); flood: 64 closed after 5s; the leader committed 583 entries; control: r3 serves /metrics: 200 OK"
	if got != want {
		t.Fatalf("got %q\nwant %q", got, want)
	}
	if measured(nil, nil, nil) != "" {
		t.Fatal("nothing measured gives a detail")
	}
}
