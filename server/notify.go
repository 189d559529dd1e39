package server

import (
	"slices"

	"github.com/grapnel-io/grapnel/rpc"
	"github.com/grapnel-io/grapnel/rpc/ankbase"
	"github.com/grapnel-io/grapnel/server/plan"
	"github.com/grapnel-io/grapnel/server/secrets"
	"github.com/grapnel-io/grapnel/state"
)

// emit sends the events a change causes. tree holds (at least) the
// changed parts of the new CompleteState.
//
// swdd~event-handler-sends-complete-state-differences-including-altered-fields~1
func (l *leader) emit(diff state.StateDiff, tree state.Tree) {
	for _, ev := range l.events.Events(diff, tree) {
		cs, err := rpc.CompleteStateFromTree(ev.State)
		if err != nil {
			l.s.log.Warn("event not sent", "request", ev.RequestID, "error", err)
			continue
		}
		l.respond(ev.RequestID, &ankbase.Response{ResponseContent: &ankbase.Response_CompleteStateResponse{
			CompleteStateResponse: &ankbase.CompleteStateResponse{
				CompleteState: cs,
				AlteredFields: &ankbase.AlteredFields{AddedFields: ev.Added, UpdatedFields: ev.Updated, RemovedFields: ev.Removed},
			}}})
	}
}

// emitUpdateEvents compares the changed parts of the state before and
// after an update.
//
// swdd~server-sends-state-differences-as-events~1
// swdd~server-sends-event-for-initial-workload-states~1
// swdd~server-sends-event-for-removed-workload-states~1
func (l *leader) emitUpdateEvents(p *plan.Plan, before, after state.Tree) {
	diff := state.CompareTrees(before["desiredState"].(state.Tree), after["desiredState"].(state.Tree))
	prefix := func(ps []string) []string {
		for i := range ps {
			ps[i] = "desiredState." + ps[i]
		}
		return ps
	}
	diff.Added, diff.Updated, diff.Removed = prefix(diff.Added), prefix(diff.Updated), prefix(diff.Removed)
	diff.Updated = append(diff.Updated, maskedChanges(p, before, after)...)
	for _, a := range p.Added {
		diff.Added = append(diff.Added, statePath(a.Instance))
	}
	for _, d := range p.Deleted {
		if d.ServerHandled {
			diff.Removed = append(diff.Removed, statePath(d.Instance))
		}
	}
	for a := range p.Update.AgentTags {
		diff.Updated = append(diff.Updated, "agents."+a+".tags")
	}
	if !diff.Empty() {
		l.emit(diff, after)
	}
}

// maskedChanges lists the secret config items an update changed in
// place. Both trees show such an item as the mask, so comparing them
// finds no change; the plan knows the sealed value changed (issue 30,
// D8). The event then carries the mask, never the value.
func maskedChanges(p *plan.Plan, before, after state.Tree) []string {
	var out []string
	for _, k := range p.ChangedConfigs {
		if !secrets.IsSecret(k) {
			continue
		}
		_, was := configsOf(before)[k]
		_, is := configsOf(after)[k]
		if was && is {
			out = append(out, "desiredState.configs."+k)
		}
	}
	return out
}

func configsOf(t state.Tree) state.Tree {
	d, _ := t["desiredState"].(state.Tree)
	c, _ := d["configs"].(state.Tree)
	return c
}

// partialTree builds the Tree of just what an update touches, as st holds
// it.
func partialTree(st *state.Store, p *plan.Plan) state.Tree {
	wls, cfgs := state.Tree{}, state.Tree{}
	desired := state.Tree{"workloads": wls, "configs": cfgs, "apiVersion": st.Desired.APIVersion}
	states := state.WorkloadStatesMap{}
	agents := state.Tree{}
	for _, n := range p.ChangedWorkloads {
		if w, ok := st.Desired.Workloads[n]; ok {
			wls[n] = w.ToTree()
		}
	}
	for _, k := range p.ChangedConfigs {
		if v, ok := st.Desired.Configs[k]; ok && secrets.IsSecret(k) {
			cfgs[k] = secrets.Mask
		} else if ok {
			cfgs[k] = state.CloneValue(v)
		}
	}
	for _, a := range p.Added {
		if s, ok := st.States.Get(a.Instance); ok {
			states.Set(a.Instance, s)
		}
	}
	for a := range p.Update.AgentTags {
		if attr, ok := st.Agents[a]; ok {
			agents[a] = state.AgentMap{a: attr}.ToTree()[a]
		}
	}
	return state.Tree{"desiredState": desired, "workloadStates": states.ToTree(), "agents": agents}
}

func statesTree(ws []state.WorkloadState) state.Tree {
	m := state.WorkloadStatesMap{}
	for _, s := range ws {
		if !s.State.IsRemoved() {
			m.Set(s.Instance, s.State)
		}
	}
	return state.Tree{"workloadStates": m.ToTree()}
}

func statePath(n state.InstanceName) string {
	return "workloadStates." + n.AgentName + "." + n.WorkloadName + "." + n.ID
}

// stateEvent is one event's worth of committed workload states.
type stateEvent struct {
	diff   state.StateDiff
	states []state.WorkloadState
}

// stateEvents turns committed states, in commit order, into events as
// Ankaios reports them: a state of an instance that had none is added, a
// Removed is removed, any other is updated. An instance whose life ended
// and started again within the states (Removed, then Pending) gets one
// event per life, so that no event names a path twice. fresh lists the
// instances that had no state before.
func stateEvents(all []state.WorkloadState, fresh []state.InstanceName) []stateEvent {
	exists := map[state.InstanceName]bool{}
	for _, ws := range all {
		if _, seen := exists[ws.Instance]; !seen {
			exists[ws.Instance] = !slices.Contains(fresh, ws.Instance)
		}
	}
	var (
		out []stateEvent
		cur stateEvent
		in  = map[state.InstanceName]bool{}
	)
	for _, ws := range all {
		if in[ws.Instance] {
			out = append(out, cur)
			cur, in = stateEvent{}, map[state.InstanceName]bool{}
		}
		in[ws.Instance] = true
		p := statePath(ws.Instance)
		switch {
		case ws.State.IsRemoved():
			cur.diff.Removed = append(cur.diff.Removed, p)
			exists[ws.Instance] = false
		case !exists[ws.Instance]:
			cur.diff.Added = append(cur.diff.Added, p)
			exists[ws.Instance] = true
		default:
			cur.diff.Updated = append(cur.diff.Updated, p)
		}
		cur.states = append(cur.states, ws)
	}
	if len(cur.states) > 0 {
		out = append(out, cur)
	}
	return out
}
