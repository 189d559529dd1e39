package server

import (
	"fmt"

	"github.com/grapnel-io/grapnel/fsm"
	"github.com/grapnel-io/grapnel/state"
)

// projected is the leader's speculative state: the committed store plus
// every entry proposed and not yet settled. Updates are planned against
// it, so that one need not wait for the commits before it. It is owned by
// the leader loop.
type projected struct {
	store *state.Store
	// restores is the FSM restore count store was cloned from.
	restores uint64
	// broken is set when an entry failed or the FSM was restored: store
	// no longer predicts the FSM, so no new work is taken until the
	// pipeline has drained and store is reloaded. failed tells the
	// answers of the refused entries that follow a failure why they
	// failed.
	broken, failed bool
	// resync is set when a restore replaced the store under the agents:
	// they are disconnected and given the grace to come back.
	resync bool
}

// stale reports whether the store stopped predicting the FSM: no new
// work is planned on it until the pipeline drains and it is reloaded.
func (pr *projected) stale() bool { return pr.broken }

// reload clones the FSM's store and clears the flags. It reports whether
// the agents must be resynchronised: the FSM was restored from a
// snapshot since the last reload, so they hold workloads of a state that
// is gone.
func (pr *projected) reload(f *fsm.FSM) (resync bool) {
	first := pr.store == nil
	var restores uint64
	f.ReadMeta(func(st *state.Store, m fsm.Meta) {
		pr.store = st.CloneWithoutHistory()
		restores = m.Restores
	})
	resync = pr.resync || !first && restores != pr.restores
	pr.restores = restores
	pr.broken, pr.failed, pr.resync = false, false, false
	return resync
}

// markRestored reacts to a snapshot restore, given the FSM's restore
// count: the store is stale until the pipeline drains and it is
// reloaded, and then the agents are resynchronised. It reports whether
// the count was new.
func (pr *projected) markRestored(restores uint64) bool {
	if restores == pr.restores {
		return false
	}
	pr.broken, pr.resync = true, true
	return true
}

// markFailed records that an entry failed: the store no longer predicts
// the FSM. It reports whether this is the first failure since the last
// reload.
func (pr *projected) markFailed() (first bool) {
	first = !pr.failed
	pr.broken, pr.failed = true, true
	return first
}

// execute decodes buf as every replica will and executes it on the
// store. A command that does not decode, that the store refuses, or whose
// execution panics is an error: proposing it would make the FSM differ
// from the plan or halt every replica. A panic may have left the store
// half-changed, so it is reloaded once the pipeline drains.
func (pr *projected) execute(t fsm.MessageType, buf []byte) (resp any, err error) {
	dt, body, err := fsm.Decode(buf)
	if err != nil {
		return nil, fmt.Errorf("the command does not decode as the replicas will decode it: %w", err)
	}
	if dt != t || body == nil {
		return nil, fmt.Errorf("%w: %s decoded as %s", fsm.ErrBadCommand, t, dt)
	}
	defer func() {
		if p := recover(); p != nil {
			pr.broken = true
			resp, err = nil, fmt.Errorf("%w: %s panicked on the speculative store: %v", fsm.ErrBadCommand, t, p)
		}
	}()
	// The speculative store never learns the entry's index; any non-zero
	// revision tells it that the desired state was set.
	resp = fsm.Execute(pr.store, body, pr.store.Revision+1)
	if err, ok := resp.(error); ok {
		// The leader planned a command its own store refuses: a bug, but
		// proposing it would make the store and the FSM differ.
		return nil, err
	}
	return resp, nil
}

// rebuild reloads the speculative state from the FSM. It runs on
// establishing leadership and whenever the pipeline has drained after a
// failure or a restore. After a restore the agents are disconnected and
// given the grace to come back and get a fresh ServerHello.
func (l *leader) rebuild() {
	if l.projected.reload(l.s.fsm) {
		l.resyncAgents()
	}
	// The reloaded store may lack a layout that failed, or hold one a
	// restore brought: allocate again (it proposes nothing if it holds).
	l.notePlacement("leader state reloaded")
}

// restoreSeen reacts to a snapshot restore: the speculative state is
// stale, so no new work is taken until the pipeline drains; then rebuild
// resynchronises the agents.
func (l *leader) restoreSeen() {
	if l.projected.markRestored(l.s.fsm.Restores()) {
		l.s.log.Warn("the store was restored from a snapshot; rebuilding the leader state")
	}
}
