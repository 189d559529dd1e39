package agent

import (
	"cmp"
	"slices"
	"strings"
	"sync"

	"github.com/grapnel-io/grapnel/state"
)

// outbox holds the agent's own state changes until a stream takes them:
// per instance the newest state of its current life, after the states
// that ended its earlier lives (state.Conflate), so that a long
// disconnection costs memory per instance, not per change, and a Removed
// is never overwritten by the next life's Pending. The Manager puts
// states in and is never blocked; a session's sender takes them out.
type outbox struct {
	mu      sync.Mutex
	pending map[state.InstanceName][]state.ExecutionState
	// wake is signalled (coalescing) whenever something was put.
	wake chan struct{}
}

func newOutbox() *outbox {
	return &outbox{pending: map[state.InstanceName][]state.ExecutionState{}, wake: make(chan struct{}, 1)}
}

// put adds ws after what is pending for the same instances.
func (o *outbox) put(ws []state.WorkloadState) {
	if len(ws) == 0 {
		return
	}
	o.mu.Lock()
	for _, w := range ws {
		o.pending[w.Instance] = state.Conflate(o.pending[w.Instance], w.State, 0)
	}
	o.mu.Unlock()
	o.signal()
}

// putBack returns what a failed send took: it goes ahead of what was put
// since, which is newer.
func (o *outbox) putBack(ws []state.WorkloadState) {
	if len(ws) == 0 {
		return
	}
	o.mu.Lock()
	older := map[state.InstanceName][]state.ExecutionState{}
	for _, w := range ws {
		older[w.Instance] = append(older[w.Instance], w.State)
	}
	for in, q := range older {
		o.pending[in] = state.ConflateAll(q, o.pending[in], 0)
	}
	o.mu.Unlock()
	o.signal()
}

// putMissing keeps the states of instances that have none pending: what
// is pending came from a later report. It adds the Manager's current
// states after a reconnect.
func (o *outbox) putMissing(ws []state.WorkloadState) {
	o.mu.Lock()
	added := false
	for _, w := range ws {
		if _, ok := o.pending[w.Instance]; !ok {
			o.pending[w.Instance] = []state.ExecutionState{w.State}
			added = true
		}
	}
	o.mu.Unlock()
	if added {
		o.signal()
	}
}

// take removes and returns everything pending, ordered by instance and,
// within an instance, in the order the states were put.
func (o *outbox) take() []state.WorkloadState {
	o.mu.Lock()
	defer o.mu.Unlock()
	if len(o.pending) == 0 {
		return nil
	}
	ins := make([]state.InstanceName, 0, len(o.pending))
	n := 0
	for in, q := range o.pending {
		ins = append(ins, in)
		n += len(q)
	}
	slices.SortFunc(ins, compareInstances)
	out := make([]state.WorkloadState, 0, n)
	for _, in := range ins {
		for _, s := range o.pending[in] {
			out = append(out, state.WorkloadState{Instance: in, State: s})
		}
	}
	clear(o.pending)
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
