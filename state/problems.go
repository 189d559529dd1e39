package state

import "slices"

// The problems view (docs/problems.md): the constraints the cluster cannot
// satisfy now. The leader detects them (server/problems) and records when
// one opens or closes in a replicated entry, so that a problem's id and
// the time it opened are the same on every replica and survive a
// failover. The store keeps only the open ones; a problem that is
// resolved is dropped, and one that recurs opens again under a new id.

// ProblemObject is one object a problem involves: a workload, an agent,
// an instance or a config item, by kind and name.
type ProblemObject struct {
	Kind string `json:"k"`
	Name string `json:"n"`
}

// Problem is one open problem as replicated.
type Problem struct {
	// ID numbers the problems of the cluster, 1, 2, 3, ...; never reused.
	ID uint64 `json:"id"`
	// Kind says which check found it (server/problems names them).
	Kind string `json:"k"`
	// Key identifies the condition: the same condition found again while
	// open is the same problem; found again after it closed, a new one.
	Key     string          `json:"key"`
	Objects []ProblemObject `json:"o,omitempty"`
	// Summary is one line; Detail says why and what to do.
	Summary string `json:"s"`
	Detail  string `json:"d,omitempty"`
	// SinceMs is when the leader found it, Unix milliseconds by its clock.
	SinceMs int64 `json:"t"`
	// UpdatedMs is when the leader last rewrote its objects and
	// descriptions, the condition having changed under the same key (one
	// more workload on a gone agent, fewer instances placed); zero while
	// they are the ones it opened with. Written from
	// ClusterVersionProblemUpdates on.
	UpdatedMs int64 `json:"u,omitempty"`
}

// LastUpdatedMs is when the problem's record last changed: its update,
// or its opening.
func (p *Problem) LastUpdatedMs() int64 { return max(p.UpdatedMs, p.SinceMs) }

// Problems is the open problems by key and the last id handed out.
type Problems struct {
	Open   map[string]*Problem
	LastID uint64
}

// Clone returns a copy that shares the immutable records.
func (p Problems) Clone() Problems {
	c := Problems{LastID: p.LastID}
	if len(p.Open) > 0 {
		c.Open = make(map[string]*Problem, len(p.Open))
		for k, v := range p.Open {
			c.Open[k] = v
		}
	}
	return c
}

// OpenProblem opens pr under the next id unless a problem with its key is
// open already; it returns the open problem and whether it is new.
func (p *Problems) OpenProblem(pr Problem) (*Problem, bool) {
	if old, ok := p.Open[pr.Key]; ok {
		return old, false
	}
	p.LastID++
	pr.ID = p.LastID
	pr.Objects = slices.Clone(pr.Objects)
	if p.Open == nil {
		p.Open = map[string]*Problem{}
	}
	p.Open[pr.Key] = &pr
	return &pr, true
}

// UpdateProblem rewrites the objects and descriptions of the problem open
// under pr.Key, dated ms, unless they are the same already; it returns
// the problem and whether it changed. The record is replaced, not changed
// in place: clones share them.
func (p *Problems) UpdateProblem(pr Problem, ms int64) (*Problem, bool) {
	old, ok := p.Open[pr.Key]
	if !ok || (old.Summary == pr.Summary && old.Detail == pr.Detail && slices.Equal(old.Objects, pr.Objects)) {
		return old, false
	}
	next := *old
	next.Objects, next.Summary, next.Detail, next.UpdatedMs = slices.Clone(pr.Objects), pr.Summary, pr.Detail, ms
	p.Open[pr.Key] = &next
	return &next, true
}

// CloseProblem drops the open problem numbered id; it returns it and
// whether it was open.
func (p *Problems) CloseProblem(id uint64) (*Problem, bool) {
	for k, pr := range p.Open {
		if pr.ID == id {
			delete(p.Open, k)
			return pr, true
		}
	}
	return nil, false
}

// Restore puts back a problem read from a snapshot, keeping LastID at
// least its id.
func (p *Problems) Restore(pr Problem) {
	if p.Open == nil {
		p.Open = map[string]*Problem{}
	}
	p.Open[pr.Key] = &pr
	p.LastID = max(p.LastID, pr.ID)
}

// List returns the open problems, oldest id first.
func (p Problems) List() []*Problem {
	out := make([]*Problem, 0, len(p.Open))
	for _, pr := range p.Open {
		out = append(out, pr)
	}
	slices.SortFunc(out, func(a, b *Problem) int {
		switch {
		case a.ID < b.ID:
			return -1
		case a.ID > b.ID:
			return 1
		}
		return 0
	})
	return out
}
