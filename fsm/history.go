package fsm

import (
	"strings"

	"github.com/grapnel-io/grapnel/state"
)

// The history part of Execute (docs/history.md). Everything appended is
// a function of the command (what the leader decided: time, requester,
// masks, limits, rejections) and of the store before it, so that every
// replica appends the same records. A store without a history (the
// leader's speculative one) skips all of it.

// noteHistory takes an entry's limits and records the rejections that
// ride along in it, before the command's own records: they came first.
func noteHistory(h *state.History, m *HistoryMeta, index uint64) {
	if m == nil {
		return
	}
	h.SetLimits(m.Limits)
	for _, r := range m.Rejections {
		h.AppendTx(&state.Tx{Index: index, TimeMs: r.TimeMs, Kind: state.TxRejected, Requester: r.Requester,
			UpdateMask: r.UpdateMask, Reason: r.Reason, Count: r.Count})
	}
}

// timeOf is the leader's time of an entry; zero for an entry written
// before the history existed.
func timeOf(m *HistoryMeta) int64 {
	if m == nil {
		return 0
	}
	return m.TimeMs
}

// recordUpdate appends an update's transaction, computed before it was
// applied.
func recordUpdate(h *state.History, tx *state.Tx, m *HistoryMeta, index uint64) {
	tx.Index = index
	if m != nil {
		tx.TimeMs, tx.Requester, tx.UpdateMask = m.TimeMs, m.Requester, m.UpdateMask
	}
	h.AppendTx(tx)
}

// recordDecision appends a decision's transaction and the transitions it
// made; nothing when it changed no state.
func recordDecision(h *state.History, reason string, tr []state.Transition, m *HistoryMeta, index uint64) {
	if len(tr) == 0 {
		return
	}
	tx := &state.Tx{Index: index, TimeMs: timeOf(m), Kind: state.TxDecision, Requester: "server", Reason: reason}
	for _, t := range tr {
		tx.Workloads = append(tx.Workloads, state.TxWorkload{Name: t.Instance.WorkloadName, Op: state.OpStates,
			Instance: t.Instance.String(), States: []string{t.State.Short()}})
	}
	h.AppendTx(tx)
}

// recordRepairs records each transition of one agent's report that a
// drift repair caused (its state's reason starts with state.DriftPrefix)
// as a TxRepair transaction of its own, asked by the agent: one report
// may carry the repairs of several instances, each with its reason.
// With once (state.Store.RepairsOnce), a state the agent reported
// before is no new repair: after a replica or agent restart the server
// set the state aside (Pending(Initial), AgentDisconnected) and the
// agent reports its instances again.
func recordRepairs(h *state.History, agent string, tr []state.Transition, m *HistoryMeta, index uint64, once bool) {
	for _, t := range tr {
		info := t.State.AdditionalInfo
		if !strings.HasPrefix(info, state.DriftPrefix) {
			continue
		}
		if last, ok := h.LastReported(t.Instance); once && ok && last == t.State {
			continue
		}
		h.AppendTx(&state.Tx{Index: index, TimeMs: timeOf(m), Kind: state.TxRepair, Requester: agent, Reason: info,
			Workloads: []state.TxWorkload{{Name: t.Instance.WorkloadName, Op: state.OpStates,
				Instance: t.Instance.String(), States: []string{t.State.String()}}}})
	}
}

// disconnected is every state of an agent turned AgentDisconnected, as
// AgentGone will set them.
func disconnected(st *state.Store, agent string) []state.WorkloadState {
	states := st.States.OfAgent(agent)
	for i := range states {
		states[i].State = state.AgentDisconnected
	}
	return states
}
