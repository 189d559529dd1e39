package problems

import (
	"fmt"

	"github.com/grapnel-io/grapnel/state"
)

// "Failing repeatedly", observed without a periodic wake-up: the
// replicated history (state.History) holds every execution-state
// transition of every instance with the leader's time of the entry that
// carried it. An instance fails when it enters Failed(ExecFailed) (it
// ran and exited with an error) or Pending(StartingFailed) (its runtime
// could not start it); Failed(Lost) and Failed(Unknown) say what the agent
// does not know, not that the workload failed, and do not count.
//
// A problem opens when an instance has failed FailThreshold times within
// FailWindowMs before now. It stays open while the instance is in a
// failed state, or while its last failure is younger than the window; it
// closes when the instance is gone (deleted, or replaced by an update:
// the new instance starts with a clean slate) or has gone a whole window
// without failing. That last close is the only change with no entry to
// trigger it, so the detection reports it as Result.WakeAtMs: the leader
// arms one timer, for one detection, and only while such a problem is
// open with its instance not failed. A crash loop writes state reports
// anyway; a parked car with nothing failing arms nothing.
//
// What the history has pruned (docs/history.md: count, age and size
// limits) is not counted, so a small history undercounts, never
// overcounts.
const (
	FailThreshold = 3
	FailWindowMs  = 10 * 60 * 1000
)

// isFailure reports whether a state counts as a failure.
func isFailure(s state.ExecutionState) bool {
	return s.Is(state.StateFailed, state.SubExecFailed) || s.Is(state.StatePending, state.SubStartingFailed)
}

// failures is what the history says of one instance's failures.
type failures struct {
	inWindow int
	last     int64
}

// failingRepeatedly finds the instances that fail again and again.
func failingRepeatedly(st *state.Store, f *Facts, _ *Cache, r *Result) {
	if st.History == nil {
		return
	}
	from := f.NowMs - FailWindowMs
	seen := map[state.InstanceName]*failures{}
	var order []state.InstanceName
	for _, t := range st.History.Transitions {
		if !isFailure(t.State) {
			continue
		}
		c := seen[t.Instance]
		if c == nil {
			c = &failures{}
			seen[t.Instance] = c
			order = append(order, t.Instance)
		}
		if t.TimeMs > from {
			c.inWindow++
		}
		c.last = max(c.last, t.TimeMs)
	}
	for _, in := range order {
		c := seen[in]
		cur, ok := st.States.Get(in)
		if !ok {
			continue
		}
		k := key(FailingRepeatedly, in.String())
		_, open := st.Problems.Open[k]
		failing := isFailure(cur)
		recent := c.last > from
		if c.inWindow < FailThreshold && !(open && (failing || recent)) {
			continue
		}
		if !failing {
			r.wakeAt(c.last + FailWindowMs)
		}
		if p := st.Problems.Open[k]; p != nil {
			r.Findings = append(r.Findings, findingOf(p))
			continue
		}
		r.Findings = append(r.Findings, Finding{
			Kind: FailingRepeatedly, Key: k,
			Objects: []state.ProblemObject{{Kind: ObjWorkload, Name: in.WorkloadName}, {Kind: ObjAgent, Name: in.AgentName},
				{Kind: ObjInstance, Name: in.String()}},
			Summary: fmt.Sprintf("Workload %s on agent %s failed %d times within %d minutes.", in.WorkloadName, in.AgentName,
				c.inWindow, FailWindowMs/60000),
			Detail: fmt.Sprintf("Instance %s entered Failed(ExecFailed) or Pending(StartingFailed) %d times within %d minutes "+
				"(now %s). See `grapnel logs %s` and `grapnel get timeline %s`; fix the workload or its configuration. "+
				"The problem clears once the instance has run %d minutes without failing, or is deleted or updated.",
				in, c.inWindow, FailWindowMs/60000, cur.Short(), in.WorkloadName, in.WorkloadName, FailWindowMs/60000),
		})
	}
}
