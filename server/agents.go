package server

import (
	"maps"
	"slices"

	"github.com/grapnel-io/grapnel/fsm"
	"github.com/grapnel-io/grapnel/rpc"
	"github.com/grapnel-io/grapnel/rpc/grpcapi"
	"github.com/grapnel-io/grapnel/server/ingest"
	"github.com/grapnel-io/grapnel/state"
)

// agentHello greets a connecting agent. An agent that comes back within
// its reconnect grace with the same tags changes nothing: it keeps its
// place and load in the agent map, no event is sent, and it is greeted at
// once. Any other enters the agent map, and its ServerHello waits until
// the layout its arrival leads to is committed (awaitLayout): an agent
// back after its grace finds there the placed instances the allocator
// gives it again, and adopts the ones it still runs instead of deleting
// them as left over and creating them again a moment later (issue 30).
//
// swdd~server-stores-newly-connected-agent~2
// swdd~server-sends-event-for-newly-connected-agent~1
func (l *leader) agentHello(c *conn, h *grpcapi.AgentHello) {
	l.noteRelease(c.name, h)
	l.noteAgentStorage(c.name, "AgentHello.grapnelStorageFailed", h.GetGrapnelStorageFailed())
	inc := l.lifeOf(c.name, h.GetGrapnelIncarnation())
	l.incarnation[c] = inc
	l.forgetPreviousLife(c.name, inc)
	tags := h.GetTags().GetTags()
	if l.endGrace(c.name) {
		if a, ok := l.projected.store.Agents[c.name]; ok && maps.Equal(a.Tags, tags) {
			l.s.log.Info("agent reconnected within the grace", "agent", c.name)
			l.greet(c)
			return
		}
	}
	body := &fsm.AgentConnectedRequest{Name: c.name, Tags: tags}
	l.propose(body, func(any, uint64) {
		if l.events.HasSubscribers() {
			shown := tags
			if shown == nil {
				shown = map[string]string{}
			}
			attrs := state.AgentMap{c.name: &state.AgentAttributes{Tags: shown}}
			l.emit(state.StateDiff{Added: []string{"agents." + c.name}}, state.Tree{"agents": attrs.ToTree()})
		}
	}, func(error) { c.close() })
	l.awaitLayout(c)
}

// greet sends a connected agent the states of the other agents, then its
// workloads, both as committed, and registers its stream: the entries the
// hello already showed are not dispatched to it again when they settle. A
// stream that ended, or was replaced, while its hello waited gets none.
//
// swdd~server-informs-a-newly-connected-agent-workload-states~1
// swdd~server-sends-all-workloads-on-start~2
func (l *leader) greet(c *conn) {
	select {
	case <-c.closed:
		return // its AgentConnected failed, or the server dropped it
	default:
	}
	if l.s.conns.agent(c.name) != c {
		return
	}
	var (
		others  []state.WorkloadState
		added   []*grpcapi.AddedWorkload
		applied uint64
	)
	l.s.fsm.Read(func(st *state.Store, index uint64) {
		applied = index
		for _, ws := range st.States.All() {
			if ws.Instance.AgentName != c.name {
				others = append(others, ws)
			}
		}
		for _, n := range state.SortedKeys(st.Rendered) {
			r := st.Rendered[n]
			if r.Instance.AgentName == "" && slices.Contains(st.Placement[n], c.name) {
				r = r.OnAgent(c.name) // placed here (docs/placement.md)
			}
			if r.Instance.AgentName == c.name {
				added = append(added, rpc.AddedWorkloadToProto(r.Instance, l.s.revealed(r.Instance, r.Workload)))
			}
		}
	})
	if len(others) > 0 {
		c.send(&grpcapi.FromServer{FromServerEnum: &grpcapi.FromServer_UpdateWorkloadState{
			UpdateWorkloadState: &grpcapi.UpdateWorkloadState{WorkloadStates: rpc.WorkloadStatesToProto(others)}}})
	}
	c.send(&grpcapi.FromServer{FromServerEnum: &grpcapi.FromServer_ServerHello{ServerHello: &grpcapi.ServerHello{AddedWorkloads: added}}})
	l.greeted[c.name] = greeting{conn: c, index: applied}
	l.sendWaitingLogs(c)
	// What it ran before its grace ended is settled by this hello: kept
	// if the layout gave it back, deleted by the agent otherwise.
	delete(l.left, c.name)
}

