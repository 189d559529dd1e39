package workload

import (
	"math/rand/v2"
	"time"
)

// Create retry backoff as in Ankaios: 500 ms × 2^n, capped at 300 s, with
// full jitter (a uniform pick between zero and the cap).
//
// swdd~agent-decision-exponential-backoff-with-jitter-workload-creation-retry~1
const (
	backoffBase = 500 * time.Millisecond
	backoffMax  = 300 * time.Second
)

// backoffCap is the longest wait before retry n (n counts from 0).
func backoffCap(n int) time.Duration {
	d := backoffBase
	for i := 0; i < n && d < backoffMax; i++ {
		d *= 2
	}
	return min(d, backoffMax)
}

// fullJitter picks a wait uniformly in [0, limit].
func fullJitter(limit time.Duration) time.Duration {
	if limit <= 0 {
		return 0
	}
	return time.Duration(rand.Int64N(int64(limit) + 1))
}
