package server

import (
	"strings"

	"google.golang.org/protobuf/proto"

	"github.com/grapnel-io/grapnel/rpc"
	"github.com/grapnel-io/grapnel/rpc/ankbase"
	"github.com/grapnel-io/grapnel/rpc/grpcapi"
	"github.com/grapnel-io/grapnel/server/secrets"
	"github.com/grapnel-io/grapnel/state"
)

// completeState answers a CompleteStateRequest, optionally filtered by
// field masks, and registers an event subscription if asked.
//
// swdd~server-provides-interface-get-complete-state~2
// swdd~server-filters-get-complete-state-result~2
// swdd~server-filters-get-complete-state-result-with-wildcards~1
// swdd~server-includes-id-in-control-interface-response~1
// swdd~server-stores-new-event-subscription~1
// swdd~server-state-in-memory~1
//
// The answer waits for the proposals before it, so a client reads what
// it wrote; it reads the committed state.
func (l *leader) completeState(id string, req *ankbase.CompleteStateRequest) {
	subscribe := req.GetSubscribeForEvents()
	if subscribe {
		l.pendingSubs++
	}
	l.pipe.ordered(func() {
		if subscribe {
			l.pendingSubs--
			if refusal := l.admitSubscription(id); refusal != "" {
				l.respondText(id, refusal)
				return
			}
		}
		cs := l.readCompleteState(req.GetFieldMask())
		resp := &ankbase.Response{RequestId: id, ResponseContent: &ankbase.Response_CompleteStateResponse{
			CompleteStateResponse: &ankbase.CompleteStateResponse{CompleteState: cs}}}
		// gRPC would refuse an answer over the message limit and end the
		// stream, so that the client could never read the state again;
		// it gets the reason and what to ask instead. The size counts
		// the whole id, a little more than goes out.
		if n := proto.Size(&grpcapi.FromServer{FromServerEnum: &grpcapi.FromServer_Response{Response: resp}}); n > l.s.cfg.MaxMessageBytes {
			l.s.log.Warn("complete state answer over the message limit; answered with an error", "request", id, "bytes", n,
				"limit", l.s.cfg.MaxMessageBytes, "field_mask", req.GetFieldMask())
			l.respondError(id, answerTooLarge(true, n, l.s.cfg.MaxMessageBytes))
			return
		}
		l.respond(id, resp)
		if subscribe {
			l.events.Add(id, req.GetFieldMask())
		}
	})
}

// eventsCancel ends a subscription, in turn with the requests before it.
//
// swdd~server-removes-event-subscription~1
func (l *leader) eventsCancel(id string) {
	l.pipe.ordered(func() {
		l.events.Remove(id)
		l.respond(id, &ankbase.Response{ResponseContent: &ankbase.Response_EventsCancelAccepted{EventsCancelAccepted: &ankbase.EventsCancelAccepted{}}})
	})
}

// readCompleteState builds the (filtered) CompleteState. Without masks it
// converts the model directly, and so it does for a part a mask names
// whole (`workloadStates`, `agents`, `desiredState`); for the other masks
// it converts only the top-level parts they name to a Tree and filters
// that. Going through the Tree costs three passes over the part (64,000
// workload states: about 0.3 s of the leader loop; issue 27). One read
// of the store serves all of it. On an internal error it answers an
// empty CompleteState, as Ankaios does.
func (l *leader) readCompleteState(masks []string) *ankbase.CompleteState {
	if len(masks) == 0 {
		var cs *ankbase.CompleteState
		l.s.fsm.Read(func(st *state.Store, _ uint64) {
			cs = rpc.CompleteStateToProto(&state.CompleteState{DesiredState: secrets.MaskState(st.Desired), WorkloadStates: st.States, Agents: l.agentsWithStatus(st.Agents)})
		})
		return cs
	}
	whole := map[string]bool{}
	for _, m := range masks {
		if m == "desiredState" || m == "workloadStates" || m == "agents" {
			whole[m] = true
		}
	}
	roots := map[string]bool{}
	var rest []string
	for _, m := range masks {
		root, _, _ := strings.Cut(m, ".")
		if whole[root] {
			continue // the part goes whole
		}
		roots[root] = true
		rest = append(rest, m)
	}
	t := state.Tree{}
	direct := &ankbase.CompleteState{}
	l.s.fsm.Read(func(st *state.Store, _ uint64) {
		switch {
		case whole["desiredState"]:
			direct.DesiredState = rpc.StateToProto(secrets.MaskState(st.Desired))
		case roots["desiredState"] || roots["*"]:
			t["desiredState"] = secrets.MaskState(st.Desired).ToTree()
		}
		switch {
		case whole["workloadStates"]:
			direct.WorkloadStates = rpc.WorkloadStatesMapToProto(st.States)
		case roots["workloadStates"] || roots["*"]:
			t["workloadStates"] = st.States.ToTree()
		}
		switch {
		case whole["agents"]:
			direct.Agents = rpc.AgentMapToProto(l.agentsWithStatus(st.Agents))
		case roots["agents"] || roots["*"]:
			t["agents"] = l.agentsWithStatus(st.Agents).ToTree()
		}
	})
	cs := &ankbase.CompleteState{}
	if len(rest) > 0 {
		var err error
		if cs, err = rpc.CompleteStateFromTree(state.FilterTree(t, rest)); err != nil {
			l.s.log.Warn("filtered state could not be encoded", "error", err)
			return &ankbase.CompleteState{}
		}
	}
	if direct.DesiredState != nil {
		cs.DesiredState = direct.DesiredState
	}
	if direct.WorkloadStates != nil {
		cs.WorkloadStates = direct.WorkloadStates
	}
	if direct.Agents != nil {
		cs.Agents = direct.Agents
	}
	return cs
}
