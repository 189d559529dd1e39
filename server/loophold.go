package server

import (
	"time"

	"github.com/grapnel-io/grapnel/internal/clock"
	"github.com/grapnel-io/grapnel/rpc/ankbase"
	"github.com/grapnel-io/grapnel/rpc/grpcapi"
	"github.com/grapnel-io/grapnel/rpc/wire"
)

// The leader loop serves one event at a time, so how long each event
// holds it is how long it delays every other request (docs/security.md,
// "One request cannot stall the leader"). The loop measures each event,
// its handler and the step after it, on the real clock: the hold is a
// measurement, never a decision, and it must be true under a fake clock
// too (the pipeline takes the real clock for the same reason). It is
// exported as grapnel_leader_loop_seconds{event}.

// loopClock times the leader loop's events.
var loopClock = clock.Real()

// loopObserver, when set (benchmarks), is told every event's hold as
// well.
type loopObserver func(event string, held time.Duration)

// held records that the loop spent from start until now on event.
func (s *Server) held(event string, start time.Time) {
	d := loopClock.Now().Sub(start)
	s.cfg.Metrics.ObserveLoop(event, d)
	if o := s.loopObs.Load(); o != nil {
		(*o)(event, d)
	}
}

// observeLoop sets (nil: clears) the observer of the loop's holds.
func (s *Server) observeLoop(o loopObserver) {
	if o == nil {
		s.loopObs.Store(nil)
		return
	}
	s.loopObs.Store(&o)
}

// The events of the leader loop besides the inbox's messages.
const (
	eventCommit       = "commit"        // a batch of entries settled
	eventGraceExpired = "grace_expired" // an agent's reconnect grace ended
	eventRejections   = "rejections"    // collected refusals flushed
	eventProblems     = "problems_wake" // the problems view's timer
	eventRestored     = "restored"      // a snapshot was restored
	eventStorage      = "storage_fault" // a replica's storage fault began or ended
	eventMembers      = "membership"    // the leader, configuration, gossip or a voter's health changed
)

// The event of each inbox message: what it asks of the loop, as a label
// of a bounded set.

func (*resyncCall) event() string { return "resync" }
func (*modeCall) event() string   { return "agent_mode" }
func (m streamMsg) event() string { return toServerEvent(m.m) }

func (m helloMsg) event() string {
	if m.agent != nil {
		return "agent_hello"
	}
	return "cli_hello"
}

func (m goneMsg) event() string {
	if m.c.kind == wire.KindAgent {
		return "agent_gone"
	}
	return "cli_gone"
}

// event names a call of the Plan or Locks service.
func (c *planCall) event() string {
	switch {
	case c.lock != nil && c.lock.take:
		return "lock"
	case c.lock != nil && c.lock.release:
		return "unlock"
	case c.lock != nil:
		return "list_locks"
	case c.revision:
		return "plan_revision"
	case c.apply:
		return "plan_apply"
	}
	return "plan_dry_run"
}

// toServerEvent names a stream message.
func toServerEvent(m *grpcapi.ToServer) string {
	switch x := m.GetToServerEnum().(type) {
	case *grpcapi.ToServer_Request:
		switch x.Request.GetRequestContent().(type) {
		case *ankbase.Request_UpdateStateRequest:
			return "update_state"
		case *ankbase.Request_CompleteStateRequest:
			return "complete_state"
		case *ankbase.Request_LogsRequest:
			return "logs"
		case *ankbase.Request_LogsCancelRequest:
			return "logs_cancel"
		case *ankbase.Request_EventsCancelRequest:
			return "events_cancel"
		}
		return "request_other"
	case *grpcapi.ToServer_UpdateWorkloadState:
		return "workload_states"
	case *grpcapi.ToServer_AgentLoadStatus:
		return "agent_load"
	case *grpcapi.ToServer_LogEntriesResponse:
		return "log_entries"
	case *grpcapi.ToServer_LogsStopResponse:
		return "logs_stop"
	case *grpcapi.ToServer_Goodbye:
		return "goodbye"
	}
	return "other"
}
