package testwait

import (
	"fmt"
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
