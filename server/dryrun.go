package server

import (
	"errors"
	"fmt"

	"google.golang.org/protobuf/proto"

	"github.com/grapnel-io/grapnel/fsm"
	"github.com/grapnel-io/grapnel/internal/errs"
	"github.com/grapnel-io/grapnel/rpc/ankbase"
	"github.com/grapnel-io/grapnel/rpc/grapnelpb"
	"github.com/grapnel-io/grapnel/state"
)

// planCall is a call of the Plan service, posted to the leader loop like
// a stream's request, so that it is planned on exactly the projected
// state a real update at that moment would be. reply has room for the
// one answer: the loop never waits for the caller.
type planCall struct {
	update *ankbase.UpdateStateRequest
	// apply asks for the update to be made if the desired state is still
	// at expectSeq; otherwise the call is a dry-run.
	apply     bool
	expectSeq uint64
	// expectRevision, when set, replaces the check of expectSeq: the
	// objects the update addresses must be unchanged since it.
	expectRevision *uint64
	// owner is the caller's lock owner (lockOwner).
	owner string
	// adm is the caller's admission (admission.go).
	adm admission
	// revision asks only for the desired state's revision.
	revision bool
	// lock is a Locks service call (locksvc.go).
	lock  *lockCall
	reply chan planAnswer
}

// planAnswer is the answer of a planCall: a plan, an applied update or
// an error.
type planAnswer struct {
	plan     *grapnelpb.PlanResponse
	applied  *grapnelpb.ApplyResponse
	revision *grapnelpb.RevisionResponse
	locks    []*grapnelpb.LockInfo
	nowMs    int64
	err      error
}

// planCall handles a Plan service call on the leader loop. Like every
// answer, it goes out once the proposals before it have settled.
func (l *leader) planCall(c *planCall) {
	if c.lock != nil {
		l.lockCall(c)
		return
	}
	if c.revision {
		resp := &grapnelpb.RevisionResponse{Revision: l.projected.store.DesiredSeq}
		l.pipe.ordered(func() { c.reply <- planAnswer{revision: resp} })
		return
	}
	if c.apply {
		l.applyIfUnchanged(c)
		return
	}
	resp := l.dryRun(c.update, c.owner, c.adm)
	if err := fitPlan(resp, l.s.cfg.MaxMessageBytes); err != nil {
		l.pipe.ordered(func() { c.reply <- planAnswer{err: err} })
		return
	}
	l.pipe.ordered(func() {
		// A proposal before the dry-run failed (or the store was
		// restored): the state it was planned on never existed.
		if l.projected.stale() {
			c.reply <- planAnswer{err: fmt.Errorf("%w: an update proposed before this dry-run failed, so the state it was planned on did not come to be; plan again", errs.ErrStateChanged)}
			return
		}
		c.reply <- planAnswer{plan: resp}
	})
}

// dryRun plans an update on the projected state with the planning code
// of a real update, going on past every rejection to list them all, and
// describes the plan. It proposes nothing and changes nothing.
func (l *leader) dryRun(req *ankbase.UpdateStateRequest, owner string, adm admission) *grapnelpb.PlanResponse {
	st := l.projected.store
	resp := &grapnelpb.PlanResponse{Seq: st.DesiredSeq}
	c := &checks{all: true}
	next, tags, err := l.nextState(req)
	if err != nil {
		c.failed(err)
	} else if pd := planSteps(c, l.s.renderer, l.s.limits, adm, st, next, tags, l.connected); pd != nil {
		if pd.changed {
			// The command's size, as project checks it before proposing.
			_, err := l.encodeChecked(&fsm.UpdateDesiredStateRequest{Update: pd.update, Seq: st.DesiredSeq + 1})
			c.failed(err)
		}
		c.failed(checkLocks(st.Locks, pd.updatePlan, l.guard(owner, nil, req)))
		describePlan(resp, st, next, pd)
	}
	resp.Accepted = len(c.errs) == 0
	for _, e := range c.errs {
		r := &grapnelpb.Rejection{Message: e.Error()}
		var fe *state.FieldError
		if errors.As(e, &fe) {
			r.Field = fe.Path
		}
		resp.Rejections = append(resp.Rejections, r)
	}
	return resp
}

// fitPlan keeps a plan under the message limit: a plan carries old and
// new values of every changed field, so that of an update near the limit
// can be larger than the update. The values go first (the paths stay,
// and a warning says so); a plan still too large is refused.
func fitPlan(resp *grapnelpb.PlanResponse, limit int) error {
	if limit <= 0 || proto.Size(resp) <= limit {
		return nil
	}
	for _, w := range resp.Workloads {
		for _, f := range w.Fields {
			f.Old, f.New = "", ""
		}
	}
	resp.Warnings = append(resp.Warnings, "the old and new values of the changed fields are left out: with them the plan is larger than the message limit")
	if n := proto.Size(resp); n > limit {
		return fmt.Errorf("%w: the plan is %d bytes, more than the message limit of %d bytes; plan a smaller update", errs.ErrMessageTooLarge, n, limit)
	}
	return nil
}

// applyIfUnchanged makes an update as updateState does, but only if the
// desired state is still at the sequence number its plan was made at.
// The check is on the projected state, and the command carries the
// sequence number it produces, so the FSM refuses it too should an
// earlier proposal fail.
func (l *leader) applyIfUnchanged(c *planCall) {
	answer := func(a planAnswer) { c.reply <- a }
	seq := l.projected.store.DesiredSeq
	if c.expectRevision == nil && seq != c.expectSeq {
		err := fmt.Errorf("%w: the plan was made at seq %d, the desired state is at seq %d now; run the dry-run again", errs.ErrStateChanged, c.expectSeq, seq)
		l.pipe.ordered(func() { answer(planAnswer{err: err}) })
		return
	}
	p, err := l.planUpdate(c.update, c.adm, l.guard(c.owner, c.expectRevision, c.update))
	if err != nil {
		l.pipe.ordered(func() { answer(planAnswer{err: fmt.Errorf("update rejected: %w", err)}) })
		return
	}
	if !p.changed {
		l.pipe.ordered(func() { answer(planAnswer{applied: appliedResponse(seq, p)}) })
		return
	}
	l.proposeUpdate(p, func() { answer(planAnswer{applied: appliedResponse(seq+1, p)}) }, func(err error) {
		if errors.Is(err, fsm.ErrOutOfSequence) || errors.Is(err, errEarlierFailed) {
			err = fmt.Errorf("%w: an update proposed before it failed, so the state it was planned on did not come to be (%v); run the dry-run again", errs.ErrStateChanged, err)
		}
		answer(planAnswer{err: fmt.Errorf("update failed: %w", err)})
	})
}

// appliedResponse is the answer of an applied update, with the instance
// names as UpdateStateSuccess has them.
func appliedResponse(seq uint64, p *updatePlan) *grapnelpb.ApplyResponse {
	r := &grapnelpb.ApplyResponse{Seq: seq, AddedWorkloads: []string{}, DeletedWorkloads: []string{}}
	for _, a := range p.added {
		r.AddedWorkloads = append(r.AddedWorkloads, a.Instance.String())
	}
	for _, d := range p.deleted {
		r.DeletedWorkloads = append(r.DeletedWorkloads, d.instance.String())
	}
	return r
}
