package server

import (
	"github.com/grapnel-io/grapnel/internal/errs"
	"github.com/grapnel-io/grapnel/state"
)

// guard is what an update is checked against besides its content
// (docs/locks.md): who asks, for the intent locks, at what time by the
// leader's clock, and the revision the caller expects, if it gave one,
// with the masks that scope it.
type guard struct {
	// owner is the requester's lock owner: its certificate's name, or
	// the name it declared; empty for agents and unnamed clients, which
	// hold no lock.
	owner string
	// keyed: owners are role/name keys (state.Store.KeyedOwners).
	keyed bool
	nowMs int64
	// expected is the revision the caller last read; nil checks none.
	expected *uint64
	masks    []string
}

// checkRevision refuses an update at an expected revision when an object
// its masks address changed after it in the store (errs.ErrRevisionConflict).
// It reads the store only.
func checkRevision(st *state.Store, g guard) error {
	if g.expected == nil {
		return nil
	}
	return errs.Classify(errs.ErrRevisionConflict, st.Revs.CheckExpected(*g.expected, st.DesiredSeq, state.ScopeOfMasks(g.masks)))
}

// touchedObjects are the objects a plan changes: the workloads whose spec
// changes, that are deleted or rendered again (a config item they use
// changed: they would restart), and the config items it changes.
func touchedObjects(p *updatePlan) []string {
	out := make([]string, 0, len(p.changedWl)+len(p.update.PutRendered)+len(p.changedCf))
	for _, n := range p.changedWl {
		out = append(out, state.WorkloadObject(n))
	}
	for n := range p.update.PutRendered {
		out = append(out, state.WorkloadObject(n))
	}
	for _, k := range p.changedCf {
		out = append(out, state.ConfigObject(k))
	}
	return out
}

// checkLocks refuses a plan that changes an object another owner holds an
// intent lock on at g.nowMs (errs.ErrLocked, "locked by OWNER until TIME
// (reason)"). A pure function of the locks, the plan, the owner and the
// time.
func checkLocks(locks state.Locks, p *updatePlan, g guard) error {
	if len(locks) == 0 || !p.changed {
		return nil
	}
	return errs.Classify(errs.ErrLocked, state.CheckLocks(locks, touchedObjects(p), g.owner, g.nowMs, g.keyed))
}
