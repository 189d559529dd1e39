package runtime

import "context"

// Watcher is a Runtime that can tell when the state of an instance may
// have changed, so that a control loop sleeps until then instead of
// calling State every poll interval: an idle vehicle should not pay for
// asking, twice a second, whether each of its workloads still runs.
type Watcher interface {
	// Watch arms a watch on the instance. The channel is closed once the
	// state may have changed since Watch was called: the caller calls
	// State after Watch, so that no change falls between the two. A nil
	// channel says that nothing the runtime could see will change the
	// state (the instance has ended, or is gone); only a slow backstop
	// poll is then worth it. An error says the runtime cannot watch this
	// instance now (a state in passing, no pidfd on this kernel): the
	// caller polls. The watch, and whatever it holds, ends with ctx.
	Watch(ctx context.Context, id ID) (<-chan struct{}, error)
}
