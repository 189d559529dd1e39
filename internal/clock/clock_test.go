package clock

import (
	"sync"
	"testing"
	"time"
)

func TestFakeFiresOnAdvance(t *testing.T) {
	start := time.Unix(1000, 0)
	c := NewFake(start)
	var (
		mu    sync.Mutex
		fired []string
		wg    sync.WaitGroup
	)
	add := func(name string, d time.Duration) Timer {
		wg.Add(1)
		return c.AfterFunc(d, func() {
			defer wg.Done()
			mu.Lock()
			fired = append(fired, name)
			mu.Unlock()
		})
	}
	add("late", 3*time.Second)
	add("early", time.Second)
	stopped := add("stopped", 2*time.Second)
	if !stopped.Stop() || stopped.Stop() {
		t.Fatal("Stop should succeed once")
	}
	wg.Done() // the stopped timer never runs
	if c.Pending() != 2 {
		t.Fatalf("pending %d", c.Pending())
	}
	c.Advance(time.Second)
	c.Advance(1500 * time.Millisecond)
	if c.Pending() != 1 {
		t.Fatalf("pending after 2.5 s: %d", c.Pending())
	}
	c.Advance(time.Second)
	wg.Wait()
	if len(fired) != 2 || c.Pending() != 0 {
		t.Fatalf("fired %v", fired)
	}
	if got := c.Now(); !got.Equal(start.Add(3500 * time.Millisecond)) {
		t.Fatalf("now %v", got)
	}
}

func TestRealClockFires(t *testing.T) {
	done := make(chan struct{})
	Real().AfterFunc(time.Millisecond, func() { close(done) })
	select {
	case <-done:
	case <-time.After(5 * time.Second):
		t.Fatal("real timer did not fire")
	}
	if Real().Now().IsZero() {
		t.Fatal("zero time")
	}
}
