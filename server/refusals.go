package server

import (
	"context"
	"log/slog"
	"net"
	"sync"
	"time"

	"google.golang.org/grpc/peer"

	"github.com/grapnel-io/grapnel/internal/clock"
)

// refusalLogWindow is how often a repeated refusal is logged at most: a
// client that retries at once (an upstream Ankaios agent retries every
// second, and a Grapnel agent once did thousands of times a second)
// would otherwise fill the log with one line per attempt.
const refusalLogWindow = 10 * time.Second

// refusalLogKeys bounds the remembered peer/reason pairs; beyond it the
// ones quiet for a window are forgotten.
const refusalLogKeys = 1024

// logLimiter logs the first line of each key, then at most one per window
// with the count of those left out since the line before.
type logLimiter struct {
	clock  clock.Clock
	window time.Duration

	mu   sync.Mutex // guards seen
	seen map[string]*logCount
}

type logCount struct {
	logged     time.Time // when the last line was written
	suppressed int       // lines left out since
}

func newLogLimiter(c clock.Clock, window time.Duration) *logLimiter {
	return &logLimiter{clock: c, window: window, seen: map[string]*logCount{}}
}

// allow says whether the line for key is written now and how many lines
// of the key were left out before it.
func (l *logLimiter) allow(key string) (bool, int) {
	now := l.clock.Now()
	l.mu.Lock()
	defer l.mu.Unlock()
	c, ok := l.seen[key]
	if !ok {
		if len(l.seen) >= refusalLogKeys {
			l.forgetLocked(now)
		}
		l.seen[key] = &logCount{logged: now}
		return true, 0
	}
	if now.Sub(c.logged) < l.window {
		c.suppressed++
		return false, 0
	}
	n := c.suppressed
	c.logged, c.suppressed = now, 0
	return true, n
}

// forgetLocked drops the keys not logged within the window.
func (l *logLimiter) forgetLocked(now time.Time) {
	for k, c := range l.seen {
		if now.Sub(c.logged) >= l.window {
			delete(l.seen, k)
		}
	}
}

// log writes msg at level unless a line for key was written within the
// window; a line after left-out ones says how many.
func (l *logLimiter) log(log *slog.Logger, level slog.Level, key, msg string, args ...any) {
	ok, n := l.allow(key)
	if !ok {
		return
	}
	if n > 0 {
		args = append(args, "suppressed", n)
	}
	log.Log(context.Background(), level, msg, args...)
}

// peerHost is the address a stream came from, without the port: a peer
// that reconnects over new connections stays one peer.
func peerHost(ctx context.Context) string {
	p, ok := peer.FromContext(ctx)
	if !ok || p.Addr == nil {
		return ""
	}
	if h, _, err := net.SplitHostPort(p.Addr.String()); err == nil {
		return h
	}
	return p.Addr.String()
}