// lifeOf is the incarnation the reports of an agent's stream are marked
// with: the one its hello gave, unless that is below the newest one
// stored. A live agent process never goes back, so a lower one is a new
// process whose counter was lost (a run folder on a tmpfs) while its
// clock is behind the previous life's (a unit without a battery-backed
// clock boots in the past): all its reports would be dropped as stale,
// and its workloads never shown again. It gets the next number after the
// stored one instead. A reconnection of such a process looks the same
// and counts as a new life too: its states show AgentDisconnected for
// the round trip until it reports them again.
func (l *leader) lifeOf(agent string, hello uint64) uint64 {
	stored := l.projected.store.ReportMarks[agent].Incarnation
	if hello == 0 || hello >= stored {
		return hello
	}
	l.s.log.Warn("agent's incarnation is behind the stored one (counter lost, clock behind); its reports count as the next one",
		"agent", agent, "incarnation", hello, "stored", stored, "taken", stored+1)
	return stored + 1
}

// forgetPreviousLife turns the states an agent reported before it
// restarted into AgentDisconnected when a new incarnation of it says
// hello: they describe processes of its previous life (after a power
// cycle, none of them runs), and showing them as current until it
// reports would show Running for what is not running. An Ankaios agent,
// as after its stream broke, shows AgentDisconnected until it reports.
// Server-set states (Pending(Initial), NotScheduled) stay. An Ankaios
// agent sends no incarnation, so a reconnection of its cannot be told
// from a restart: its states are left to its own reports.
func (l *leader) forgetPreviousLife(agent string, incarnation uint64) {
	if incarnation == 0 || l.projected.store.ReportMarks[agent].Incarnation >= incarnation {
		return
	}
	var stale []state.WorkloadState
	for _, ws := range l.projected.store.States.OfAgent(agent) {
		s := ws.State
		if s.IsPendingInitial() || s.IsRemoved() || s == state.NotScheduled || s == state.AgentDisconnected {
			continue
		}
		stale = append(stale, state.WorkloadState{Instance: ws.Instance, State: state.AgentDisconnected})
	}
	if len(stale) == 0 {
		return
	}
	// The mark of the new incarnation, before any of its reports: reports
	// of the previous life still in flight are dropped as stale after it.
	l.proposeReportsSplit([]ingest.Report{{Agent: agent, Mark: state.ReportMark{Incarnation: incarnation}, States: stale}},
		"a new incarnation of agent "+agent+" said hello: the states of its previous life are AgentDisconnected")
}

// unconfirmStoredStates runs when this leader was elected without ever
// following another since its process started: the whole cluster started
// together (a power-on) or it is the only voter. The workload states in
// the store then date from before that start, and an agent that lost
// power with it left nothing running of what they say, so serving them
// would show Running for what is not running. Until an agent reports,
// its workloads show Pending(Initial), what an Ankaios server shows after
// it starts for an agent that has not reported yet; a Grapnel agent
// reports every instance's state after its ServerHello, so a live agent's
// states are back within a round trip, and the reconnect grace still
// decides when an agent that does not come back is AgentDisconnected. An
// Ankaios agent (no incarnation) reports only changes, so its states are
// left as they are. Server-set states (Pending(Initial), NotScheduled,
// Removed) stay.
func (l *leader) unconfirmStoredStates() {
	var reports []ingest.Report
	for _, agent := range state.SortedKeys(l.projected.store.Agents) {
		if l.projected.store.ReportMarks[agent].IsZero() {
			continue
		}
		var states []state.WorkloadState
		for _, ws := range l.projected.store.States.OfAgent(agent) {
			s := ws.State
			if s.IsPendingInitial() || s.IsRemoved() || s == state.NotScheduled {
				continue
			}
			states = append(states, state.WorkloadState{Instance: ws.Instance, State: state.PendingInitial})
		}
		if len(states) > 0 {
			// A zero mark: the agent's own marks, and so the order of its
			// reports, stay as they were.
			reports = append(reports, ingest.Report{Agent: agent, States: states})
		}
	}
	if len(reports) > 0 {
		l.s.log.Info("elected without following a leader since start: stored workload states are unconfirmed until their agents report", "agents", len(reports))
		l.proposeReportsSplit(reports, "elected without following a leader since start: stored states unconfirmed until their agents report")
	}
}

