package server

import (
	"errors"
	"fmt"

	"github.com/grapnel-io/grapnel/fsm"
	"github.com/grapnel-io/grapnel/rpc"
	"github.com/grapnel-io/grapnel/rpc/ankbase"
	"github.com/grapnel-io/grapnel/server/plan"
	"github.com/grapnel-io/grapnel/server/secrets"
	"github.com/grapnel-io/grapnel/state"
)

// updateState handles an UpdateStateRequest of the requester who (see
// requester): apply the update mask,
// validate, render and diff against the speculative state, propose without
// waiting for earlier proposals, and acknowledge and dispatch once the
// entry is committed. A rejected update changes nothing and the loop goes
// on serving.
//
// swdd~server-provides-update-desired-state-interface~1
// swdd~server-continues-on-invalid-updated-state~1
// swdd~update-desired-state-with-invalid-version~1
// swdd~update-desired-state-with-missing-version~1
func (l *leader) updateState(who, owner, id string, adm plan.Admission, req *ankbase.UpdateStateRequest) {
	p, err := l.planUpdate(req, adm, l.guard(owner, nil, req))
	if err != nil {
		l.countRefusal(err)
		// Answered once the history holds the refusal (rejections.go).
		l.refuse(who, req.GetUpdateMask(), err.Error(), func() { l.respondText(id, fmt.Sprintf("Update rejected: '%v'", err)) },
			func(err error) { l.respondText(id, fmt.Sprintf("Update failed: %v", err)) })
		return
	}
	if !p.Changed {
		l.orderedUnchanged(func() { l.respondUpdateSuccess(id, p) }, func(err error) {
			l.respondText(id, fmt.Sprintf("Update failed: %v", err))
		})
		return
	}
	p.History = l.historyMeta(who, req.GetUpdateMask(), false)
	l.proposeUpdate(p, func() { l.respondUpdateSuccess(id, p) }, func(err error) {
		l.respondText(id, fmt.Sprintf("Update failed: %v", err))
	})
}

// planUpdate computes the plan of a request against the speculative
// state, and checks it against the expected revision, the admission of
// its requester (admission.go) and the intent locks (plan.CheckLocks). A
// refusal of the workload policy is counted.
func (l *leader) planUpdate(req *ankbase.UpdateStateRequest, adm plan.Admission, g plan.Guard) (*plan.Plan, error) {
	if err := plan.CheckRevision(l.projected.store, g); err != nil {
		return nil, err
	}
	next, nextTags, err := l.nextState(req, g.Owner)
	if err != nil {
		return nil, err
	}
	p, err := plan.Make(l.s.renderer, l.s.limits, adm, l.projected.store, next, nextTags, l.connected)
	if err != nil {
		if check := policyCheck(err); check != "" {
			l.s.cfg.Metrics.RefusedByWorkloadPolicy(check)
		}
		return nil, err
	}
	if err := plan.CheckLocks(l.projected.store.Locks, p, g); err != nil {
		return nil, err
	}
	return p, nil
}

// countRefusal counts a refused update in the metrics that count its
// reason.
func (l *leader) countRefusal(err error) {
	if errors.Is(err, state.ErrBudget) {
		l.s.cfg.Metrics.RefusedRenderBudget("update")
	}
}

// guard is what an update of owner is checked against now, at the
// expected revision if one is given.
func (l *leader) guard(owner string, expected *uint64, req *ankbase.UpdateStateRequest) plan.Guard {
	return plan.Guard{Owner: owner, Keyed: l.s.keyedOwners(), NowMs: l.clock.Now().UnixMilli(), Expected: expected, Masks: req.GetUpdateMask()}
}

// nextState applies a request's update mask to the speculative state:
// the desired state and agent tags the update asks for, with its secret
// config items sealed (secrets.go).
func (l *leader) nextState(req *ankbase.UpdateStateRequest, owner string) (state.State, map[string]map[string]string, error) {
	return nextStateOf(l.s.cfg.Secrets, l.projected.store, req, owner)
}

