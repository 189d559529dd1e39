package campaign

import (
	"slices"
	"time"

	"github.com/grapnel-io/grapnel/chaos/check"
	"github.com/grapnel-io/grapnel/chaos/history"
	"github.com/grapnel-io/grapnel/chaos/report"
)

// MeasureWindow bounds how long after a fault an event still counts as its
// consequence; later events belong to the next fault.
const MeasureWindow = 60 * time.Second

// Measured is what one fault took, from its start. A zero duration with
// the matching flag false means it did not happen within the window (the
// leader did not change, no write was acknowledged).
type Measured struct {
	NewLeader, NextAck, AllAttached          time.Duration
	LeaderChanged, Acked, AttachedAfterwards bool
}

// NewLeaderAt is the first sample after t that shows a leader in a term
// above termAt: the end of the election the fault caused. ok is false when
// no election happened before until.
func NewLeaderAt(samples []report.Sample, t time.Time, termAt uint64, until time.Time) (time.Time, bool) {
	for _, s := range samples {
		if s.At.Before(t) || s.At.After(until) {
			continue
		}
		if s.Leader != "" && s.Term > termAt {
			return s.At, true
		}
	}
	return time.Time{}, false
}

// NextAckAt is when the first write or delete sent at or after t was
// acknowledged: what a client that starts writing at the fault waits.
func NextAckAt(ops []history.Op, t, until time.Time) (time.Time, bool) {
	var best time.Time
	for _, o := range ops {
		if o.Kind == history.Read || o.Outcome != history.OK || o.Call.Before(t) || o.Return.After(until) {
			continue
		}
		if best.IsZero() || o.Return.Before(best) {
			best = o.Return
		}
	}
	return best, !best.IsZero()
}

// AllAttachedAt is the first sample at or after from, and before until,
// in which every agent in agents is attached to the leader of that sample.
func AllAttachedAt(samples []report.Sample, agents []string, from, until time.Time) (time.Time, bool) {
	for _, s := range samples {
		if s.At.Before(from) || s.At.After(until) || s.Leader == "" {
			continue
		}
		all := true
		for _, a := range agents {
			all = all && slices.Contains(s.Attached, a)
		}
		if all {
			return s.At, true
		}
	}
	return time.Time{}, false
}

// TermAt is the term of the last sample with a leader at or before t, 0
// when there is none.
func TermAt(samples []report.Sample, t time.Time) uint64 {
	var term uint64
	for _, s := range samples {
		if s.At.After(t) {
			break
		}
		if s.Leader != "" {
			term = s.Term
		}
	}
	return term
}

// MeasureFault measures one fault from f.At. Agents must be attached after
// the new leader was elected and, for a fault that cut agents off, after
// it healed; cutsAgents says which.
func MeasureFault(f report.Fault, cutsAgents bool, samples []report.Sample, ops []history.Op, agents []string, until time.Time) Measured {
	var m Measured
	if until.IsZero() || until.After(f.At.Add(MeasureWindow)) {
		until = f.At.Add(MeasureWindow)
	}
	from := f.At
	if at, ok := NewLeaderAt(samples, f.At, TermAt(samples, f.At), until); ok {
		m.NewLeader, m.LeaderChanged = at.Sub(f.At), true
		from = at
	}
	if at, ok := NextAckAt(ops, f.At, until); ok {
		m.NextAck, m.Acked = at.Sub(f.At), true
	}
	if cutsAgents && !f.Healed.IsZero() && f.Healed.After(from) {
		from = f.Healed
	}
	if at, ok := AllAttachedAt(samples, agents, from, until); ok {
		m.AllAttached, m.AttachedAfterwards = at.Sub(f.At), true
	}
	return m
}

// Figures groups the measurements by kind into report figures. A kind's
// NewLeader figure counts only the faults after which the leader changed.
func Figures(kinds []Kind, ms []Measured) map[string]report.Figures {
	type lists struct{ leader, ack, attached []time.Duration }
	by := map[Kind]*lists{}
	for i, m := range ms {
		l := by[kinds[i]]
		if l == nil {
			l = &lists{}
			by[kinds[i]] = l
		}
		if m.LeaderChanged {
			l.leader = append(l.leader, m.NewLeader)
		}
		if m.Acked {
			l.ack = append(l.ack, m.NextAck)
		}
		if m.AttachedAfterwards {
			l.attached = append(l.attached, m.AllAttached)
		}
	}
	out := map[string]report.Figures{}
	for k, l := range by {
		out[string(k)] = report.Figures{
			NewLeader:   report.Measure(l.leader),
			NextAck:     report.Measure(l.ack),
			AllAttached: report.Measure(l.attached),
		}
	}
	return out
}

// FillAcks sets every sample's Acks to the writes and deletes acknowledged
// since the previous sample (the first sample counts from its own time).
func FillAcks(samples []report.Sample, ops []history.Op) {
	var acks []time.Time
	for _, o := range ops {
		if o.Kind != history.Read && o.Outcome == history.OK {
			acks = append(acks, o.Return)
		}
	}
	slices.SortFunc(acks, func(a, b time.Time) int { return a.Compare(b) })
	j := 0
	for i := range samples {
		samples[i].Acks = 0
		for j < len(acks) && !acks[j].After(samples[i].At) {
			if i > 0 {
				samples[i].Acks++
			}
			j++
		}
	}
}

// SelfClaims keeps the observations in which a replica says it leads
// itself: the replicas that may acknowledge writes in that term. A
// follower's view is left out because Status reads the leader and then
// the term separately (and hashicorp/raft adopts a new term before it
// learns the new leader), so a follower can name the old leader with the
// new term without any second leader having existed.
func SelfClaims(obs []check.LeaderObs) []check.LeaderObs {
	var out []check.LeaderObs
	for _, o := range obs {
		if o.Leader != "" && o.Leader == o.Replica {
			out = append(out, o)
		}
	}
	return out
}
