package ingest

import "github.com/grapnel-io/grapnel/state"

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
	// pending holds the newest state of each instance not yet handed out;
	// order keeps the instances in the order they first arrived.
	pending map[state.InstanceName]state.ExecutionState
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
		u = &unit{pending: map[state.InstanceName]state.ExecutionState{}}
		s.units[agent] = u
	}
	return u
}

// Offer adds a report to its agent's unit. A report older than the newest
// one accepted from the agent is dropped and Offer returns false. Within a
// unit the newest state of an instance replaces the pending one.
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
		u.pending[ws.Instance] = ws.State
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

// take removes up to n pending states of the unit in arrival order. The
// report carries the unit's mark only when it takes everything; a partial
// report is unmarked so that the rest, sent later with the mark, is not
// mistaken for a repeat.
func (u *unit) take(agent string, n int) (Report, bool) {
	if n > len(u.order) {
		n = len(u.order)
	}
	r := Report{Agent: agent, States: make([]state.WorkloadState, 0, n)}
	for _, in := range u.order[:n] {
		r.States = append(r.States, state.WorkloadState{Instance: in, State: u.pending[in]})
		delete(u.pending, in)
	}
	u.order = u.order[n:]
	if len(u.order) > 0 {
		return r, false
	}
	u.order = nil
	r.Mark, u.mark = u.mark, state.ReportMark{}
	return r, true
}

// Settle ends the batch in flight. A batch that was not stored gives its
// states back to their units, except where a newer state arrived since.
func (s *States) Settle(ok bool) {
	b := s.inFlight
	s.inFlight = nil
	if ok || b == nil {
		return
	}
	for _, r := range b.Reports {
		u := s.unitOf(r.Agent)
		u.mark = u.mark.Max(r.Mark)
		var back []state.InstanceName
		for _, ws := range r.States {
			if _, newer := u.pending[ws.Instance]; newer {
				continue
			}
			u.pending[ws.Instance] = ws.State
			back = append(back, ws.Instance)
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
	r, _ := u.take(agent, len(u.order))
	u.queued = false
	for i, a := range s.ready {
		if a == agent {
			s.ready = append(s.ready[:i], s.ready[i+1:]...)
			break
		}
	}
	return r, true
}

// Pending counts the states waiting in all units.
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
