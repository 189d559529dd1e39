package state

// ReportMark orders the workload-state reports of one agent. Incarnation
// grows with every start of the agent process, Generation with every report
// of one incarnation. An Ankaios agent sends neither: its zero mark makes
// its reports count in arrival order.
//
// Its json tags are the keys of snapshot record 10: frozen (see Rendered).
type ReportMark struct {
	Incarnation uint64 `json:"Incarnation,omitempty"`
	Generation  uint64 `json:"Generation,omitempty"`
}

// IsZero reports whether the mark carries no incarnation, as an Ankaios
// agent's reports do.
func (m ReportMark) IsZero() bool { return m.Incarnation == 0 }

// StaleAfter reports whether a report marked m must be dropped once a
// report marked last was accepted from the same agent: it comes from an
// earlier incarnation, or repeats or predates a generation already seen.
// Unmarked reports are never stale, and a report without a generation is
// only compared by incarnation.
func (m ReportMark) StaleAfter(last ReportMark) bool {
	if m.IsZero() || last.IsZero() {
		return false
	}
	if m.Incarnation != last.Incarnation {
		return m.Incarnation < last.Incarnation
	}
	return m.Generation != 0 && m.Generation <= last.Generation
}

// Max returns the newer of two marks.
func (m ReportMark) Max(o ReportMark) ReportMark {
	if o.Incarnation > m.Incarnation || (o.Incarnation == m.Incarnation && o.Generation > m.Generation) {
		return o
	}
	return m
}

// ApplyReport stores an agent's marked state report unless it is stale
// after the mark the store keeps for that agent; it reports whether the
// report was applied. Marked reports advance the agent's mark.
//
// swdd~server-stores-workload-state~1
func (s *Store) ApplyReport(agent string, m ReportMark, states []WorkloadState) bool {
	last := s.ReportMarks[agent]
	if m.StaleAfter(last) {
		return false
	}
	s.ApplyStates(states)
	if !m.IsZero() {
		if s.ReportMarks == nil {
			s.ReportMarks = map[string]ReportMark{}
		}
		s.ReportMarks[agent] = last.Max(m)
	}
	return true
}

// SortStates orders states by agent, workload and id, as All does.
func SortStates(s []WorkloadState) { sortStates(s) }
