package controlif

import (
	"testing"
)

// TestLogBook follows campaigns through the answers a server may give.
func TestLogBook(t *testing.T) {
	b := newLogBook(2)
	if _, ok := b.admit("a"); !ok {
		t.Fatal("a refused")
	}
	if _, ok := b.admit("b"); !ok {
		t.Fatal("b refused")
	}
	if n, ok := b.admit("c"); ok || n != 2 {
		t.Fatalf("c: %d, %v", n, ok)
	}
	if _, ok := b.admit("a"); !ok {
		t.Fatal("the same id again is a replacement, not a new campaign")
	}
	// A stop may overtake the acceptance: a stops early, then is
	// accepted for itself and one more.
	for _, r := range []struct {
		answer   func() bool
		wantOpen int
	}{
		{func() bool { return b.answer("a", stopped("a", "x")) }, 2},
		{func() bool { return b.answer("a", acceptedAnswer("a", "x", "y")) }, 2},
		{func() bool { return b.answer("a", logEntries("a", 3)) }, 2},
		{func() bool { return b.answer("a", stopped("a", "y")) }, 1},
		// Accepted for nothing: over at once.
		{func() bool { return b.answer("b", acceptedAnswer("b")) }, 0},
		{func() bool { return b.answer("unknown", logEntries("unknown", 3)) }, 0},
	} {
		if !r.answer() {
			t.Fatal("an answer of a workload's campaign was not for it")
		}
		if got := b.size(); got != r.wantOpen {
			t.Fatalf("%d open, want %d", got, r.wantOpen)
		}
	}
	// Cancelled by the agent: everything until the answer to the cancel
	// is the agent's.
	b.admit("c")
	b.admit("d")
	if ids := b.cancelAll(); len(ids) != 2 || ids[0] != "c" || ids[1] != "d" {
		t.Fatalf("cancelled %v", ids)
	}
	if b.answer("c", logEntries("c", 3)) || b.answer("c", cancelAccepted("c")) || b.answer("d", errorAnswer("d", "refused")) {
		t.Fatal("an answer to the agent's cancel reached the workload")
	}
	if !b.answer("c", acceptedAnswer("c", "x")) {
		t.Fatal("after the cancel's answer, c is the workload's again")
	}
	if b.knows("c") || b.knows("d") {
		t.Fatal("c and d are forgotten")
	}
}
