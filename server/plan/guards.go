package plan

import (
	"github.com/grapnel-io/grapnel/internal/errs"
	"github.com/grapnel-io/grapnel/state"
)

// Guard is what an update is checked against besides its content
// (docs/locks.md): who asks, for the intent locks, at what time by the
// leader's clock, and the revision the caller expects, if it gave one,
// with the masks that scope it.
type Guard struct {
	// Owner is the requester's lock owner: its certificate's name, or
	// the name it declared; empty for agents and unnamed clients, which
	// hold no lock.
	Owner string
	// Keyed: owners are role/name keys (state.Store.KeyedOwners).
	Keyed bool
	NowMs int64
	// Expected is the revision the caller last read; nil checks none.
	Expected *uint64
	Masks    []string
}

// CheckRevision refuses an update at an expected revision when an object
// its masks address changed after it in the store (errs.ErrRevisionConflict).
// It reads the store only.
func CheckRevision(st *state.Store, g Guard) error {
	if g.Expected == nil {
		return nil
	}
	return errs.Classify(errs.ErrRevisionConflict, st.Revs.CheckExpected(*g.Expected, st.DesiredSeq, state.ScopeOfMasks(g.Masks)))
}

// touchedObjects are the objects a plan changes: the workloads whose spec
// changes, that are deleted or rendered again (a config item they use
// changed: they would restart), and the config items it changes.
func touchedObjects(p *Plan) []string {
	out := make([]string, 0, len(p.ChangedWorkloads)+len(p.Update.PutRendered)+len(p.ChangedConfigs))
	for _, n := range p.ChangedWorkloads {
		out = append(out, state.WorkloadObject(n))
	}
	for n := range p.Update.PutRendered {
		out = append(out, state.WorkloadObject(n))
	}
	for _, k := range p.ChangedConfigs {
		out = append(out, state.ConfigObject(k))
	}
	return out
}

// CheckLocks refuses a plan that changes an object another owner holds an
// intent lock on at g.NowMs (errs.ErrLocked, "locked by OWNER until TIME
// (reason)"). A pure function of the locks, the plan, the owner and the
// time.
func CheckLocks(locks state.Locks, p *Plan, g Guard) error {
	if len(locks) == 0 || !p.Changed {
		return nil
	}
	return errs.Classify(errs.ErrLocked, state.CheckLocks(locks, touchedObjects(p), g.Owner, g.NowMs, g.Keyed))
}
