package server

import (
	"errors"
	"fmt"
	"sync/atomic"

	"google.golang.org/protobuf/proto"

	"github.com/grapnel-io/grapnel/fsm"
	"github.com/grapnel-io/grapnel/internal/errs"
	"github.com/grapnel-io/grapnel/rpc/ankbase"
	"github.com/grapnel-io/grapnel/rpc/grapnelpb"
	"github.com/grapnel-io/grapnel/server/plan"
	"github.com/grapnel-io/grapnel/server/secrets"
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
	// requester names the caller in the history (planRequester).
	requester string
	// adm is the caller's admission (admission.go, plan.Admission).
	adm plan.Admission
	// revision asks only for the desired state's revision.
	revision bool
	// lock is a Locks service call (locksvc.go).
	lock  *lockCall
	reply chan planAnswer

	// release, for a dry-run, frees the caller's place among the
	// dry-runs planned at once (Server.admitDryRun) once planning is
	// done; nil when it holds none. taken decides who calls it: the
	// leader loop takes the call (then its dry-run's goroutine
	// releases), or the caller abandons it first (then the caller
	// does, and the loop plans nothing).
	release func()
	taken   atomic.Int32
}

// States of planCall.taken.
const (
	callWaiting int32 = iota
	callTaken
	callAbandoned
)

// take claims a call for the leader loop; false if the caller gave up.
func (c *planCall) take() bool { return c.taken.CompareAndSwap(callWaiting, callTaken) }

// abandon gives up a call the loop has not taken; false if it has.
func (c *planCall) abandon() bool { return c.taken.CompareAndSwap(callWaiting, callAbandoned) }

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
	l.startDryRun(c)
}

// dryRunInput is what a dry-run plans on, taken on the leader loop: a
// planning view of the projected store (state.Store.ForPlanning) and
// the leader's time, for the intent locks.
type dryRunInput struct {
	st    *state.Store
	nowMs int64
	// adoptable is the leader's (leader.adoptable), which the allocator
	// is given after the update.
	adoptable map[string][]string
}

// dryRunInput takes the input of a dry-run now.
func (l *leader) dryRunInput() dryRunInput {
	st := l.projected.store.ForPlanning()
	return dryRunInput{st: st, nowMs: l.clock.Now().UnixMilli(), adoptable: l.adoptable(st)}
}

// startDryRun runs a dry-run off the leader loop. The loop only takes
// its input, which costs it little whatever the state's size, and queues
// the check of the proposals before it; planning, rendering and
// describing run on a goroutine of their own, so that a dry-run of any
// weight holds up no other request. The answer keeps the order of a
// call planned on the loop: it goes out once the proposals before it
// have settled, and is ErrStateChanged if one of them failed (or the
// store was restored), since the state it was planned on never existed.
//
// Goroutine: one per dry-run, started here; at most
// Config.MaxConcurrentDryRuns of them plan at once (the caller holds a
// place, admitDryRun). It ends once it has answered, or when the term
// ends while it waits for the proposals before it.
func (l *leader) startDryRun(c *planCall) {
	if !c.take() {
		return // the caller gave up while the call waited in the inbox
	}
	in := l.dryRunInput()
	settled := make(chan error, 1)
	l.pipe.ordered(func() {
		if l.projected.stale() {
			settled <- fmt.Errorf("%w: an update proposed before this dry-run failed, so the state it was planned on did not come to be; plan again", errs.ErrStateChanged)
			return
		}
		settled <- nil
	})
	var stop <-chan struct{}
	if l.term != nil {
		stop = l.term.stop
	}
	go l.s.runDryRun(c, in, settled, stop)
}

// runDryRun plans a dry-run's update on its input and answers it once
// settled says whether the proposals before it came to be.
func (s *Server) runDryRun(c *planCall, in dryRunInput, settled <-chan error, stop <-chan struct{}) {
	if s.dryRunHook != nil {
		s.dryRunHook()
	}
	resp, overBudget := s.planDryRun(in, c.update, c.owner, c.adm)
	if c.release != nil {
		c.release()
	}
	if overBudget {
		s.cfg.Metrics.RefusedRenderBudget("dry_run")
	}
	err := fitPlan(resp, s.cfg.MaxMessageBytes)
	select {
	case stale := <-settled:
		if stale != nil {
			err = stale
		}
	case <-stop:
		return // the term ended: the caller is told so
	}
	if err != nil {
		c.reply <- planAnswer{err: err}
		return
	}
	c.reply <- planAnswer{plan: resp}
}

