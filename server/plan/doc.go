// Package plan is the leader's planner: a pure function of the store and
// an update that validates the next desired state, renders what changed,
// diffs it against the store and returns the command to propose with
// what to tell the agents (Make), or, for a dry-run, describes all of it
// with every reason it would be refused (DryRun).
//
// It reads the store only and does no I/O: no clock (the time of the
// intent locks comes in Guard), no network, no goroutines, so that the
// leader loop, a dry-run on its own goroutine and a test plan the same
// update alike. internal/deps keeps it so. The server package owns the
// rest of an update: the update mask, sealing secret items, proposing
// and dispatching (docs/architecture.md, "The write path").
package plan
