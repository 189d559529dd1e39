package ingest

import (
	"math"

	"github.com/grapnel-io/grapnel/state"
)

// DefaultMaxBatch bounds the instances carried in one batch.
const DefaultMaxBatch = 1024

// Report is one agent's state report.
type Report struct {
	Agent  string
	Mark   state.ReportMark
	States []state.WorkloadState
}

// Batch is what the dispatcher hands out at once: at most one report per
// agent, each with the newest state of the instances it carries.
type Batch struct {
	Reports []Report
}

// Len counts the states in the batch.
func (b *Batch) Len() int {
	n := 0
	for _, r := range b.Reports {
		n += len(r.States)
	}
	return n
}

// unit is the conflation unit of one agent.
type unit struct {
	// last is the newest mark accepted from the agent, pending or stored.
	last state.ReportMark
	// pending holds, per instance not yet handed out, the newest state of
	// its current life after the states that ended earlier lives
	// (state.Conflate); order keeps the instances in the order they first
	// arrived.
	pending map[state.InstanceName][]state.ExecutionState
	order   []state.InstanceName
	// mark is the newest mark among the pending reports.
	mark   state.ReportMark
	queued bool
}

// States holds the conflation units of all agents and the dispatcher's
// ready queue.
type States struct {
	units map[string]*unit
	// ready lists, first in first out, the agents with pending states.
	ready    []string
	max      int
	inFlight *Batch
}

// NewStates returns empty units that know the newest mark stored for each
// agent, so that reports older than what the cluster holds are dropped.
// maxBatch bounds the states of one batch (DefaultMaxBatch when < 1).
func NewStates(maxBatch int, marks map[string]state.ReportMark) *States {
	if maxBatch < 1 {
		maxBatch = DefaultMaxBatch
	}
	s := &States{units: map[string]*unit{}, max: maxBatch}
	for a, m := range marks {
		s.unitOf(a).last = m
	}
	return s
}

func (s *States) unitOf(agent string) *unit {
	u := s.units[agent]
	if u == nil {
		u = &unit{pending: map[state.InstanceName][]state.ExecutionState{}}
		s.units[agent] = u
	}
	return u
}

// Offer adds a report to its agent's unit. A report older than the newest
// one accepted from the agent is dropped and Offer returns false. Within a
// unit the newest state of an instance replaces the pending one of the
// same life; a state that ended a life is kept and handed out ahead of it.
func (s *States) Offer(r Report) bool {
	u := s.unitOf(r.Agent)
	if r.Mark.StaleAfter(u.last) {
		return false
	}
	if !r.Mark.IsZero() {
		u.last = u.last.Max(r.Mark)
		u.mark = u.mark.Max(r.Mark)
	}
	for _, ws := range r.States {
		if _, ok := u.pending[ws.Instance]; !ok {
			u.order = append(u.order, ws.Instance)
		}
		u.pending[ws.Instance] = state.Conflate(u.pending[ws.Instance], ws.State, 0)
	}
	if len(u.pending) > 0 && !u.queued {
		u.queued = true
		s.ready = append(s.ready, r.Agent)
	}
	return true
}

// Next hands out the next batch unless one is in flight or nothing is
// ready. Agents are served in the order they became ready; an agent with
// more than fits goes to the back of the queue with the rest, so one busy
// agent cannot starve the others.
func (s *States) Next() (*Batch, bool) {
	if s.inFlight != nil || len(s.ready) == 0 {
		return nil, false
	}
	b := &Batch{}
	budget := s.max
	var requeue []string
	for budget > 0 && len(s.ready) > 0 {
		agent := s.ready[0]
		s.ready = s.ready[1:]
		u := s.units[agent]
		r, complete := u.take(agent, budget)
		budget -= len(r.States)
		b.Reports = append(b.Reports, r)
		if complete {
			u.queued = false
		} else {
			requeue = append(requeue, agent)
		}
	}
	s.ready = append(s.ready, requeue...)
	s.inFlight = b
	return b, true
}

// take removes the pending states of the unit's instances in arrival
// order, each instance's states in the order they came, up to n states
// (at least one instance). The
// report carries the unit's mark only when it takes everything; a partial
// report is unmarked so that the rest, sent later with the mark, is not
// mistaken for a repeat.
func (u *unit) take(agent string, n int) (Report, bool) {
	r := Report{Agent: agent, States: make([]state.WorkloadState, 0, min(n, len(u.order)))}
	taken := 0
	for _, in := range u.order {
		q := u.pending[in]
		if taken > 0 && len(r.States)+len(q) > n {
			break
		}
		for _, st := range q {
			r.States = append(r.States, state.WorkloadState{Instance: in, State: st})
		}
		delete(u.pending, in)
		taken++
	}
	u.order = u.order[taken:]
	if len(u.order) > 0 {
		return r, false
	}
	u.order = nil
	r.Mark, u.mark = u.mark, state.ReportMark{}
	return r, true
}

// Settle ends the batch in flight. A batch that was not stored gives its
// states back to their units, ahead of what arrived since (which is
// newer and replaces them within the same life).
func (s *States) Settle(ok bool) {
	b := s.inFlight
	s.inFlight = nil
	if ok || b == nil {
		return
	}
	for _, r := range b.Reports {
		u := s.unitOf(r.Agent)
		u.mark = u.mark.Max(r.Mark)
		older := map[state.InstanceName][]state.ExecutionState{}
		var back []state.InstanceName
		for _, ws := range r.States {
			if _, seen := older[ws.Instance]; !seen {
				if _, queued := u.pending[ws.Instance]; !queued {
					back = append(back, ws.Instance)
				}
			}
			older[ws.Instance] = append(older[ws.Instance], ws.State)
		}
		for in, q := range older {
			u.pending[in] = state.ConflateAll(q, u.pending[in], 0)
		}
		u.order = append(back, u.order...)
		if len(u.pending) > 0 && !u.queued {
			u.queued = true
			s.ready = append(s.ready, r.Agent)
		}
	}
}

// InFlight reports whether a batch is out.
func (s *States) InFlight() bool { return s.inFlight != nil }

// Flush takes every pending state of one agent at once, whatever is in
// flight. The leader proposes it before the agent's disconnection so that
// no report of the agent lands after it.
func (s *States) Flush(agent string) (Report, bool) {
	u := s.units[agent]
	if u == nil || len(u.order) == 0 {
		return Report{}, false
	}
	r, _ := u.take(agent, math.MaxInt)
	u.queued = false
	for i, a := range s.ready {
		if a == agent {
			s.ready = append(s.ready[:i], s.ready[i+1:]...)
			break
		}
	}
	return r, true
}

// Holds reports whether a state of the instance waits in the agent's
// unit.
func (s *States) Holds(agent string, in state.InstanceName) bool {
	u := s.units[agent]
	if u == nil {
		return false
	}
	_, ok := u.pending[in]
	return ok
}

// Pending counts the instances with states waiting in all units.
func (s *States) Pending() int {
	n := 0
	for _, u := range s.units {
		n += len(u.order)
	}
	return n
}

// Mark is the newest mark accepted from an agent.
func (s *States) Mark(agent string) state.ReportMark {
	if u := s.units[agent]; u != nil {
		return u.last
	}
	return state.ReportMark{}
}
