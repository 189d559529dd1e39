package fsm

import "github.com/grapnel-io/grapnel/state"

// executeAgentMode applies SetAgentModeType and records it in the
// history as a TxAgentMode transaction, asked by the requester the leader
// put in it.
func executeAgentMode(st *state.Store, r *SetAgentModeRequest, index uint64) any {
	old := st.AgentMode(r.Agent)
	st.SetAgentMode(r.Agent, r.Mode)
	h := st.History
	if h == nil {
		return nil
	}
	noteHistory(h, r.History, index)
	tx := &state.Tx{Index: index, TimeMs: timeOf(r.History), Kind: state.TxAgentMode,
		Reason: "agent " + r.Agent + ": " + old.String() + " → " + r.Mode.String()}
	if r.History != nil {
		tx.Requester = r.History.Requester
	}
	h.AppendTx(tx)
	return nil
}

// executePlacement applies PlacementType and records it as a TxPlacement
// transaction: each instance placed an OpAdded, each moved off an
// OpDeleted, and the states it set as transitions.
func executePlacement(st *state.Store, r *PlacementRequest, index uint64) any {
	h := st.History
	var (
		tx *state.Tx
		tr []state.Transition
	)
	if h != nil {
		noteHistory(h, r.History, index)
		tx = &state.Tx{Index: index, TimeMs: timeOf(r.History), Kind: state.TxPlacement, Requester: "server"}
		if r.History != nil {
			tx.Reason = r.History.Decision
		}
		for _, w := range state.SortedKeys(r.Update.Layout) {
			old, next := toSet(st.Placement[w]), toSet(r.Update.Layout[w])
			rw := st.Rendered[w]
			inst := func(agent string) string {
				n := rw.Instance
				n.WorkloadName, n.AgentName = w, agent
				return n.String()
			}
			for _, a := range r.Update.Layout[w] {
				if !old[a] {
					tx.Workloads = append(tx.Workloads, state.TxWorkload{Name: w, Op: state.OpAdded, Instance: inst(a)})
				}
			}
			for _, a := range st.Placement[w] {
				if !next[a] {
					tx.Workloads = append(tx.Workloads, state.TxWorkload{Name: w, Op: state.OpDeleted, OldInstance: inst(a)})
				}
			}
		}
		tr = state.TransitionsOf(st, r.Update.SetStates, index, timeOf(r.History))
	}
	st.ApplyPlacement(&r.Update)
	if h != nil {
		h.AppendTx(tx)
		if len(tr) > 0 {
			h.AppendTransitions(tr, timeOf(r.History))
		}
	}
	return nil
}

func toSet(xs []string) map[string]bool {
	m := make(map[string]bool, len(xs))
	for _, x := range xs {
		m[x] = true
	}
	return m
}