// nextStateOf is nextState on the store st, sealing with keys for owner.
func nextStateOf(keys *secrets.Keyring, st *state.Store, req *ankbase.UpdateStateRequest, owner string) (state.State, map[string]map[string]string, error) {
	next, nextTags, err := applyUpdateMask(st, req)
	if err != nil {
		return state.State{}, nil, err
	}
	if next, err = sealNext(keys, st, next, owner); err != nil {
		return state.State{}, nil, err
	}
	return next, nextTags, nil
}

// applyUpdateMask is nextState before sealing: what the request would
// make of the speculative desired state and agent tags.
func (l *leader) applyUpdateMask(req *ankbase.UpdateStateRequest) (state.State, map[string]map[string]string, error) {
	return applyUpdateMask(l.projected.store, req)
}

// applyUpdateMask is what the request would make of the desired state
// and agent tags of st.
func applyUpdateMask(st *state.Store, req *ankbase.UpdateStateRequest) (state.State, map[string]map[string]string, error) {
	newState := rpc.CompleteStateToTree(req.GetNewState())
	tags := make(map[string]map[string]string, len(st.Agents))
	for a, attr := range st.Agents {
		tags[a] = attr.Tags
	}
	return state.ApplyUpdateMask(st.Desired, tags, newState, req.GetUpdateMask())
}

// connected reports whether an agent is in the speculative agent map.
func (l *leader) connected(agent string) bool { return plan.ConnectedIn(l.projected.store)(agent) }

// proposeUpdate proposes an accepted plan as the next desired state in
// sequence. What the agents and event subscribers are told is computed
// before the entry is queued: the state before from the speculative
// store, the dispatch and the state after from the store the update
// produces there. It is sent once the entry is committed; answer then
// acknowledges it.
func (l *leader) proposeUpdate(p *plan.Plan, answer func(), fail func(error)) {
	subscribed := l.events.HasSubscribers() || l.pendingSubs > 0
	var before, after state.Tree
	if subscribed {
		before = partialTree(l.projected.store, p)
	}
	prop := l.project(&fsm.UpdateDesiredStateRequest{Update: p.Update, Seq: l.projected.store.DesiredSeq + 1, History: p.History})
	var dispatch *updateDispatch
	if prop.err != nil && p.History != nil {
		// A refusal too: fail tells it once the history holds it.
		l.s.log.Error("command refused before proposing", "type", prop.typ.String(), "error", prop.err)
		l.refusedBeforeProposing(p.History, prop.err, fail)
		return
	}
	if prop.err == nil {
		dispatch = planDispatch(l.s, l.projected.store, p)
		if subscribed {
			after = partialTree(l.projected.store, p)
		}
	}
	l.submit(prop, func(_ any, index uint64) {
		if answer != nil {
			answer()
		}
		l.sendDispatch(dispatch, index)
		l.afterUpdate(p)
		if subscribed {
			l.emitUpdateEvents(p, before, after)
		}
	}, fail)
}

// respondUpdateSuccess answers with the instance names added and deleted.
//
// swdd~server-update-state-success-response~1
func (l *leader) respondUpdateSuccess(id string, p *plan.Plan) {
	ok := &ankbase.UpdateStateSuccess{AddedWorkloads: []string{}, DeletedWorkloads: []string{}}
	for _, a := range p.Added {
		ok.AddedWorkloads = append(ok.AddedWorkloads, a.Instance.String())
	}
	for _, d := range p.Deleted {
		ok.DeletedWorkloads = append(ok.DeletedWorkloads, d.Instance.String())
	}
	l.respond(id, &ankbase.Response{ResponseContent: &ankbase.Response_UpdateStateSuccess{UpdateStateSuccess: ok}})
}

// afterUpdate drops the log campaigns and event subscriptions of deleted
// workloads.
//
// swdd~server-cancels-log-campaign-for-deleted-workloads~1
// swdd~server-removes-subscription-for-deleted-subscriber-workload~1
func (l *leader) afterUpdate(p *plan.Plan) {
	for _, d := range p.Deleted {
		n := d.Instance
		for _, id := range l.logs.RemoveByWorkload(n.AgentName, n.WorkloadName) {
			l.sendLogsCancel(id)
		}
		l.events.RemoveWorkload(n.AgentName, n.WorkloadName)
	}
}
