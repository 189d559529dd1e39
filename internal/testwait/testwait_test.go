package testwait

import (
	"fmt"
	"strings"
	"sync/atomic"
	"testing"
	"time"
)

func TestForReturnsOnceTheConditionHolds(t *testing.T) {
	var n atomic.Int32
	For(t, 10*time.Second, func() bool { return n.Add(1) >= 3 }, "three looks")
	if n.Load() != 3 {
		t.Fatalf("looked %d times", n.Load())
	}
}

// recorder is a testing.TB that records Fatalf instead of stopping.
type recorder struct {
	testing.TB
	msg string
}

func (r *recorder) Helper() {}

func (r *recorder) Fatalf(format string, args ...any) { r.msg = fmt.Sprintf(format, args...) }

func TestForFailsAfterTheBound(t *testing.T) {
	r := &recorder{TB: t}
	late := "set late"
	desc := "early"
	stop := false
	For(r, 20*time.Millisecond, func() bool { desc = late; return stop }, "%s %v", "x", Lazy(func() string { stop = true; return desc }))
	if want := "timed out after 20ms waiting for x set late"; r.msg != want {
		t.Fatalf("message %q, want %q", r.msg, want)
	}
}

func TestHoldsLooksUntilTheEnd(t *testing.T) {
	var n atomic.Int32
	start := time.Now()
	Holds(t, 50*time.Millisecond, func() bool { n.Add(1); return true }, "always")
	if el := time.Since(start); el < 50*time.Millisecond {
		t.Fatalf("returned after %v, before the 50ms", el)
	}
	if n.Load() < 2 {
		t.Fatalf("looked %d times", n.Load())
	}
}

func TestHoldsFailsWhenTheConditionStops(t *testing.T) {
	r := &recorder{TB: t}
	var n atomic.Int32
	start := time.Now()
	Holds(r, 10*time.Second, func() bool { return n.Add(1) < 3 }, "the %s", "leader")
	if !strings.HasPrefix(r.msg, "the leader stopped holding after ") {
		t.Fatalf("message %q", r.msg)
	}
	if n.Load() != 3 || time.Since(start) > 5*time.Second {
		t.Fatalf("looked %d times in %v; want it to stop at the third", n.Load(), time.Since(start))
	}
}

func TestUntilSaysWhetherTheConditionHeld(t *testing.T) {
	var n atomic.Int32
	if !Until(10*time.Second, func() bool { return n.Add(1) >= 3 }) || n.Load() != 3 {
		t.Fatalf("Until returned early or late: %d looks", n.Load())
	}
	start := time.Now()
	if Until(20*time.Millisecond, func() bool { return false }) {
		t.Fatal("Until reported a condition that never held")
	}
	if el := time.Since(start); el < 20*time.Millisecond {
		t.Fatalf("gave up after %v, before the bound", el)
	}
}
