package logs

import (
	"log/slog"
	"sync"
	"time"

	"github.com/grapnel-io/grapnel/internal/clock"
)

// refusalLog logs the first refusal of a kind, then at most one a window
// with the count of those left out, so that a flood of requests past a
// cap does not flood the agent's log too.
type refusalLog struct {
	clock  clock.Clock
	window time.Duration

	mu   sync.Mutex
	last map[string]refusalCount // by kind; a handful of kinds
}

type refusalCount struct {
	at         time.Time
	suppressed int
}

func (r *refusalLog) log(log *slog.Logger, kind, msg string, args ...any) {
	now := r.clock.Now()
	r.mu.Lock()
	c, seen := r.last[kind]
	if seen && now.Sub(c.at) < r.window {
		c.suppressed++
		r.last[kind] = c
		r.mu.Unlock()
		return
	}
	r.last[kind] = refusalCount{at: now}
	r.mu.Unlock()
	if c.suppressed > 0 {
		args = append(args, "suppressed", c.suppressed)
	}
	log.Warn(msg, args...)
}
