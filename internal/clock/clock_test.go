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

func TestFakeChanTimerAndTicker(t *testing.T) {
	c := NewFake(time.Unix(0, 0))
	tm := NewTimer(c, time.Second)
	tk := NewTicker(c, 400*time.Millisecond)
	defer tk.Stop()
	recv := func(ch <-chan time.Time, what string) time.Time {
		t.Helper()
		select {
		case v := <-ch:
			return v
		case <-time.After(5 * time.Second):
			t.Fatalf("%s: nothing received", what)
			return time.Time{}
		}
	}
	c.Advance(400 * time.Millisecond)
	if got := recv(tk.C, "first tick"); !got.Equal(time.Unix(0, 400e6)) {
		t.Fatalf("tick at %v", got)
	}
	// The ticker re-arms in its callback: wait until it is pending again.
	for c.Pending() != 2 {
		time.Sleep(time.Millisecond)
	}
	c.Advance(600 * time.Millisecond)
	recv(tm.C, "timer")
	recv(tk.C, "second tick")
	if tm.Stop() {
		t.Fatal("Stop of a fired timer reported it pending")
	}
	if tm.Reset(time.Second) {
		t.Fatal("Reset of a stopped timer reported it pending")
	}
	if !tm.Stop() {
		t.Fatal("Stop of a reset timer did not report it pending")
	}
	c.Advance(2 * time.Second)
	select {
	case <-tm.C:
		t.Fatal("a stopped timer fired")
	case <-time.After(20 * time.Millisecond):
	}
	if d := Since(c, time.Unix(0, 0)); d != 3*time.Second {
		t.Fatalf("Since %v", d)
	}
	if d := Until(c, time.Unix(5, 0)); d != 2*time.Second {
		t.Fatalf("Until %v", d)
	}
}

func TestRealChanTimer(t *testing.T) {
	select {
	case <-After(Real(), time.Millisecond):
	case <-time.After(5 * time.Second):
		t.Fatal("real After did not fire")
	}
	tk := NewTicker(Real(), time.Millisecond)
	<-tk.C
	<-tk.C
	tk.Stop()
}
