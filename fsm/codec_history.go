package fsm

import (
	"google.golang.org/protobuf/proto"

	"github.com/grapnel-io/grapnel/fsm/fsmpb"
	"github.com/grapnel-io/grapnel/state"
)

func (r *HistoryNotesRequest) message() (proto.Message, error) {
	return &fsmpb.HistoryNotes{History: historyToProto(&r.History)}, nil
}

func historyNotesFromProto(m *fsmpb.HistoryNotes) (*HistoryNotesRequest, error) {
	r := &HistoryNotesRequest{}
	if h := historyFromProto(m.History); h != nil {
		r.History = *h
	}
	return r, nil
}

// historyToProto is nil for nil, so that a command without history
// encodes as before.
func historyToProto(h *HistoryMeta) *fsmpb.HistoryMeta {
	if h == nil {
		return nil
	}
	p := &fsmpb.HistoryMeta{
		TimeMs: h.TimeMs, Requester: h.Requester, UpdateMask: h.UpdateMask,
		MaxEntries: h.Limits.MaxEntries, MaxAgeMs: h.Limits.MaxAgeMs, MaxBytes: h.Limits.MaxBytes,
		Decision: h.Decision,
	}
	if len(h.Rejections) > 0 {
		p.Rejections = make([]*fsmpb.Rejection, len(h.Rejections))
		for i, r := range h.Rejections {
			p.Rejections[i] = &fsmpb.Rejection{TimeMs: r.TimeMs, Requester: r.Requester, UpdateMask: r.UpdateMask, Reason: r.Reason, Count: r.Count}
		}
	}
	return p
}

func historyFromProto(p *fsmpb.HistoryMeta) *HistoryMeta {
	if p == nil {
		return nil
	}
	h := &HistoryMeta{
		TimeMs: p.TimeMs, Requester: p.Requester, UpdateMask: nilIfEmpty(p.UpdateMask),
		Limits:   state.HistoryLimits{MaxEntries: p.MaxEntries, MaxAgeMs: p.MaxAgeMs, MaxBytes: p.MaxBytes},
		Decision: p.Decision,
	}
	if len(p.Rejections) > 0 {
		h.Rejections = make([]Rejection, len(p.Rejections))
		for i, r := range p.Rejections {
			h.Rejections[i] = Rejection{TimeMs: r.TimeMs, Requester: r.Requester, UpdateMask: nilIfEmpty(r.UpdateMask), Reason: r.Reason, Count: r.Count}
		}
	}
	return h
}
