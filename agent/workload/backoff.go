package workload

import (
	"time"

	"github.com/grapnel-io/grapnel/internal/backoff"
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
func backoffCap(n int) time.Duration { return backoff.Exp(backoffBase, backoffMax, n) }

// fullJitter picks a wait uniformly in [0, limit).
func fullJitter(limit time.Duration) time.Duration { return backoff.Full(limit, nil) }
