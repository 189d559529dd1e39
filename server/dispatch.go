package server

import (
	"github.com/grapnel-io/grapnel/rpc"
	"github.com/grapnel-io/grapnel/rpc/grpcapi"
	"github.com/grapnel-io/grapnel/server/plan"
	"github.com/grapnel-io/grapnel/state"
)

// updateDispatch is what a committed update tells the agents: each
// agent's workloads to add and delete, and the states of instances the
// server removed itself.
type updateDispatch struct {
	perAgent map[string]*grpcapi.UpdateWorkload
	removed  []state.WorkloadState
}

// planDispatch prepares the messages of an update from st, the store the
// update produces, whose delete graph then holds the conditions the
// remaining dependents impose.
//
// swdd~server-detects-new-workload~1
// swdd~server-detects-deleted-workload~1
// swdd~server-detects-changed-workload~1
// swdd~agent-from-agent-field~1
// swdd~server-state-adds-delete-conditions-to-deleted-workload~1
// swdd~server-handles-not-started-deleted-workloads~1
//
// The workloads are revealed (secrets.go): their tokens opened for the
// agent that runs them.
func planDispatch(s *Server, st *state.Store, p *plan.Plan) *updateDispatch {
	d := &updateDispatch{perAgent: map[string]*grpcapi.UpdateWorkload{}}
	get := func(agent string) *grpcapi.UpdateWorkload {
		uw := d.perAgent[agent]
		if uw == nil {
			uw = &grpcapi.UpdateWorkload{}
			d.perAgent[agent] = uw
		}
		return uw
	}
	for _, del := range p.Deleted {
		if del.ServerHandled {
			d.removed = append(d.removed, state.WorkloadState{Instance: del.Instance, State: state.Removed})
			continue
		}
		conds := st.DeleteGraph.ConditionsFor(del.Instance.WorkloadName)
		uw := get(del.Instance.AgentName)
		uw.DeletedWorkloads = append(uw.DeletedWorkloads, rpc.DeletedWorkloadToProto(del.Instance, conds))
	}
	for _, a := range p.Added {
		if a.Instance.AgentName == "" {
			continue
		}
		uw := get(a.Instance.AgentName)
		uw.AddedWorkloads = append(uw.AddedWorkloads, rpc.AddedWorkloadToProto(a.Instance, s.revealed(a.Instance, a.Workload)))
	}
	return d
}

// sendDispatch sends the update committed at index to the agents greeted
// before it, and the server-removed states to everyone.
func (l *leader) sendDispatch(d *updateDispatch, index uint64) {
	for _, agent := range state.SortedKeys(d.perAgent) {
		if c := l.agentConn(agent); c != nil && l.greeted[agent].index < index {
			c.send(&grpcapi.FromServer{FromServerEnum: &grpcapi.FromServer_UpdateWorkload{UpdateWorkload: d.perAgent[agent]}})
		}
	}
	if len(d.removed) > 0 {
		l.broadcastStates("", d.removed, index)
	}
}

// greeting is an agent stream that got its ServerHello, and the FSM index
// the hello showed.
type greeting struct {
	conn  *conn
	index uint64
}

// agentConn is the agent's stream if it is registered and greeted.
func (l *leader) agentConn(agent string) *conn {
	c := l.s.conns.agent(agent)
	if c == nil || l.greeted[agent].conn != c {
		return nil
	}
	return c
}