// dryRun plans an update on the projected state as a dry-run does, on
// the calling goroutine (tests and benchmarks).
func (l *leader) dryRun(req *ankbase.UpdateStateRequest, owner string, adm plan.Admission) *grapnelpb.PlanResponse {
	resp, _ := l.s.planDryRun(l.dryRunInput(), req, owner, adm)
	return resp
}

// planDryRun plans an update on in with the planning code of a real
// update, going on past every rejection to list them all, and describes
// the plan. It proposes nothing and changes nothing; it reads only in
// and what the Server holds fixed (renderer, limits, keys), so it may
// run on any goroutine. overBudget says the render budget refused it.
func (s *Server) planDryRun(in dryRunInput, req *ankbase.UpdateStateRequest, owner string, adm plan.Admission) (resp *grapnelpb.PlanResponse, overBudget bool) {
	st := in.st
	resp = &grapnelpb.PlanResponse{Seq: st.DesiredSeq}
	var rejections []error
	next, tags, err := nextStateOf(s.cfg.Secrets, st, req, owner)
	if err != nil {
		rejections = []error{err}
	} else {
		g := plan.Guard{Owner: owner, Keyed: st.KeyedOwners(), NowMs: in.nowMs, Masks: req.GetUpdateMask()}
		rejections = plan.DryRun(resp, s.renderer, s.limits, adm, st, next, tags, g, in.adoptable, secrets.MaskTokens)
	}
	resp.Accepted = len(rejections) == 0
	for _, e := range rejections {
		overBudget = overBudget || errors.Is(e, state.ErrBudget)
		r := &grapnelpb.Rejection{Message: e.Error()}
		var fe *state.FieldError
		if errors.As(e, &fe) {
			r.Field = fe.Path
		}
		resp.Rejections = append(resp.Rejections, r)
	}
	return resp, overBudget
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
	// A refusal is answered once the history holds it (rejections.go);
	// retry answers one the leader could not record, as a write in
	// flight is answered.
	retry := func(err error) { answer(planAnswer{err: fmt.Errorf("update failed: %w", err)}) }
	seq := l.projected.store.DesiredSeq
	mask := c.update.GetUpdateMask()
	if c.expectRevision == nil && seq != c.expectSeq {
		err := fmt.Errorf("%w: the plan was made at revision %d, the desired state is at revision %d now; run the dry-run again", errs.ErrStateChanged, c.expectSeq, seq)
		l.refuse(c.requester, mask, err.Error(), func() { answer(planAnswer{err: err}) }, retry)
		return
	}
	p, err := l.planUpdate(c.update, c.adm, l.guard(c.owner, c.expectRevision, c.update))
	if err != nil {
		l.countRefusal(err)
		l.refuse(c.requester, mask, err.Error(), func() { answer(planAnswer{err: fmt.Errorf("update rejected: %w", err)}) }, retry)
		return
	}
	if !p.Changed {
		l.orderedUnchanged(func() { answer(planAnswer{applied: appliedResponse(seq, p)}) }, func(err error) {
			answer(planAnswer{err: fmt.Errorf("update failed: %w: %v", errs.ErrStateChanged, err)})
		})
		return
	}
	p.History = l.historyMeta(c.requester, mask, false)
	l.proposeUpdate(p, func() { answer(planAnswer{applied: appliedResponse(seq+1, p)}) }, func(err error) {
		if errors.Is(err, fsm.ErrOutOfSequence) || errors.Is(err, errEarlierFailed) {
			err = fmt.Errorf("%w: an update proposed before it failed, so the state it was planned on did not come to be (%v); run the dry-run again", errs.ErrStateChanged, err)
		}
		answer(planAnswer{err: fmt.Errorf("update failed: %w", err)})
	})
}

// appliedResponse is the answer of an applied update, with the instance
// names as UpdateStateSuccess has them.
func appliedResponse(seq uint64, p *plan.Plan) *grapnelpb.ApplyResponse {
	r := &grapnelpb.ApplyResponse{Seq: seq, AddedWorkloads: []string{}, DeletedWorkloads: []string{}}
	for _, a := range p.Added {
		r.AddedWorkloads = append(r.AddedWorkloads, a.Instance.String())
	}
	for _, d := range p.Deleted {
		r.DeletedWorkloads = append(r.DeletedWorkloads, d.Instance.String())
	}
	return r
}
