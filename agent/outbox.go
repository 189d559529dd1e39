package agent

import (
	"cmp"
	"slices"
	"strings"
	"sync"

	"github.com/grapnel-io/grapnel/state"
)

// outbox holds the agent's own state changes until a stream takes them:
// the newest state per instance, so that a long disconnection costs
// memory per instance, not per change. The Manager puts states in and is
// never blocked; a session's sender takes them out.
type outbox struct {
	mu      sync.Mutex
	pending map[state.InstanceName]state.WorkloadState
	// wake is signalled (coalescing) whenever something was put.
	wake chan struct{}
}

func newOutbox() *outbox {
	return &outbox{pending: map[state.InstanceName]state.WorkloadState{}, wake: make(chan struct{}, 1)}
}

// put keeps ws, replacing what is pending for the same instances.
func (o *outbox) put(ws []state.WorkloadState) {
	if len(ws) == 0 {
		return
	}
	o.mu.Lock()
	for _, w := range ws {
		o.pending[w.Instance] = w
	}
	o.mu.Unlock()
	o.signal()
}

// putMissing keeps the states of instances that have none pending: what
// is pending came from a later report. It takes back what a failed send
// took, and adds the Manager's current states after a reconnect.
func (o *outbox) putMissing(ws []state.WorkloadState) {
	o.mu.Lock()
	added := false
	for _, w := range ws {
		if _, ok := o.pending[w.Instance]; !ok {
			o.pending[w.Instance] = w
			added = true
		}
	}
	o.mu.Unlock()
	if added {
		o.signal()
	}
}

// take removes and returns everything pending, ordered by instance.
func (o *outbox) take() []state.WorkloadState {
	o.mu.Lock()
	defer o.mu.Unlock()
	if len(o.pending) == 0 {
		return nil
	}
	out := make([]state.WorkloadState, 0, len(o.pending))
	for _, w := range o.pending {
		out = append(out, w)
	}
	clear(o.pending)
	slices.SortFunc(out, func(a, b state.WorkloadState) int {
		return compareInstances(a.Instance, b.Instance)
	})
	return out
}

// size is the number of instances with a state pending.
func (o *outbox) size() int {
	o.mu.Lock()
	defer o.mu.Unlock()
	return len(o.pending)
}

func (o *outbox) signal() {
	select {
	case o.wake <- struct{}{}:
	default:
	}
}

func compareInstances(a, b state.InstanceName) int {
	return cmp.Or(strings.Compare(a.AgentName, b.AgentName), strings.Compare(a.WorkloadName, b.WorkloadName), strings.Compare(a.ID, b.ID))
}
