package podman

import (
	"context"
	"sync"
	"time"

	"github.com/grapnel-io/grapnel/internal/clock"
)

// stateMaxAge is how old a `podman ps` answer may be to serve State, as
// in Ankaios (one `podman ps --all` a second however many workloads are
// polled). Create and Delete make older answers stale at once.
const stateMaxAge = time.Second

// psCache shares `podman ps --all` between the pollers of every instance:
// one podman call costs tens of milliseconds of CPU, and every instance
// is polled twice a second.
type psCache struct {
	fetch func(context.Context) ([]container, error)
	clock clock.Clock // dates the calls; nil is the system clock

	mu sync.Mutex
	// The following fields are guarded by mu.
	snap    *snapshot  // newest successful answer; nil before the first
	running *fetchCall // the call under way; nil when none
	floor   time.Time  // answers from calls started before floor are stale
}

// snapshot is one answer of `podman ps --all`.
type snapshot struct {
	at   time.Time // when the call that produced it started
	byID map[string]container
}

// fetchCall is one `podman ps --all` under way; done is closed when snap
// or err is set.
type fetchCall struct {
	started time.Time
	done    chan struct{}
	snap    *snapshot
	err     error
}

// clk is the cache's clock, or the system clock.
func (c *psCache) clk() clock.Clock {
	if c.clock == nil {
		return clock.Real()
	}
	return c.clock
}

// invalidate makes every answer from a call started before now stale:
// the caller just created or removed a container.
func (c *psCache) invalidate() {
	c.mu.Lock()
	c.floor = c.clk().Now()
	c.mu.Unlock()
}

// get returns an answer from a call that started at or after notBefore,
// joining a call under way when it is recent enough. The call itself runs
// in its own goroutine, bounded by callTimeout, so that a caller whose
// ctx ends stops waiting without failing the others.
func (c *psCache) get(ctx context.Context, notBefore time.Time) (*snapshot, error) {
	for {
		if err := ctx.Err(); err != nil {
			return nil, err
		}
		c.mu.Lock()
		if c.floor.After(notBefore) {
			notBefore = c.floor
		}
		if s := c.snap; s != nil && !s.at.Before(notBefore) {
			c.mu.Unlock()
			return s, nil
		}
		f := c.running
		if f == nil {
			f = &fetchCall{started: c.clk().Now(), done: make(chan struct{})}
			c.running = f
			go c.run(f)
		}
		c.mu.Unlock()

		select {
		case <-f.done:
		case <-ctx.Done():
			return nil, ctx.Err()
		}
		if !f.started.Before(notBefore) {
			return f.snap, f.err
		}
		// That call started too early to answer us: start the next one.
	}
}

func (c *psCache) run(f *fetchCall) {
	ctx := context.Background()
	cs, err := c.fetch(ctx)
	if err != nil {
		// podman ps fails now and then under load; Ankaios retries once.
		cs, err = c.fetch(ctx)
	}
	if err == nil {
		s := &snapshot{at: f.started, byID: make(map[string]container, len(cs))}
		for _, ct := range cs {
			s.byID[ct.ID] = ct
		}
		f.snap = s
	}
	f.err = err

	c.mu.Lock()
	if f.snap != nil && (c.snap == nil || c.snap.at.Before(f.started)) {
		c.snap = f.snap
	}
	c.running = nil
	c.mu.Unlock()
	close(f.done)
}
