package fsm

import (
	"google.golang.org/protobuf/proto"

	"github.com/grapnel-io/grapnel/fsm/fsmpb"
	"github.com/grapnel-io/grapnel/state"
)

// ProblemsChangedRequest is the body of ProblemsChangedType: the problems
// of the problems view (docs/problems.md) that the leader found opened
// and closed since its store last said. The leader writes one only when
// the set of problems changes, never at idle.
type ProblemsChangedRequest struct {
	// TimeMs is when the leader found the change, by its clock: the
	// opened problems' SinceMs.
	TimeMs int64
	// Opened are the problems to open; their ID and SinceMs are left
	// zero, the apply gives them. One whose key is open already is
	// skipped.
	Opened []state.Problem
	// Closed are the ids of the problems to close; an id that is not
	// open is skipped.
	Closed []uint64
	// Updated rewrite the objects and descriptions of the problems open
	// under their keys, dated TimeMs; one whose key is not open, or that
	// says what the problem says already, is skipped. Applied only from
	// state.ClusterVersionProblemUpdates on: below it a replica of the
	// previous release, which does not know the field, would not apply
	// them, and the stores would differ.
	Updated []state.Problem
}

// ProblemsChangedResponse is what applying a ProblemsChangedType entry
// did: the problems it opened, numbered and dated, and the ones it
// closed, for the leader's events.
type ProblemsChangedResponse struct {
	Opened  []state.Problem
	Closed  []state.Problem
	Updated []state.Problem
}

// Type implements Command.
func (*ProblemsChangedRequest) Type() MessageType { return ProblemsChangedType }

func (r *ProblemsChangedRequest) message() (proto.Message, error) {
	m := &fsmpb.ProblemsChanged{TimeMs: r.TimeMs, Closed: r.Closed}
	for _, p := range r.Opened {
		m.Opened = append(m.Opened, problemToProto(p))
	}
	for _, p := range r.Updated {
		m.Updated = append(m.Updated, problemToProto(p))
	}
	return m, nil
}

func problemToProto(p state.Problem) *fsmpb.ProblemOpened {
	o := &fsmpb.ProblemOpened{Kind: p.Kind, Key: p.Key, Summary: p.Summary, Detail: p.Detail}
	for _, ob := range p.Objects {
		o.Objects = append(o.Objects, &fsmpb.ProblemObject{Kind: ob.Kind, Name: ob.Name})
	}
	return o
}

func problemsFromProto(m *fsmpb.ProblemsChanged) (*ProblemsChangedRequest, error) {
	r := &ProblemsChangedRequest{TimeMs: m.TimeMs, Closed: nilIfEmpty(m.Closed)}
	for _, o := range m.Opened {
		r.Opened = append(r.Opened, problemFromProto(o))
	}
	for _, o := range m.Updated {
		r.Updated = append(r.Updated, problemFromProto(o))
	}
	return r, nil
}

func problemFromProto(o *fsmpb.ProblemOpened) state.Problem {
	p := state.Problem{Kind: o.Kind, Key: o.Key, Summary: o.Summary, Detail: o.Detail}
	for _, ob := range o.Objects {
		p.Objects = append(p.Objects, state.ProblemObject{Kind: ob.GetKind(), Name: ob.GetName()})
	}
	return p
}

// executeProblems applies ProblemsChangedType: it closes, then opens, so
// that a condition that ended and began again within one change gets a
// new id.
func executeProblems(st *state.Store, r *ProblemsChangedRequest, _ uint64) any {
	var resp ProblemsChangedResponse
	for _, id := range r.Closed {
		if p, ok := st.Problems.CloseProblem(id); ok {
			resp.Closed = append(resp.Closed, *p)
		}
	}
	for _, p := range r.Opened {
		p.ID, p.SinceMs = 0, r.TimeMs
		if opened, isNew := st.Problems.OpenProblem(p); isNew {
			resp.Opened = append(resp.Opened, *opened)
		}
	}
	if st.ProblemUpdates() {
		for _, p := range r.Updated {
			if updated, changed := st.Problems.UpdateProblem(p, r.TimeMs); changed {
				resp.Updated = append(resp.Updated, *updated)
			}
		}
	}
	if resp.Opened == nil && resp.Closed == nil && resp.Updated == nil {
		return nil
	}
	return &resp
}
