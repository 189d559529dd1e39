package server

import (
	"fmt"

	"github.com/grapnel-io/grapnel/fsm"
	"github.com/grapnel-io/grapnel/rpc"
	"github.com/grapnel-io/grapnel/rpc/ankbase"
	"github.com/grapnel-io/grapnel/rpc/grpcapi"
	"github.com/grapnel-io/grapnel/state"
)

// updateState handles an UpdateStateRequest: apply the update mask,
// validate, render, diff, propose, then acknowledge and dispatch. A
// rejected update changes nothing and the loop goes on serving.
//
// swdd~server-provides-update-desired-state-interface~1
// swdd~server-continues-on-invalid-updated-state~1
// swdd~update-desired-state-with-invalid-version~1
// swdd~update-desired-state-with-missing-version~1
func (l *leader) updateState(id string, req *ankbase.UpdateStateRequest) {
	p, err := l.planUpdate(req)
	if err != nil {
		l.respondText(id, fmt.Sprintf("Update rejected: '%v'", err))
		return
	}
	if !p.changed {
		l.respondUpdateSuccess(id, p)
		return
	}
	var before state.Tree
	subscribed := l.events.HasSubscribers()
	if subscribed {
		before = l.partialTree(p)
	}
	if err := l.propose(fsm.UpdateDesiredStateType, fsm.UpdateDesiredStateRequest{Update: p.update}); err != nil {
		l.respondText(id, fmt.Sprintf("Update failed: %v", err))
		return
	}
	l.respondUpdateSuccess(id, p)
	l.dispatchUpdate(p)
	l.afterUpdate(p)
	if subscribed {
		l.emitUpdateEvents(p, before)
	}
}

// planUpdate computes the plan of a request against the committed state.
func (l *leader) planUpdate(req *ankbase.UpdateStateRequest) (*updatePlan, error) {
	newState := rpc.CompleteStateToTree(req.GetNewState())
	var (
		p   *updatePlan
		err error
	)
	l.s.fsm.Read(func(st *state.Store, _ uint64) {
		tags := make(map[string]map[string]string, len(st.Agents))
		for a, attr := range st.Agents {
			tags[a] = attr.Tags
		}
		var next state.State
		var nextTags map[string]map[string]string
		next, nextTags, err = state.ApplyUpdateMask(st.Desired, tags, newState, req.GetUpdateMask())
		if err != nil {
			return
		}
		connected := func(a string) bool { _, ok := st.Agents[a]; return ok }
		p, err = plan(l.s.renderer, st, next, nextTags, connected)
	})
	return p, err
}

// respondUpdateSuccess answers with the instance names added and deleted.
//
// swdd~server-update-state-success-response~1
func (l *leader) respondUpdateSuccess(id string, p *updatePlan) {
	ok := &ankbase.UpdateStateSuccess{AddedWorkloads: []string{}, DeletedWorkloads: []string{}}
	for _, a := range p.added {
		ok.AddedWorkloads = append(ok.AddedWorkloads, a.Instance.String())
	}
	for _, d := range p.deleted {
		ok.DeletedWorkloads = append(ok.DeletedWorkloads, d.instance.String())
	}
	l.respond(id, &ankbase.Response{ResponseContent: &ankbase.Response_UpdateStateSuccess{UpdateStateSuccess: ok}})
}

// dispatchUpdate tells each connected agent what to add and delete, and
// everyone about instances the server removed itself.
//
// swdd~server-detects-new-workload~1
// swdd~server-detects-deleted-workload~1
// swdd~server-detects-changed-workload~1
// swdd~agent-from-agent-field~1
// swdd~server-state-adds-delete-conditions-to-deleted-workload~1
// swdd~server-handles-not-started-deleted-workloads~1
func (l *leader) dispatchUpdate(p *updatePlan) {
	perAgent := map[string]*grpcapi.UpdateWorkload{}
	get := func(agent string) *grpcapi.UpdateWorkload {
		uw := perAgent[agent]
		if uw == nil {
			uw = &grpcapi.UpdateWorkload{}
			perAgent[agent] = uw
		}
		return uw
	}
	var removed []state.WorkloadState
	l.s.fsm.Read(func(st *state.Store, _ uint64) {
		for _, d := range p.deleted {
			if d.serverHandled {
				removed = append(removed, state.WorkloadState{Instance: d.instance, State: state.Removed})
				continue
			}
			conds := st.DeleteGraph.ConditionsFor(d.instance.WorkloadName)
			uw := get(d.instance.AgentName)
			uw.DeletedWorkloads = append(uw.DeletedWorkloads, rpc.DeletedWorkloadToProto(d.instance, conds))
		}
	})
	for _, a := range p.added {
		if a.Instance.AgentName == "" {
			continue
		}
		uw := get(a.Instance.AgentName)
		uw.AddedWorkloads = append(uw.AddedWorkloads, rpc.AddedWorkloadToProto(a.Instance, a.Workload))
	}
	for _, agent := range state.SortedKeys(perAgent) {
		if c := l.s.conns.agent(agent); c != nil {
			c.send(&grpcapi.FromServer{FromServerEnum: &grpcapi.FromServer_UpdateWorkload{UpdateWorkload: perAgent[agent]}})
		}
	}
	if len(removed) > 0 {
		l.broadcastStates("", removed)
	}
}

// afterUpdate drops the log campaigns and event subscriptions of deleted
// workloads.
//
// swdd~server-cancels-log-campaign-for-deleted-workloads~1
// swdd~server-removes-subscription-for-deleted-subscriber-workload~1
func (l *leader) afterUpdate(p *updatePlan) {
	for _, d := range p.deleted {
		n := d.instance
		for _, id := range l.logs.RemoveByWorkload(n.AgentName, n.WorkloadName) {
			l.sendLogsCancel(id)
		}
		l.events.RemoveWorkload(n.AgentName, n.WorkloadName)
	}
}

// broadcastStates sends workload states to every agent and CLI stream but
// the one named.
func (l *leader) broadcastStates(except string, ws []state.WorkloadState) {
	msg := &grpcapi.FromServer{FromServerEnum: &grpcapi.FromServer_UpdateWorkloadState{
		UpdateWorkloadState: &grpcapi.UpdateWorkloadState{WorkloadStates: rpc.WorkloadStatesToProto(ws)}}}
	for _, c := range l.s.conns.broadcastTargets(except) {
		c.send(msg)
	}
}
