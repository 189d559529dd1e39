package client

import (
	"context"
	"math/rand/v2"
	"time"

	"github.com/grapnel-io/grapnel/internal/clock"
)

// Backoff bounds between attempts while no leader is known. An election
// on the vehicle timing ends within about a second, so during the first
// electionWindow the wait stays at most electionCap and a new leader is
// found within a quarter second of its election; after that the replicas
// have probably lost their quorum and the wait grows to backoffMax so as
// not to hammer them.
const (
	backoffMin     = 50 * time.Millisecond
	electionCap    = 100 * time.Millisecond
	electionWindow = 3 * time.Second
	backoffMax     = 2 * time.Second
)

// backoff is a jittered exponential backoff. The zero value starts at
// backoffMin.
type backoff struct {
	next  time.Duration
	start time.Time
	clock clock.Clock // nil is the system clock; tests use a fake
}

func (b *backoff) clk() clock.Clock {
	if b.clock == nil {
		return clock.Real()
	}
	return b.clock
}

// delay returns the next wait: a random duration in [d/2, d] where d
// doubles from backoffMin up to the current cap, so that many clients that
// lost the same leader do not come back in step.
func (b *backoff) delay() time.Duration {
	now := b.clk().Now()
	if b.next == 0 {
		b.next = backoffMin
		b.start = now
	}
	limit := backoffMax
	if now.Sub(b.start) < electionWindow {
		limit = electionCap
	}
	d := min(b.next, limit)
	b.next = min(2*b.next, backoffMax)
	return d/2 + rand.N(d/2+1)
}

// wait sleeps for the next delay, or until ctx ends.
func (b *backoff) wait(ctx context.Context) error {
	t := clock.NewTimer(b.clk(), b.delay())
	defer t.Stop()
	select {
	case <-t.C:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}
