package backoff

import (
	"math"
	"testing"
	"time"

	"github.com/grapnel-io/grapnel/internal/clock"
	"github.com/grapnel-io/grapnel/internal/testwait"
)

func TestExpDoublesUpToTheCap(t *testing.T) {
	for _, c := range []struct {
		n    int
		want time.Duration
	}{{-1, 100 * time.Millisecond}, {0, 100 * time.Millisecond}, {1, 200 * time.Millisecond}, {3, 800 * time.Millisecond},
		{5, 3200 * time.Millisecond}, {6, 5 * time.Second}, {math.MaxInt, 5 * time.Second}} {
		if got := Exp(100*time.Millisecond, 5*time.Second, c.n); got != c.want {
			t.Errorf("Exp(100ms, 5s, %d) = %v, want %v", c.n, got, c.want)
		}
	}
	// A cap near the largest duration does not overflow into a negative wait.
	if got := Exp(time.Second, math.MaxInt64, 100); got <= 0 {
		t.Fatalf("Exp overflowed: %v", got)
	}
}

func fixed(u float64) Rand { return func() float64 { return u } }

func TestJitterBounds(t *testing.T) {
	d := 10 * time.Second
	for _, c := range []struct {
		name string
		got  time.Duration
		want time.Duration
	}{
		{"equal at 0", Equal(d, fixed(0)), 5 * time.Second},
		{"equal at 0.5", Equal(d, fixed(0.5)), 7500 * time.Millisecond},
		{"full at 0", Full(d, fixed(0)), 0},
		{"full at 0.25", Full(d, fixed(0.25)), 2500 * time.Millisecond},
		{"full of nothing", Full(0, fixed(0.5)), 0},
	} {
		if c.got != c.want {
			t.Errorf("%s: %v, want %v", c.name, c.got, c.want)
		}
	}
	for range 1000 {
		if e := Equal(d, nil); e < d/2 || e >= d {
			t.Fatalf("Equal(%v) = %v, outside [d/2, d)", d, e)
		}
		if f := Full(d, nil); f < 0 || f >= d {
			t.Fatalf("Full(%v) = %v, outside [0, d)", d, f)
		}
	}
}

func TestSleepWaitsOnTheClock(t *testing.T) {
	clk := clock.NewFake(time.Unix(1000, 0))
	res := make(chan bool, 1)
	go func() { res <- Sleep(clk, time.Minute, nil) }()
	testwait.For(t, 10*time.Second, func() bool { return clk.Pending() == 1 }, "the sleep's timer")
	clk.Advance(time.Minute - time.Nanosecond)
	select {
	case <-res:
		t.Fatal("woke before the wait passed")
	default:
	}
	clk.Advance(time.Nanosecond)
	if !<-res {
		t.Fatal("Sleep reported done")
	}

	done := make(chan struct{})
	go func() { res <- Sleep(clk, time.Minute, done) }()
	testwait.For(t, 10*time.Second, func() bool { return clk.Pending() == 1 }, "the sleep's timer")
	close(done)
	if <-res {
		t.Fatal("Sleep did not report done")
	}
	testwait.For(t, 10*time.Second, func() bool { return clk.Pending() == 0 }, "the timer stopped")
}
