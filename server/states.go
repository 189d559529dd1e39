package server

import (
	"log/slog"

	"github.com/grapnel-io/grapnel/state"
)

// DefaultMaxWorkloadStates bounds the workload states the agents'
// reports can make the cluster hold. An agent may report the state of
// any instance of its own, known to the cluster or not (Ankaios stores
// them all, and an agent reports the instances a restarted server no
// longer knows while it deletes them), so without a bound one agent's
// reports of made-up instances grew the store, every snapshot, every
// complete state and every agent's hello without end, and with them the
// time the leader loop spends on each (issue 27). The default is above
// what the default limits let the desired state hold (1,000 workloads of
// at most 64 placed instances each), so a cluster within them never
// meets it.
const DefaultMaxWorkloadStates = 65536

// admitReported drops, from an agent's report, the states of instances
// the cluster has no state for (stored, proposed or waiting in the
// agent's conflation unit) beyond what the cap leaves room for. States of
// instances it knows always pass, as do removals, which free room; the
// states the server sets itself (an update's Pending(Initial), a
// layout's) are bounded by the desired state's limits instead. What is
// dropped is counted and logged, at most once per agent per
// refusalLogWindow.
func (l *leader) admitReported(agent string, states []state.WorkloadState) []state.WorkloadState {
	st := l.projected.store
	known := func(in state.InstanceName) bool {
		if _, ok := st.States.Get(in); ok {
			return true
		}
		return l.states.Holds(agent, in)
	}
	unknown := 0
	for _, ws := range states {
		if !ws.State.IsRemoved() && !known(ws.Instance) {
			unknown++
		}
	}
	if unknown == 0 {
		return states
	}
	// The count is taken only now, for a report that names an unknown
	// instance; pending instances may be known too, so room errs low.
	limit := l.s.cfg.MaxWorkloadStates
	room := limit - st.States.Len() - l.states.Pending()
	if room >= unknown {
		return states
	}
	kept := make([]state.WorkloadState, 0, len(states))
	admitted := map[state.InstanceName]bool{}
	dropped := 0
	for _, ws := range states {
		switch {
		case ws.State.IsRemoved() || admitted[ws.Instance] || known(ws.Instance):
		case len(admitted) < room:
			admitted[ws.Instance] = true
		default:
			dropped++
			continue
		}
		kept = append(kept, ws)
	}
	l.s.cfg.Metrics.DroppedWorkloadStates(dropped)
	l.s.refusals.Log(l.s.log, slog.LevelWarn, "states|"+agent,
		"dropped reported states of instances the cluster has no state for: it holds as many workload states as --max-workload-states allows",
		"agent", agent, "dropped", dropped, "max_workload_states", limit)
	return kept
}
