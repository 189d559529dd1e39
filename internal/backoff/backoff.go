// Package backoff is the one formula for the waits between retries:
// exponential growth from a base to a cap (Exp), spread by jitter so that
// clients failing together do not come back in step (Equal, Full), and
// the wait itself on an injected clock (Sleep). Each caller keeps its own
// bounds and counts its own attempts.
//
// It is a leaf: it imports only internal/clock.
package backoff

import (
	"math/rand/v2"
	"time"

	"github.com/grapnel-io/grapnel/internal/clock"
)

// Exp is base·2ⁿ capped at limit, for the n-th retry counted from 0. A
// negative n is 0. It does not overflow, however large n.
func Exp(base, limit time.Duration, n int) time.Duration {
	d := base
	for i := 0; i < n && d < limit; i++ {
		if d > limit/2 {
			return limit // doubling would pass the cap, or overflow
		}
		d *= 2
	}
	return min(d, limit)
}

// Rand is a source of uniform numbers in [0, 1), as rand.Float64; tests
// pass a fixed one.
type Rand func() float64

func (r Rand) draw() float64 {
	if r == nil {
		return rand.Float64()
	}
	return r()
}

// Equal is "equal jitter": a wait uniform in [d/2, d), never much below
// the computed one.
func Equal(d time.Duration, r Rand) time.Duration {
	return d/2 + time.Duration(r.draw()*float64(d/2))
}

// Full is "full jitter": a wait uniform in [0, d), the widest spread (the
// AWS architecture blog's choice, and Ankaios' for create retries).
func Full(d time.Duration, r Rand) time.Duration {
	if d <= 0 {
		return 0
	}
	return time.Duration(r.draw() * float64(d))
}

// Sleep waits d on clk; false when done is closed first (a context's
// Done, a node's shutdown channel). A nil clk is the system clock.
func Sleep(clk clock.Clock, d time.Duration, done <-chan struct{}) bool {
	if clk == nil {
		clk = clock.Real()
	}
	t := clock.NewTimer(clk, d)
	defer t.Stop()
	select {
	case <-t.C:
		return true
	case <-done:
		return false
	}
}
