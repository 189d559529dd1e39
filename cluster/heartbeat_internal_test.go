package cluster

import (
	"sync/atomic"
	"testing"
	"time"

	"github.com/grapnel-io/grapnel/internal/clock"
	"github.com/grapnel-io/grapnel/internal/testwait"
)

// The pacer beats once per interval of its clock, not before, and ends
// when told to.
func TestPaceBeatsOncePerInterval(t *testing.T) {
	clk := clock.NewFake(time.Unix(0, 0))
	var beats atomic.Int32
	stop, shutdown, done := make(chan struct{}), make(chan struct{}), make(chan struct{})
	const interval = 75 * time.Millisecond
	go func() {
		defer close(done)
		pace(clk, interval, func() { beats.Add(1) }, stop, shutdown)
	}()
	testwait.For(t, 5*time.Second, func() bool { return clk.PendingFor(interval) == 1 }, "the pacer's timer")
	clk.Advance(interval - time.Millisecond)
	if n := beats.Load(); n != 0 {
		t.Fatalf("%d beats before the first interval ended", n)
	}
	for want := int32(1); want <= 3; want++ {
		clk.Advance(time.Millisecond)
		testwait.For(t, 5*time.Second, func() bool { return beats.Load() == want }, "a beat per interval")
		testwait.For(t, 5*time.Second, func() bool { return clk.PendingFor(interval) == 1 }, "the next interval's timer")
		clk.Advance(interval - time.Millisecond)
	}
	close(stop)
	select {
	case <-done:
	case <-time.After(5 * time.Second):
		t.Fatal("the pacer did not stop")
	}
	if n := beats.Load(); n != 3 {
		t.Fatalf("%d beats after three intervals", n)
	}
}
