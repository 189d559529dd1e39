package events

import "github.com/grapnel-io/grapnel/state"

// ExplicitEvents is Events for a part of Grapnel's state beyond the
// Ankaios CompleteState, such as the problems view (root "problems"):
// only the subscribers with a mask whose first segment is root get them,
// restricted to those masks. A subscriber with no mask (the whole
// CompleteState, as an Ankaios client subscribes) or with a leading
// wildcard gets none, so an Ankaios client never sees a path its
// CompleteState does not have.
func (h *Handler) ExplicitEvents(root string, diff state.StateDiff, newState state.Tree) []Event {
	own := &Handler{subscribers: map[string][]string{}}
	for id, masks := range h.subscribers {
		var keep []string
		for _, m := range masks {
			if seg := state.SplitMask(m); len(seg) > 0 && seg[0] == root {
				keep = append(keep, m)
			}
		}
		if len(keep) > 0 {
			own.subscribers[id] = keep
		}
	}
	return own.Events(diff, newState)
}
