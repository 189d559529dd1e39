package fsm

import (
	"fmt"

	"github.com/grapnel-io/grapnel/state"
)

// Execute applies one decoded command to a store, exactly as Apply does
// after decoding: with the execute of its type's entry in the command
// table (commands.go). The leader runs it on its speculative copy of the
// store so that it plans the next update on what the FSM will hold.
func Execute(st *state.Store, cmd Command, index uint64) any {
	if cmd != nil {
		if c, ok := commands[cmd.Type()]; ok && c.execute != nil {
			return c.execute(st, cmd, index)
		}
	}
	// Only a programming error on the leader gets here: a committed entry
	// always decodes into a command of the table.
	return fmt.Errorf("%w: %T is not a command", ErrBadCommand, cmd)
}

// The executes of the command table that have no file of their own
// (placement.go, problems.go). Each answers nil, an error for a command
// the store refused (nothing changed), or the type's response.

// executeUpdate applies UpdateDesiredStatePackedType, refused unless it
// builds on the stored desired state (ErrOutOfSequence).
func executeUpdate(st *state.Store, r *UpdateDesiredStateRequest, index uint64) any {
	if st.DesiredSeq+1 != r.Seq {
		return fmt.Errorf("%w: it is update %d, the store holds %d", ErrOutOfSequence, r.Seq, st.DesiredSeq)
	}
	h := st.History
	var (
		tx *state.Tx
		tr []state.Transition
	)
	if h != nil {
		noteHistory(h, r.History, index)
		tx = state.TxOfUpdate(st, &r.Update)
		tr = state.RemovedTransitions(st, &r.Update, index, timeOf(r.History))
	}
	st.ApplyDesired(&r.Update, index)
	if tx != nil {
		recordUpdate(h, tx, r.History, index)
		if len(tr) > 0 {
			h.AppendTransitions(tr, timeOf(r.History))
		}
	}
	return nil
}

func executeAgentConnected(st *state.Store, r *AgentConnectedRequest, _ uint64) any {
	st.AgentConnected(r.Name, r.Tags)
	return nil
}

// executeAgentGone applies AgentGoneType and answers the states it turned
// AgentDisconnected (AgentGoneResponse).
func executeAgentGone(st *state.Store, r *AgentGoneRequest, index uint64) any {
	h := st.History
	var tr []state.Transition
	if h != nil {
		noteHistory(h, r.History, index)
		tr = state.TransitionsOf(st, disconnected(st, r.Name), index, timeOf(r.History))
	}
	resp := &AgentGoneResponse{Disconnected: st.AgentGone(r.Name)}
	if h != nil && len(tr) > 0 {
		recordDecision(h, "agent "+r.Name+" disconnected", tr, r.History, index)
		h.AppendTransitions(tr, timeOf(r.History))
	}
	return resp
}

// executeReports applies WorkloadReportsType and answers the stale
// reports and the new instances (WorkloadReportsResponse), if any.
func executeReports(st *state.Store, r *WorkloadReportsRequest, index uint64) any {
	h := st.History
	var (
		stale []string
		fresh []state.InstanceName
		trans []state.Transition
	)
	if h != nil {
		noteHistory(h, r.History, index)
	}
	for _, rep := range r.Reports {
		n := len(fresh)
		fresh = appendNew(st, fresh, rep.States)
		var tr, unknown []state.Transition
		once := st.RepairsOnce()
		if h != nil {
			tr = state.TransitionsOf(st, rep.States, index, timeOf(r.History))
			if once {
				unknown = state.UnknownRemovals(st, rep.States, index, timeOf(r.History))
			}
		}
		if !st.ApplyReport(rep.Agent, rep.Mark, rep.States) {
			stale = append(stale, rep.Agent)
			fresh = fresh[:n]
			continue
		}
		if h != nil {
			recordRepairs(h, rep.Agent, tr, r.History, index, once)
			// An unknown instance removed is a repair, not a transition.
			recordRepairs(h, rep.Agent, unknown, r.History, index, once)
		}
		trans = append(trans, tr...)
	}
	if h != nil && len(trans) > 0 {
		if r.History != nil && r.History.Decision != "" {
			recordDecision(h, r.History.Decision, trans, r.History, index)
		}
		h.AppendTransitions(trans, timeOf(r.History))
	}
	if stale != nil || fresh != nil {
		return &WorkloadReportsResponse{Stale: stale, New: fresh}
	}
	return nil
}

// appendNew appends to fresh the instances of states that have no state
// in the store, each once, in order. A set of them beside the list that
// keeps their order: a report of many new instances cost the square of
// their number (seconds for tens of thousands).
func appendNew(st *state.Store, fresh []state.InstanceName, states []state.WorkloadState) []state.InstanceName {
	var seen map[state.InstanceName]bool
	for _, ws := range states {
		if _, ok := st.States.Get(ws.Instance); ok || seen[ws.Instance] {
			continue
		}
		if seen == nil {
			seen = map[state.InstanceName]bool{}
		}
		seen[ws.Instance] = true
		fresh = append(fresh, ws.Instance)
	}
	return fresh
}

func executeHistoryNotes(st *state.Store, r *HistoryNotesRequest, index uint64) any {
	if st.History != nil {
		noteHistory(st.History, &r.History, index)
	}
	return nil
}

func executeLock(st *state.Store, r *LockObjectsRequest, _ uint64) any {
	if err := st.TakeLocks(r.Objects, r.Owner, r.Reason, r.NowMs, r.ExpiresMs); err != nil {
		return err
	}
	return nil
}

func executeUnlock(st *state.Store, r *UnlockObjectsRequest, _ uint64) any {
	if err := st.ReleaseLocks(r.Objects, r.Owner, r.NowMs, r.Force); err != nil {
		return err
	}
	return nil
}

func executeRemoval(st *state.Store, r *ReplicaRemovalRequest, index uint64) any {
	if r.Forget {
		st.ForgetRemoval(r.ID)
		return nil
	}
	if r.Incarnation != 0 {
		st.RecordRemoval(r.ID, r.Incarnation, index)
	}
	st.RevokeReplica(r.ID, r.Certs, index, r.TimeMs)
	return nil
}

func executeCertificate(st *state.Store, r *ReplicaCertificateRequest, _ uint64) any {
	st.RecordReplicaCert(r.ID, r.Cert)
	return nil
}

func executeClusterVersion(st *state.Store, r *SetClusterVersionRequest, _ uint64) any {
	st.SetClusterVersion(r.Version)
	return nil
}
