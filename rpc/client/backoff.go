package client

import (
	"context"
	"time"

	"github.com/grapnel-io/grapnel/internal/backoff"
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

// leaderBackoff is a jittered exponential backoff. The zero value starts at
// backoffMin.
type leaderBackoff struct {
	n     int // delays given so far
	start time.Time
	clock clock.Clock // nil is the system clock; tests use a fake
}

func (b *leaderBackoff) clk() clock.Clock {
	if b.clock == nil {
		return clock.Real()
	}
	return b.clock
}

// delay returns the next wait: a random duration in [d/2, d] where d
// doubles from backoffMin up to the current cap, so that many clients that
// lost the same leader do not come back in step.
func (b *leaderBackoff) delay() time.Duration {
	now := b.clk().Now()
	if b.n == 0 {
		b.start = now
	}
	limit := backoffMax
	if now.Sub(b.start) < electionWindow {
		limit = electionCap
	}
	d := backoff.Exp(backoffMin, limit, b.n)
	b.n++
	return backoff.Equal(d, nil)
}

// wait sleeps for the next delay, or until ctx ends.
func (b *leaderBackoff) wait(ctx context.Context) error {
	if !backoff.Sleep(b.clk(), b.delay(), ctx.Done()) {
		return ctx.Err()
	}
	return nil
}
