package state

// MaxStatesPerInstance bounds the states a conflating queue keeps for one
// instance: the ended lives plus the newest state. A queue that waits for
// a long disconnection then costs memory per instance, not per change.
const MaxStatesPerInstance = 8

// EndsLife reports whether the state ends one life of an instance: it is
// gone (Removed) or its process ended (Succeeded, Failed). When the same
// instance name starts again before the state was sent, a conflating
// queue must still deliver it: `ank`'s wait list, Grapnel's CLI and the
// events end a deletion on Removed, and an operator must see the exit
// that caused a restart.
func (e ExecutionState) EndsLife() bool {
	switch e.State {
	case StateRemoved, StateSucceeded, StateFailed:
		return true
	}
	return false
}

// Conflate adds next to the states pending for one instance and returns
// the queue. Within one life only the newest state is kept: a pending
// state that does not end a life is replaced. A state that ends a life
// stays, in order, ahead of the next life's states. Past max states
// (MaxStatesPerInstance when < 2) the oldest ended life that is not a
// Removed is dropped first, then the oldest Removed; the newest state is
// never dropped.
func Conflate(q []ExecutionState, next ExecutionState, max int) []ExecutionState {
	if max < 2 {
		max = MaxStatesPerInstance
	}
	if n := len(q); n > 0 && !q[n-1].EndsLife() {
		q[n-1] = next
		return q
	}
	q = append(q, next)
	if len(q) <= max {
		return q
	}
	drop := 0
	for i := 0; i < len(q)-1; i++ {
		if !q[i].IsRemoved() {
			drop = i
			break
		}
	}
	return append(q[:drop], q[drop+1:]...)
}

// ConflateAll adds each of next in order (see Conflate).
func ConflateAll(q []ExecutionState, next []ExecutionState, max int) []ExecutionState {
	for _, s := range next {
		q = Conflate(q, s, max)
	}
	return q
}
