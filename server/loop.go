package server

import (
	"fmt"

	"github.com/grapnel-io/grapnel/rpc"
	"github.com/grapnel-io/grapnel/rpc/ankbase"
	"github.com/grapnel-io/grapnel/rpc/authz"
	"github.com/grapnel-io/grapnel/rpc/grpcapi"
	"github.com/grapnel-io/grapnel/rpc/wire"
)

// The leader loop runs each inbox message's handle. Answers go out in
// the order the requests came: an answer that needs no proposal still
// waits for the proposals before it (pipeline.ordered).
//
// swdd~server-uses-async-channels~1

func (m helloMsg) handle(l *leader) {
	if m.agent != nil {
		l.agentHello(m.c, m.agent)
	}
	// A CLI or commander needs nothing until it asks.
}

func (m goneMsg) handle(l *leader) {
	if m.c.kind == wire.KindAgent {
		l.agentGone(m.c)
	} else {
		l.cliGone(m.c.name)
	}
}

func (c *resyncCall) handle(l *leader) { c.done <- l.resyncAgent(c.agent) }
func (c *modeCall) handle(l *leader)   { l.setAgentMode(c) }
func (c *planCall) handle(l *leader)   { l.planCall(c) }

// cliGone ends what a CLI connection left behind.
//
// swdd~server-removes-event-subscription-for-disconnected-cli~1
// swdd~server-cancels-log-campaign-for-disconnected-cli~1
func (l *leader) cliGone(conn string) {
	l.events.RemoveConnection(conn)
	for _, id := range l.logs.RemoveByConnection(conn) {
		l.sendLogsCancel(id)
	}
}

// handle dispatches one stream message, a request by its content.
func (sm streamMsg) handle(l *leader) {
	c, m := sm.c, sm.m
	if !l.permitted(c, m) {
		return
	}
	switch x := m.ToServerEnum.(type) {
	case *grpcapi.ToServer_Request:
		req := x.Request
		if c.kind == wire.KindAgent {
			if err := l.checkForwarded(c, req); err != nil {
				l.refuseForwarded(c, req, err)
				return
			}
		}
		id := req.GetRequestId()
		switch r := req.RequestContent.(type) {
		case *ankbase.Request_UpdateStateRequest:
			l.updateState(requester(c), c.owner, id, l.s.connAdmission(c, id), r.UpdateStateRequest)
		case *ankbase.Request_CompleteStateRequest:
			l.completeState(id, r.CompleteStateRequest)
		case *ankbase.Request_LogsRequest:
			l.logsRequest(id, r.LogsRequest)
		case *ankbase.Request_LogsCancelRequest:
			l.logsCancel(id)
		case *ankbase.Request_EventsCancelRequest:
			l.eventsCancel(id)
		default:
			l.pipe.ordered(func() { l.respondError(id, fmt.Errorf("unsupported request")) })
		}
	case *grpcapi.ToServer_UpdateWorkloadState:
		if c.kind == wire.KindAgent {
			l.workloadStates(c, x.UpdateWorkloadState)
		}
	case *grpcapi.ToServer_AgentLoadStatus:
		if c.kind == wire.KindAgent {
			l.agentLoad(c.name, x.AgentLoadStatus)
		}
	case *grpcapi.ToServer_LogEntriesResponse:
		l.forwardLogEntries(c, x.LogEntriesResponse)
	case *grpcapi.ToServer_LogsStopResponse:
		l.forwardLogsStop(c, x.LogsStopResponse)
	case *grpcapi.ToServer_Goodbye:
		// An agent that says goodbye has its workloads unobserved when its
		// stream ends, then the reconnect grace (agentGone); a CLI's
		// goodbye ends its subscriptions and campaigns now.
		if c.kind == wire.KindAgent {
			c.saidGoodbye = true
		} else {
			l.cliGone(c.name)
		}
	case *grpcapi.ToServer_AgentHello, *grpcapi.ToServer_CommanderHello:
		l.s.log.Warn("ignoring a second hello", "conn", c.name)
	}
}

// permitted checks one stream message against the sender's role
// (rpc/authz; the stream itself was checked when it opened): a CLI's or
// commander's request needs the right its kind needs, and an agent's
// state report keeps only its own workloads (Server.ownStates). A
// refused request is answered with the refusal and changes nothing.
// Without TLS everything passes.
func (l *leader) permitted(c *conn, m *grpcapi.ToServer) bool {
	switch x := m.ToServerEnum.(type) {
	case *grpcapi.ToServer_Request:
		if c.kind == wire.KindAgent || x.Request.GetRequestContent() == nil {
			// A workload's request, forwarded by its agent; an empty
			// one is answered as unsupported.
			return true
		}
		kind := authz.RequestKind(x.Request)
		if err := authz.Check(c.who, kind); err != nil {
			l.s.refused(c.who, kind, err)
			id := x.Request.GetRequestId()
			l.pipe.ordered(func() { l.respondError(id, err) })
			return false
		}
	case *grpcapi.ToServer_UpdateWorkloadState:
		if c.kind == wire.KindAgent {
			l.s.ownStates(c, x.UpdateWorkloadState)
		}
	}
	return true
}

// respond routes a response to the connection named by the request id's
// prefix, stripping the prefix.
func (l *leader) respond(requestID string, resp *ankbase.Response) {
	connName, rest, ok := rpc.SplitRequestID(requestID)
	if !ok {
		return
	}
	c := l.s.conns.byName(connName)
	if c == nil {
		return
	}
	resp.RequestId = rest
	c.send(&grpcapi.FromServer{FromServerEnum: &grpcapi.FromServer_Response{Response: resp}})
	c.answered(rest)
}

func (l *leader) respondError(requestID string, err error) { l.respondText(requestID, err.Error()) }

// respondText answers with an Error carrying msg, as Ankaios words it.
func (l *leader) respondText(requestID, msg string) {
	l.respond(requestID, &ankbase.Response{ResponseContent: &ankbase.Response_Error{Error: &ankbase.Error{Message: msg}}})
}
