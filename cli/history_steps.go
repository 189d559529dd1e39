package cli

import (
	"strings"

	"github.com/grapnel-io/grapnel/rpc/grapnelpb"
	"github.com/grapnel-io/grapnel/state"
)

// Step is one step a transaction had executed on an agent: an instance
// started or stopped, with the time from the transaction to the state
// that ended the step and, when it failed, that state.
type Step struct {
	Action   string // "start" or "stop"
	Workload string
	Agent    string
	Instance string
	// Result is the state that ended the step, or the last one reported
	// while it has not ended ("" when none was).
	Result string
	Done   bool
	// DurationMs is from the transaction to Result, by the leader's clock.
	DurationMs int64
	// Error is Result when the step failed.
	Error string
}

// StepsOf derives a transaction's executed steps from the workload
// states the history records (each a replicated transition with its
// Raft index and leader time): every instance the transaction added is
// a start step that ends at its first final state after the
// transaction's entry, every instance it replaced or deleted a stop step
// that ends at its Removed. No step is recorded as such, so the history
// holds no extra field for them. timelines holds the timeline of each
// workload the transaction names.
func StepsOf(tx *grapnelpb.Transaction, timelines map[string][]*grapnelpb.TimelineEvent) []Step {
	var out []Step
	for _, w := range tx.GetWorkloads() {
		events := timelines[w.GetName()]
		if w.GetOldInstance() != "" && w.GetOldInstance() != w.GetInstance() && w.GetOp() != string(state.OpStates) {
			out = append(out, step(tx, "stop", w.GetName(), w.GetOldInstance(), events, stopEnds))
		}
		if w.GetInstance() != "" && w.GetInstance() != w.GetOldInstance() && w.GetOp() != string(state.OpDeleted) {
			out = append(out, step(tx, "start", w.GetName(), w.GetInstance(), events, startEnds))
		}
	}
	return out
}

// startEnds reports whether a state ends a start step, and whether it
// failed.
func startEnds(s string) (bool, bool) {
	for _, p := range []string{"Running(", "Succeeded(", "NotScheduled"} {
		if strings.HasPrefix(s, p) {
			return true, false
		}
	}
	if strings.HasPrefix(s, "Failed(") {
		return true, true
	}
	if strings.HasPrefix(s, "Pending(StartingFailed") {
		// The agent retries: the step goes on.
		return false, true
	}
	// Removed before it ran: another transaction replaced it.
	return strings.HasPrefix(s, "Removed"), false
}

// stopEnds: a stop step ends at Removed; Stopping(DeleteFailed) fails it.
func stopEnds(s string) (bool, bool) {
	if strings.HasPrefix(s, "Removed") {
		return true, false
	}
	return strings.HasPrefix(s, "Stopping(DeleteFailed"), true
}

func step(tx *grapnelpb.Transaction, action, workload, instance string, events []*grapnelpb.TimelineEvent, ends func(string) (bool, bool)) Step {
	st := Step{Action: action, Workload: workload, Instance: instance}
	if in, err := state.ParseInstanceName(instance); err == nil {
		st.Agent = in.AgentName
	}
	for _, ev := range events {
		if ev.GetSeq() != 0 || ev.GetIndex() <= tx.GetIndex() || ev.GetInstance() != instance {
			continue
		}
		st.Result = ev.GetState()
		st.DurationMs = ev.GetTimeMs() - tx.GetTimeMs()
		done, failed := ends(ev.GetState())
		switch {
		case failed:
			st.Error = ev.GetState()
		case done:
			st.Error = "" // a retry made it
		}
		if done {
			st.Done = true
			break
		}
	}
	return st
}