// agentGone handles a lost agent stream. Whether the stream broke (a
// network blip, a failover, a crash) or the agent said Goodbye (a clean
// stop, as systemd's restart of the agent), it gets the reconnect grace:
// an agent restart or a blip that ends within it moves nothing, so no
// placed instance is deleted and created again (Nomad gives its clients a
// heartbeat grace for the same reason). An agent that said Goodbye stopped
// observing its workloads: they read AgentDisconnected during its grace
// (unobserved). An agent in its grace is left to the grace timer; one that
// already reconnected is kept.
func (l *leader) agentGone(c *conn) {
	delete(l.incarnation, c)
	if l.greeted[c.name].conn == c {
		l.forgetAgentStream(c.name)
	}
	if l.s.conns.agent(c.name) != nil {
		return // it reconnected already
	}
	if l.grace[c.name] != nil {
		return
	}
	if c.saidGoodbye && l.s.reconnectGrace() > 0 {
		l.unobserved(c.name)
	}
	l.startGrace([]string{c.name})
}

// unobserved turns the states of an agent that said Goodbye into
// AgentDisconnected: it stopped watching them (they run on, an agent's
// stop leaves its workloads running), so the server must not show
// Running for them, nor let another agent's add or delete condition count
// on a state nobody confirms. Ankaios' server leaves them as last reported
// on a Goodbye (it takes it only as the end of the connection's log
// campaigns and subscriptions; its AgentDisconnected comes with a broken
// stream), which shows Running for what nobody watches. The agent stays
// in the agent map until its grace ends, so nothing moves meanwhile. Its
// reports still waiting in its conflation unit go first. Server-set
// states (Pending(Initial), NotScheduled, Removed) stay.
func (l *leader) unobserved(agent string) {
	if r, ok := l.states.Flush(agent); ok {
		l.proposeReportsSplit([]ingest.Report{r}, "")
	}
	var states []state.WorkloadState
	for _, ws := range l.projected.store.States.OfAgent(agent) {
		s := ws.State
		if s.IsPendingInitial() || s.IsRemoved() || s == state.NotScheduled || s == state.AgentDisconnected {
			continue
		}
		states = append(states, state.WorkloadState{Instance: ws.Instance, State: state.AgentDisconnected})
	}
	if len(states) == 0 {
		return
	}
	l.proposeReportsSplit([]ingest.Report{{Agent: agent, States: states}},
		"agent "+agent+" said goodbye: its workloads are not observed until it reconnects (its reconnect grace runs)")
}

