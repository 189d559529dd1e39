// Package ratelog writes log lines about things that may repeat without
// end (a workload flooding a cap, say) at most once a window per key, with
// the number of lines left out since the last one.
//
// It is a leaf package: it imports nothing of ours but internal/clock.
package ratelog

import (
	"context"
	"log/slog"
	"sync"
	"time"

	"github.com/grapnel-io/grapnel/internal/clock"
)

// DefaultWindow is the window the agent's and the server's refusals are
// logged with.
const DefaultWindow = 10 * time.Second

// maxKeys bounds the remembered keys; past it those quiet for a window
// are forgotten.
const maxKeys = 1024

// Limiter logs the first line of each key, then at most one per window.
// It is safe for concurrent use.
type Limiter struct {
	clock  clock.Clock
	window time.Duration

	mu   sync.Mutex // guards seen
	seen map[string]*count
}

type count struct {
	at         time.Time // when the last line was written
	suppressed int       // lines left out since
}

// New returns a limiter on c (nil: the real clock) with the window.
func New(c clock.Clock, window time.Duration) *Limiter {
	if c == nil {
		c = clock.Real()
	}
	return &Limiter{clock: c, window: window, seen: map[string]*count{}}
}

// Log writes msg at level unless a line of key was written within the
// window; a line that follows left-out ones has "suppressed" with their
// number.
func (l *Limiter) Log(log *slog.Logger, level slog.Level, key, msg string, args ...any) {
	ok, n := l.allow(key)
	if !ok {
		return
	}
	if n > 0 {
		args = append(args, "suppressed", n)
	}
	log.Log(context.Background(), level, msg, args...)
}

func (l *Limiter) allow(key string) (bool, int) {
	now := l.clock.Now()
	l.mu.Lock()
	defer l.mu.Unlock()
	c, ok := l.seen[key]
	if !ok {
		if len(l.seen) >= maxKeys {
			for k, c := range l.seen {
				if now.Sub(c.at) >= l.window {
					delete(l.seen, k)
				}
			}
		}
		l.seen[key] = &count{at: now}
		return true, 0
	}
	if now.Sub(c.at) < l.window {
		c.suppressed++
		return false, 0
	}
	n := c.suppressed
	c.at, c.suppressed = now, 0
	return true, n
}
