package server

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"

	"github.com/grapnel-io/grapnel/internal/errs"
)

// DefaultMaxConcurrentDryRuns is how many dry-runs a leader plans at once
// unless configured: one, so that on a 2-core vehicle computer one core
// stays for the leader loop and everything else.
const DefaultMaxConcurrentDryRuns = 1

// dryRunQueueFactor is how many dry-runs may wait for a place, per
// place; more are refused at once (errs.ErrBusy), so that a flood of
// dry-runs holds no more than this many requests in memory.
const dryRunQueueFactor = 4

// dryRunSlots bounds the dry-runs a leader plans at once: a dry-run runs
// off the leader loop (leader.startDryRun) but on the same computer, so
// each one planning is a core busy for up to the render budget. A call
// holds a place from before it is posted to the loop until its plan is
// made; a call that finds every place taken waits for one while its
// context allows, unless dryRunQueueFactor times as many wait already.
type dryRunSlots struct {
	places  chan struct{}
	waiting atomic.Int32
}

func newDryRunSlots(n int) dryRunSlots {
	if n <= 0 {
		n = DefaultMaxConcurrentDryRuns
	}
	return dryRunSlots{places: make(chan struct{}, n)}
}

// admitDryRun takes a place for a dry-run, waiting while ctx allows, and
// returns what frees it (safe to call more than once).
func (s *Server) admitDryRun(ctx context.Context) (release func(), err error) {
	d := &s.dryRuns
	release = sync.OnceFunc(func() { <-d.places })
	select {
	case d.places <- struct{}{}:
		return release, nil
	default:
	}
	n := cap(d.places)
	if d.waiting.Add(1) > int32(dryRunQueueFactor*n) {
		d.waiting.Add(-1)
		s.cfg.Metrics.RefusedDryRun()
		return nil, fmt.Errorf("%w: this leader plans %d dry-run(s) at once (max_concurrent_dry_runs) and %d more wait; try again shortly", errs.ErrBusy, n, dryRunQueueFactor*n)
	}
	defer d.waiting.Add(-1)
	select {
	case d.places <- struct{}{}:
		return release, nil
	case <-ctx.Done():
		return nil, ctx.Err()
	case <-s.shutdownCh:
		return nil, errs.ErrShuttingDown
	}
}
