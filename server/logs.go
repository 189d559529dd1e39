package server

import (
	"fmt"
	"log/slog"
	"slices"
	"strings"

	"github.com/grapnel-io/grapnel/rpc"
	"github.com/grapnel-io/grapnel/rpc/ankbase"
	"github.com/grapnel-io/grapnel/rpc/grpcapi"
	"github.com/grapnel-io/grapnel/rpc/wire"
	"github.com/grapnel-io/grapnel/state"
)

// DefaultMaxLogCampaignsPerRequester is how many live log campaigns one
// requester (a client connection, a workload on an agent) may have: more
// than an agent allows a workload by default (8), so that the server's
// cap only stops an agent that does not keep its own.
const DefaultMaxLogCampaignsPerRequester = 32

// logsRequest keeps the requested instances that exist in the committed
// desired state, asks their agents for logs, records the campaign and
// accepts; in turn with the requests before it.
//
// swdd~server-handles-logs-request-message~1
func (l *leader) logsRequest(id string, req *ankbase.LogsRequest) {
	l.pipe.ordered(func() { l.startLogs(id, req) })
}

func (l *leader) startLogs(id string, req *ankbase.LogsRequest) {
	if n, max := l.logs.Live(id), l.s.cfg.MaxLogCampaignsPerRequester; n >= max {
		l.refuseLogs(id, n, max)
		return
	}
	perAgent := map[string][]*ankbase.WorkloadInstanceName{}
	var accepted []state.InstanceName
	l.s.fsm.Read(func(st *state.Store, _ uint64) {
		for _, p := range req.GetWorkloadNames() {
			n := rpc.InstanceNameFromProto(p)
			if !slices.Contains(st.Instances(n.WorkloadName), n) {
				continue
			}
			accepted = append(accepted, n)
			perAgent[n.AgentName] = append(perAgent[n.AgentName], p)
		}
	})
	if len(accepted) > 0 {
		for _, agent := range state.SortedKeys(perAgent) {
			filtered := &ankbase.LogsRequest{WorkloadNames: perAgent[agent], Follow: req.Follow, Tail: req.Tail, Since: req.Since, Until: req.Until}
			msg := &grpcapi.FromServer{FromServerEnum: &grpcapi.FromServer_LogsRequest{
				LogsRequest: &grpcapi.LogsRequest{RequestId: id, LogsRequest: filtered}}}
			c := l.agentConn(agent)
			if c == nil {
				// Not (yet) connected to this leader: asked when it
				// greets it (sendWaitingLogs).
				if l.waitingLogs[agent] == nil {
					l.waitingLogs[agent] = map[string]*grpcapi.FromServer{}
				}
				l.waitingLogs[agent][id] = msg
				continue
			}
			c.send(msg)
		}
		l.logs.Insert(id, accepted)
	}
	names := make([]*ankbase.WorkloadInstanceName, 0, len(accepted))
	for _, n := range accepted {
		names = append(names, rpc.InstanceNameToProto(n))
	}
	l.respond(id, &ankbase.Response{ResponseContent: &ankbase.Response_LogsRequestAccepted{
		LogsRequestAccepted: &ankbase.LogsRequestAccepted{WorkloadNames: names}}})
}

// sendWaitingLogs asks an agent that just greeted this leader for the
// logs of the live campaigns that asked for them while it was away. A
// campaign already cancelled or over is not asked for.
func (l *leader) sendWaitingLogs(c *conn) {
	waiting := l.waitingLogs[c.name]
	delete(l.waitingLogs, c.name)
	for _, id := range state.SortedKeys(waiting) {
		if l.logs.HasProvider(id, c.name) {
			c.send(waiting[id])
		}
	}
}

// refuseLogs answers a logs request past the requester's cap; no agent
// is asked. Whoever sends it, a workload (whose agent keeps a lower cap
// of its own) or a client, can ask every agent for logs, so the server
// bounds it too (issue 27, point 5).
func (l *leader) refuseLogs(id string, n, max int) {
	who, what := "client", "connection"
	if _, rest, _ := rpc.SplitRequestID(id); strings.Contains(rest, "@") {
		who, what = "workload", "workload '"+strings.SplitN(rest, "@", 2)[0]+"'"
	}
	l.s.cfg.Metrics.RefusedLogCampaign(who)
	conn, _, _ := rpc.SplitRequestID(id)
	l.s.refusals.Log(l.s.log, slog.LevelWarn, "logcap|"+conn, "refused a log campaign over the requester's cap",
		"request", id, "live", n, "max", max)
	l.respondText(id, fmt.Sprintf("Log campaign refused: the %s has %d live log campaigns, as many as the server allows one requester (--max-log-campaigns-per-requester %d); cancel one or wait for one to end",
		what, n, max))
}

