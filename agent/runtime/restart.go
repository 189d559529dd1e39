package runtime

import "context"

// Restarter is a Runtime that can start an instance that ended again in
// place. The Ankaios agent does so, at its start, for a container that
// exited successfully (`podman start`): the container keeps its writable
// layer across a power cycle. A runtime without it gets Create, which
// replaces what is left of the instance.
type Restarter interface {
	// StartAgain starts the ended instance id again for s and returns
	// its ID once it runs. On an error nothing of the instance is left
	// running, so that Create can replace it.
	StartAgain(ctx context.Context, id ID, s Spec) (ID, error)
}
