package server

import (
	"github.com/grapnel-io/grapnel/fsm"
	"github.com/grapnel-io/grapnel/rpc"
	"github.com/grapnel-io/grapnel/rpc/grpcapi"
	"github.com/grapnel-io/grapnel/state"
)

// agentHello greets a connecting agent: the states of the other agents,
// then its workloads, then it enters the agent map.
//
// swdd~server-informs-a-newly-connected-agent-workload-states~1
// swdd~server-sends-all-workloads-on-start~2
// swdd~server-stores-newly-connected-agent~2
// swdd~server-sends-event-for-newly-connected-agent~1
func (l *leader) agentHello(c *conn, h *grpcapi.AgentHello) {
	var (
		others []state.WorkloadState
		added  []*grpcapi.AddedWorkload
	)
	l.s.fsm.Read(func(st *state.Store, _ uint64) {
		for _, ws := range st.States.All() {
			if ws.Instance.AgentName != c.name {
				others = append(others, ws)
			}
		}
		for _, n := range state.SortedKeys(st.Rendered) {
			r := st.Rendered[n]
			if r.Instance.AgentName == c.name {
				added = append(added, rpc.AddedWorkloadToProto(r.Instance, r.Workload))
			}
		}
	})
	if len(others) > 0 {
		c.send(&grpcapi.FromServer{FromServerEnum: &grpcapi.FromServer_UpdateWorkloadState{
			UpdateWorkloadState: &grpcapi.UpdateWorkloadState{WorkloadStates: rpc.WorkloadStatesToProto(others)}}})
	}
	c.send(&grpcapi.FromServer{FromServerEnum: &grpcapi.FromServer_ServerHello{ServerHello: &grpcapi.ServerHello{AddedWorkloads: added}}})
	tags := h.GetTags().GetTags()
	if err := l.propose(fsm.AgentConnectedType, fsm.AgentConnectedRequest{Name: c.name, Tags: tags}); err != nil {
		c.close()
		return
	}
	if l.events.HasSubscribers() {
		l.emit(state.StateDiff{Added: []string{"agents." + c.name}}, l.agentTree(c.name))
	}
}

// agentGone handles a lost agent: out of the agent map, its workloads
// AgentDisconnected and broadcast, its subscriptions and campaigns ended.
//
// swdd~server-set-workload-state-on-disconnect~1
// swdd~server-distribute-workload-state-on-disconnect~1
// swdd~server-removes-disconnected-agents-from-state~2
// swdd~server-sends-events-for-disconnected-agent~1
// swdd~server-handles-log-campaign-for-disconnected-agent~1
func (l *leader) agentGone(name string) {
	if l.s.conns.agent(name) != nil {
		return // it reconnected already
	}
	var states []state.WorkloadState
	l.s.fsm.Read(func(st *state.Store, _ uint64) { states = st.States.OfAgent(name) })
	if err := l.propose(fsm.AgentGoneType, fsm.AgentGoneRequest{Name: name}); err != nil {
		return
	}
	for i := range states {
		states[i].State = state.AgentDisconnected
	}
	if len(states) > 0 {
		l.broadcastStates(name, states)
	}
	if l.events.HasSubscribers() {
		diff := state.StateDiff{Removed: []string{"agents." + name}}
		for _, ws := range states {
			diff.Updated = append(diff.Updated, statePath(ws.Instance))
		}
		l.emit(diff, statesTree(states))
	}
	l.events.RemoveAgent(name)
	collectors, stopped := l.logs.RemoveByAgent(name)
	for _, id := range collectors {
		l.sendLogsCancel(id)
	}
	for _, id := range state.SortedKeys(stopped) {
		for _, inst := range stopped[id] {
			l.sendLogsStop(id, inst)
		}
	}
}

// agentLoad stores an agent's CPU and memory report.
//
// swdd~server-receives-resource-availability~2
// swdd~server-sends-event-for-updated-agent-resource-availability~1
func (l *leader) agentLoad(name string, s *grpcapi.AgentLoadStatus) {
	load := fsm.AgentLoad{Name: name, CPUUsage: s.GetCpuUsage().GetCpuUsage(), FreeMemory: s.GetFreeMemory().GetFreeMemory()}
	if err := l.propose(fsm.AgentLoadType, fsm.AgentLoadRequest{Loads: []fsm.AgentLoad{load}}); err != nil {
		return
	}
	if l.events.HasSubscribers() {
		diff := state.StateDiff{Updated: []string{"agents." + name + ".status.cpuUsage", "agents." + name + ".status.freeMemory"}}
		l.emit(diff, l.agentTree(name))
	}
}

// workloadStates stores an agent's state report, forwards it to everyone
// else and emits events.
//
// swdd~server-stores-workload-state~1
// swdd~server-forwards-workload-state~1
// swdd~server-cleans-up-state~1
// swdd~server-sends-event-for-updated-workload-states~1
// swdd~server-sends-event-for-removed-workload-states~1
func (l *leader) workloadStates(agent string, u *grpcapi.UpdateWorkloadState) {
	states, err := rpc.WorkloadStatesFromProto(u.GetWorkloadStates())
	if err != nil {
		l.s.log.Warn("dropping a bad workload state report", "agent", agent, "error", err)
		return
	}
	if len(states) == 0 {
		return
	}
	if err := l.propose(fsm.WorkloadStatesType, fsm.WorkloadStatesRequest{States: states}); err != nil {
		return
	}
	l.broadcastStates(agent, states)
	if l.events.HasSubscribers() {
		var diff state.StateDiff
		for _, ws := range states {
			if ws.State.IsRemoved() {
				diff.Removed = append(diff.Removed, statePath(ws.Instance))
			} else {
				diff.Updated = append(diff.Updated, statePath(ws.Instance))
			}
		}
		l.emit(diff, statesTree(states))
	}
}
