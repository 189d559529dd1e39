package clock

import (
	"sync"
	"time"
)

// The channel forms of the standard library's timers, built on a Clock's
// AfterFunc so that a Fake drives them as it drives AfterFunc. They keep
// the semantics of Go 1.23 timers: after Stop or Reset returns, no value
// from the old deadline is received.

// ChanTimer is a one-shot timer that sends the time on C, as time.Timer.
type ChanTimer struct {
	C <-chan time.Time

	c  Clock
	ch chan time.Time
	// mu guards t and gen.
	mu  sync.Mutex
	t   Timer
	gen uint64 // bumped by Stop and Reset; a firing of an older one is dropped
}

// NewTimer sends the time on the returned timer's C once d has passed on c.
func NewTimer(c Clock, d time.Duration) *ChanTimer {
	ch := make(chan time.Time, 1)
	t := &ChanTimer{C: ch, c: c, ch: ch}
	t.mu.Lock()
	t.armLocked(d)
	t.mu.Unlock()
	return t
}

func (t *ChanTimer) armLocked(d time.Duration) {
	gen := t.gen
	t.t = t.c.AfterFunc(d, func() {
		t.mu.Lock()
		defer t.mu.Unlock()
		if t.gen != gen {
			return
		}
		t.t = nil
		select {
		case t.ch <- t.c.Now():
		default:
		}
	})
}

// stopLocked cancels the pending firing and drops a value not yet received.
func (t *ChanTimer) stopLocked() bool {
	t.gen++
	active := t.t != nil && t.t.Stop()
	t.t = nil
	select {
	case <-t.ch:
	default:
	}
	return active
}

// Stop prevents the timer from firing; it reports whether it was pending.
func (t *ChanTimer) Stop() bool {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.stopLocked()
}

// Reset makes the timer fire d from now; it reports whether it was pending.
func (t *ChanTimer) Reset(d time.Duration) bool {
	t.mu.Lock()
	defer t.mu.Unlock()
	active := t.stopLocked()
	t.armLocked(d)
	return active
}

// After sends the time on the returned channel once d has passed on c.
// Its timer stays pending until then, and a Fake counts it: where another
// case of a select usually wins, take NewTimer and Stop it.
func After(c Clock, d time.Duration) <-chan time.Time { return NewTimer(c, d).C }

// Ticker sends the time on C every period, as time.Ticker: a tick the
// receiver is not ready for is dropped. The next tick is armed when one
// fires, so a period counts from the firing: a late firing (a busy
// machine, or a Fake advanced past several periods at once) delays the
// ticks after it rather than bunching them up.
type Ticker struct {
	C <-chan time.Time

	c  Clock
	ch chan time.Time
	// mu guards t, d and gen.
	mu  sync.Mutex
	t   Timer
	d   time.Duration
	gen uint64
}

// NewTicker ticks every d on c; d must be positive.
func NewTicker(c Clock, d time.Duration) *Ticker {
	if d <= 0 {
		panic("clock: non-positive interval for NewTicker")
	}
	ch := make(chan time.Time, 1)
	t := &Ticker{C: ch, c: c, ch: ch, d: d}
	t.mu.Lock()
	t.armLocked()
	t.mu.Unlock()
	return t
}

func (t *Ticker) armLocked() {
	gen := t.gen
	t.t = t.c.AfterFunc(t.d, func() {
		t.mu.Lock()
		defer t.mu.Unlock()
		if t.gen != gen {
			return
		}
		select {
		case t.ch <- t.c.Now():
		default:
		}
		t.armLocked()
	})
}

// Stop turns the ticker off; no tick is received after it returns.
func (t *Ticker) Stop() {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.gen++
	if t.t != nil {
		t.t.Stop()
		t.t = nil
	}
	select {
	case <-t.ch:
	default:
	}
}

// Reset stops the ticker and restarts it with period d.
func (t *Ticker) Reset(d time.Duration) {
	if d <= 0 {
		panic("clock: non-positive interval for Ticker.Reset")
	}
	t.Stop()
	t.mu.Lock()
	defer t.mu.Unlock()
	t.d = d
	t.armLocked()
}

// Since is the time elapsed on c since t.
func Since(c Clock, t time.Time) time.Duration { return c.Now().Sub(t) }

// Until is the time on c until t.
func Until(c Clock, t time.Time) time.Duration { return t.Sub(c.Now()) }

// Sleep pauses the calling goroutine until d has passed on c.
func Sleep(c Clock, d time.Duration) { <-After(c, d) }
