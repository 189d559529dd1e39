package workload

import (
	"sync"

	"github.com/grapnel-io/grapnel/state"
)

// reporter hands states to Config.Report from its own goroutine, in the
// order they were queued, batching whatever piled up while Report ran.
// Loops queue under the Manager's lock; Report itself never runs under it.
type reporter struct {
	fn   func([]state.WorkloadState)
	kick chan struct{} // capacity 1: something was queued
	stop chan struct{} // closed by close
	done chan struct{} // closed when run returns

	mu      sync.Mutex // guards pending
	pending []state.WorkloadState
}

func newReporter(fn func([]state.WorkloadState)) *reporter {
	r := &reporter{
		fn:   fn,
		kick: make(chan struct{}, 1),
		stop: make(chan struct{}),
		done: make(chan struct{}),
	}
	go r.run()
	return r
}

func (r *reporter) push(ws state.WorkloadState) {
	r.mu.Lock()
	r.pending = append(r.pending, ws)
	r.mu.Unlock()
	select {
	case r.kick <- struct{}{}:
	default:
	}
}

func (r *reporter) run() {
	defer close(r.done)
	for {
		select {
		case <-r.kick:
			r.flush()
		case <-r.stop:
			r.flush()
			return
		}
	}
}

func (r *reporter) flush() {
	r.mu.Lock()
	batch := r.pending
	r.pending = nil
	r.mu.Unlock()
	if len(batch) > 0 && r.fn != nil {
		r.fn(batch)
	}
}

// close delivers what is queued and returns once Report will not be called
// again.
func (r *reporter) close() {
	close(r.stop)
	<-r.done
}