// logsCancel ends a campaign on request.
//
// swdd~server-handles-logs-cancel-request-message~1
func (l *leader) logsCancel(id string) {
	l.pipe.ordered(func() {
		l.logs.Remove(id)
		l.sendLogsCancel(id)
		l.respond(id, &ankbase.Response{ResponseContent: &ankbase.Response_LogsCancelAccepted{LogsCancelAccepted: &ankbase.LogsCancelAccepted{}}})
	})
}

// forwardLogEntries routes an agent's log batch to the collector, if the
// agent provides every instance of the batch for that live campaign;
// otherwise the batch is dropped, so that nobody can put lines into
// another's campaign by choosing its request id.
//
// swdd~server-forwards-logs-entries-response-messages~1
func (l *leader) forwardLogEntries(c *conn, m *grpcapi.LogEntriesResponse) {
	id := m.GetRequestId()
	entries := m.GetLogEntriesResponse().GetLogEntries()
	if len(entries) == 0 && (c.kind != wire.KindAgent || !l.logs.HasProvider(id, c.name)) {
		l.dropLogResponse(c, id, nil)
		return
	}
	for _, e := range entries {
		if !l.providesLogs(c, id, e.GetWorkloadName()) {
			l.dropLogResponse(c, id, e.GetWorkloadName())
			return
		}
	}
	l.respond(id, &ankbase.Response{ResponseContent: &ankbase.Response_LogEntriesResponse{
		LogEntriesResponse: m.GetLogEntriesResponse()}})
}

// forwardLogsStop routes the end of a log source to the collector, under
// the same condition.
//
// swdd~server-forwards-logs-stop-response-messages~1
func (l *leader) forwardLogsStop(c *conn, m *grpcapi.LogsStopResponse) {
	id := m.GetRequestId()
	n := m.GetLogsStopResponse().GetWorkloadName()
	if !l.providesLogs(c, id, n) {
		l.dropLogResponse(c, id, n)
		return
	}
	l.respond(id, &ankbase.Response{ResponseContent: &ankbase.Response_LogsStopResponse{
		LogsStopResponse: m.GetLogsStopResponse()}})
	// The instance ends its part; the campaign ends with its last one.
	l.logs.Stopped(id, c.name, rpc.InstanceNameFromProto(n))
}

// providesLogs reports whether c is the agent a live campaign asked for
// the logs of inst.
func (l *leader) providesLogs(c *conn, id string, inst *ankbase.WorkloadInstanceName) bool {
	return c.kind == wire.KindAgent && inst != nil && l.logs.Provides(id, c.name, rpc.InstanceNameFromProto(inst))
}

// dropLogResponse logs (rate-limited) and counts a log response that is
// not forwarded.
func (l *leader) dropLogResponse(c *conn, id string, inst *ankbase.WorkloadInstanceName) {
	from := "client"
	if c.kind == wire.KindAgent {
		from = "agent"
	}
	l.s.cfg.Metrics.DroppedLogResponse(from)
	l.s.refusals.Log(l.s.log, slog.LevelWarn, "logs|"+c.name, "dropped a log response its sender does not provide",
		"conn", c.name, "request", id, "instance", rpc.InstanceNameFromProto(inst).String())
}

// sendLogsCancel tells every agent to stop collecting for a campaign.
func (l *leader) sendLogsCancel(id string) {
	msg := &grpcapi.FromServer{FromServerEnum: &grpcapi.FromServer_LogsCancelRequest{
		LogsCancelRequest: &grpcapi.LogsCancelRequest{RequestId: id}}}
	for _, c := range l.s.conns.allAgents() {
		c.send(msg)
	}
}

// sendLogsStop tells a collector that a source will send no more logs.
func (l *leader) sendLogsStop(id string, inst state.InstanceName) {
	l.respond(id, &ankbase.Response{ResponseContent: &ankbase.Response_LogsStopResponse{
		LogsStopResponse: &ankbase.LogsStopResponse{WorkloadName: rpc.InstanceNameToProto(inst)}}})
}