// forgetAgentStream ends what a lost agent stream leaves in the leader
// memory: its greeting, the subscriptions of its workloads and the log
// campaigns it collects or feeds.
//
// swdd~server-handles-log-campaign-for-disconnected-agent~1
func (l *leader) forgetAgentStream(name string) {
	delete(l.greeted, name)
	// Told again in its next hello; meanwhile its grace keeps the
	// problem open (problems.agentStorageFailures).
	delete(l.agentStorage, name)
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

// disconnectAgent proposes an agent's departure: out of the agent map, its
// workloads AgentDisconnected, broadcast and sent as events once
// committed. Reports of the agent still waiting in its conflation unit are
// proposed first, so none lands after the departure.
//
// swdd~server-set-workload-state-on-disconnect~1
// swdd~server-distribute-workload-state-on-disconnect~1
// swdd~server-removes-disconnected-agents-from-state~2
// swdd~server-sends-events-for-disconnected-agent~1
func (l *leader) disconnectAgent(name string) {
	if r, ok := l.states.Flush(name); ok {
		l.proposeReportsSplit([]ingest.Report{r}, "")
	}
	delete(l.status, name)
	delete(l.waitingLogs, name)
	l.term.forgetRelease(name)
	l.propose(&fsm.AgentGoneRequest{Name: name, History: l.historyMeta("", nil, false)}, func(resp any, index uint64) {
		r, _ := resp.(*fsm.AgentGoneResponse)
		var states []state.WorkloadState
		if r != nil {
			states = r.Disconnected
		}
		if len(states) > 0 {
			l.broadcastStates(name, states, index)
		}
		if l.events.HasSubscribers() {
			diff := state.StateDiff{Removed: []string{"agents." + name}}
			for _, ws := range states {
				diff.Updated = append(diff.Updated, statePath(ws.Instance))
			}
			l.emit(diff, statesTree(states))
		}
	}, nil)
}

// agentLoad keeps an agent's CPU and memory report in the leader's memory
// and tells event subscribers at once: nothing of it goes through Raft
// (see leader.status).
//
// swdd~server-receives-resource-availability~2
// swdd~server-sends-event-for-updated-agent-resource-availability~1
func (l *leader) agentLoad(name string, s *grpcapi.AgentLoadStatus) {
	cpu, free := s.GetCpuUsage().GetCpuUsage(), s.GetFreeMemory().GetFreeMemory()
	st := state.AgentStatus{CPUUsage: &cpu, FreeMemory: &free}
	l.status[name] = st
	l.noteAgentStorage(name, "AgentLoadStatus.grapnelStorageFailed", s.GetGrapnelStorageFailed())
	if !l.events.HasSubscribers() {
		return
	}
	// After what is being committed, as a read would see it: the event
	// carries this report's status, and only while the agent is still
	// connected once the entries in flight have settled (which is the
	// live leader memory then, as for every commit callback).
	l.pipe.ordered(func() {
		a, ok := l.projected.store.Agents[name]
		if !ok {
			return
		}
		tree := state.Tree{"agents": state.AgentMap{name: {Status: st, Tags: a.Tags}}.ToTree()}
		l.emit(state.StateDiff{Updated: []string{"agents." + name + ".status.cpuUsage", "agents." + name + ".status.freeMemory"}}, tree)
	})
}

// agentsWithStatus is the agent map with each agent's status from the
// leader's memory; an agent that has not reported to this leader yet has
// none, as Ankaios shows a newly connected agent.
func (l *leader) agentsWithStatus(m state.AgentMap) state.AgentMap {
	out := make(state.AgentMap, len(m))
	for n, a := range m {
		out[n] = &state.AgentAttributes{Status: l.status[n], Tags: a.Tags}
	}
	return out
}

// workloadStates queues an agent's state report in the agent's
// conflation unit, marked with the stream's incarnation and the report's
// generation. A report older than one already accepted is dropped.
func (l *leader) workloadStates(c *conn, u *grpcapi.UpdateWorkloadState) {
	states, err := rpc.WorkloadStatesFromProto(u.GetWorkloadStates())
	if err != nil {
		l.s.log.Warn("dropping a bad workload state report", "agent", c.name, "error", err)
		return
	}
	if states = l.admitReported(c.name, states); len(states) == 0 {
		return
	}
	mark := state.ReportMark{Incarnation: l.incarnation[c], Generation: u.GetGrapnelGeneration()}
	if !l.states.Offer(ingest.Report{Agent: c.name, Mark: mark, States: states}) {
		l.s.log.Debug("dropping a stale workload state report", "agent", c.name,
			"incarnation", mark.Incarnation, "generation", mark.Generation)
	}
}

// proposeBatches proposes the next batch of state reports when none is
// in flight.
func (l *leader) proposeBatches() {
	if l.projected.stale() || l.pipe.full() {
		return
	}
	if b, ok := l.states.Next(); ok {
		l.proposeReports(b.Reports, true, "")
	}
}

// proposeReportsSplit proposes reports the server makes itself (all of
// an agent's pending reports as it goes, its states of a previous life,
// every agent's stored states at a cold start) as entries of at most
// ingest.DefaultMaxBatch states, as the dispatcher batches the agents'
// own: one entry of all of them could run past max_update_bytes, and be
// refused with its states lost, and held the leader loop for as long as
// the states are many (issue 27). They go in order; a report cut in
// parts carries its mark on its last part only (ingest.States.Next).
func (l *leader) proposeReportsSplit(reports []ingest.Report, decision string) {
	for _, entry := range splitReports(reports, ingest.DefaultMaxBatch) {
		l.proposeReports(entry, false, decision)
	}
}

// splitReports groups reports, in order, into entries of at most limit
// states, cutting a report that does not fit.
func splitReports(reports []ingest.Report, limit int) [][]ingest.Report {
	var (
		out  [][]ingest.Report
		cur  []ingest.Report
		room = limit
	)
	for _, r := range reports {
		for len(r.States) > room {
			part := ingest.Report{Agent: r.Agent, States: r.States[:room]}
			r.States = r.States[room:]
			out = append(out, append(cur, part))
			cur, room = nil, limit
		}
		cur = append(cur, r)
		room -= len(r.States)
		if room == 0 {
			out = append(out, cur)
			cur, room = nil, limit
		}
	}
	if len(cur) > 0 {
		out = append(out, cur)
	}
	return out
}

// proposeReports proposes conflated state reports as one entry; once it
// is committed each report goes to everyone but its agent, and events are
// sent. batch tells whether it is the dispatcher's batch in flight;
// decision, if not empty, says why the server set the states itself,
// which makes the entry a transaction of the history.
//
// swdd~server-stores-workload-state~1
// swdd~server-forwards-workload-state~1
// swdd~server-cleans-up-state~1
// swdd~server-sends-event-for-updated-workload-states~1
// swdd~server-sends-event-for-removed-workload-states~1
func (l *leader) proposeReports(reports []ingest.Report, batch bool, decision string) {
	body := &fsm.WorkloadReportsRequest{Reports: make([]fsm.AgentReport, len(reports)), History: l.historyMeta("", nil, false)}
	body.History.Decision = decision
	n := 0
	for i, r := range reports {
		body.Reports[i] = fsm.AgentReport{Agent: r.Agent, Mark: r.Mark, States: r.States}
		n += len(r.States)
	}
	l.s.cfg.Metrics.ObserveBatch(fsm.WorkloadReportsType.String(), n)
	l.propose(body, func(resp any, index uint64) {
		if batch {
			l.states.Settle(true)
		}
		stale := map[string]bool{}
		var fresh []state.InstanceName
		if r, ok := resp.(*fsm.WorkloadReportsResponse); ok {
			for _, a := range r.Stale {
				stale[a] = true
			}
			fresh = r.New
		}
		var all []state.WorkloadState
		for _, r := range body.Reports {
			if stale[r.Agent] {
				continue
			}
			l.broadcastStates(r.Agent, r.States, index)
			all = append(all, r.States...)
		}
		if len(all) > 0 && l.events.HasSubscribers() {
			for _, ev := range stateEvents(all, fresh) {
				l.emit(ev.diff, statesTree(ev.states))
			}
		}
	}, func(error) {
		if batch {
			l.states.Settle(false)
		}
	})
}
