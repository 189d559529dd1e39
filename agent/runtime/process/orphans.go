package process

import (
	"context"
	"errors"
	"syscall"

	"github.com/grapnel-io/grapnel/agent/runtime"
	"github.com/grapnel-io/grapnel/state"
)

// seenProcs are the processes an instance's record named when State last
// read it: the shim and the workload, each with its start time and boot,
// so that no reused pid is taken for them.
type seenProcs struct {
	shim, child *procRef
}

// alive reports whether one of them still runs.
func (p seenProcs) alive(boot string) bool {
	return p.child.alive(boot) || p.shim.alive(boot)
}

// remember keeps the processes of a record State just read. Only the
// processes are kept, a few dozen bytes per instance: the record stays
// the truth as long as it exists.
func (r *Runtime) remember(id runtime.ID, rs records) {
	if rs.child == nil && rs.shim == nil {
		return
	}
	r.seenMu.Lock()
	defer r.seenMu.Unlock()
	if r.seen == nil {
		r.seen = map[runtime.ID]seenProcs{}
	}
	r.seen[id] = seenProcs{shim: rs.shim, child: rs.childRef()}
}

// recall returns the processes last seen for id.
func (r *Runtime) recall(id runtime.ID) (seenProcs, bool) {
	r.seenMu.Lock()
	defer r.seenMu.Unlock()
	p, ok := r.seen[id]
	return p, ok
}

func (r *Runtime) forget(id runtime.ID) {
	r.seenMu.Lock()
	defer r.seenMu.Unlock()
	delete(r.seen, id)
}

// stateWithoutRecord answers State for an instance whose record is gone.
// A record wiped behind the agent's back (a run folder on /tmp aged out
// by tmpfiles, an operator's rm -r) does not end the workload: while a
// process this Runtime last saw for it still runs, the instance is
// Running, so that drift repair does not start a second copy next to it;
// once they have ended it is gone (runtime.ErrNotFound, Failed(Lost) to
// the agent).
func (r *Runtime) stateWithoutRecord(id runtime.ID, err error) (state.ExecutionState, error) {
	if p, ok := r.recall(id); ok && p.alive(r.boot) {
		return state.RunningOk, nil
	}
	r.forget(id)
	return state.ExecutionState{}, err
}

// deleteWithoutRecord stops the processes last seen for an instance whose
// record is gone (see stateWithoutRecord), as Delete would with the
// record.
func (r *Runtime) deleteWithoutRecord(ctx context.Context, id runtime.ID) error {
	p, ok := r.recall(id)
	if !ok {
		return nil
	}
	p.child.signalGroup(syscall.SIGTERM, r.boot)
	if !r.waitGone(ctx, r.cfg.StopGrace, p.child, p.shim) {
		p.child.signalGroup(syscall.SIGKILL, r.boot)
		p.shim.signal(syscall.SIGKILL, r.boot)
		if !r.waitGone(ctx, killWait, p.child, p.shim) {
			return errors.New("process runtime: deleting " + string(id) + ": its processes did not end after SIGKILL")
		}
	}
	r.forget(id)
	return nil
}
