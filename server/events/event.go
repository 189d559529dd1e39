package events

import (
	"strings"

	"github.com/grapnel-io/grapnel/state"
)

// Event is one CompleteStateResponse to send to a subscriber.
type Event struct {
	RequestID string
	// Added, Updated and Removed are the altered fields as field-mask
	// paths, sorted and without duplicates.
	Added, Updated, Removed []string
	// State is the new CompleteState restricted to the added and updated
	// fields; removed fields no longer exist in it.
	State state.Tree
}

// Events computes, for every subscriber, the event caused by a state change.
// diff holds the absolute paths of the added, updated and removed fields of
// the CompleteState tree; newState is the CompleteState tree after the
// change. Subscribers whose masks match none of the altered fields get no
// event. The events are ordered by request id.
//
// swdd~event-handler-sends-complete-state-differences-including-altered-fields~1
func (h *Handler) Events(diff state.StateDiff, newState state.Tree) []Event {
	if len(h.subscribers) == 0 {
		return nil
	}
	altered := splitDiff(diff)
	var out []Event
	for _, id := range h.Subscribers() {
		masks := splitAll(h.subscribers[id])
		added := alteredFields(masks, altered.added, newState, true)
		updated := alteredFields(masks, altered.updated, newState, true)
		removed := alteredFields(masks, altered.removed, newState, false)
		if len(added)+len(updated)+len(removed) == 0 {
			continue
		}
		out = append(out, Event{
			RequestID: id,
			Added:     added,
			Updated:   updated,
			Removed:   removed,
			State:     differences(newState, added, updated),
		})
	}
	return out
}

// splitPaths holds diff paths split into segments once for all subscribers.
type splitPaths struct {
	added, updated, removed [][]string
}

func splitDiff(d state.StateDiff) splitPaths {
	return splitPaths{added: splitAll(d.Added), updated: splitAll(d.Updated), removed: splitAll(d.Removed)}
}

func splitAll(masks []string) [][]string {
	out := make([][]string, len(masks))
	for i, m := range masks {
		out[i] = state.SplitMask(m)
	}
	return out
}

// alteredFields collects the altered fields one subscriber gets for one
// kind of change. No masks subscribes to everything, so every path is its
// own altered field. When a subscriber mask is more specific than the
// altered path, the expansion is resolved against newState if the fields
// must exist there (added, updated); a removed field has no counterpart, so
// its expansion is kept as far as the altered path allows.
//
// swdd~event-handler-creates-altered-fields-and-filter-masks~1
func alteredFields(masks, paths [][]string, newState state.Tree, mustExist bool) []string {
	set := map[string]struct{}{}
	for _, path := range paths {
		if len(masks) == 0 {
			set[strings.Join(path, ".")] = struct{}{}
			continue
		}
		for _, mask := range masks {
			field, ok := matchMask(mask, path)
			if !ok {
				continue
			}
			if len(field) == len(path) || !mustExist {
				set[strings.Join(field, ".")] = struct{}{}
				continue
			}
			for _, f := range existing(newState, field) {
				set[f] = struct{}{}
			}
		}
	}
	if len(set) == 0 {
		return nil
	}
	return state.SortedKeys(set)
}

// differences is the part of the new state an event carries: the added and
// updated fields. With only removed fields it is empty rather than the whole
// state, which an empty mask list would select.
func differences(newState state.Tree, added, updated []string) state.Tree {
	filter := append(append([]string(nil), added...), updated...)
	if len(filter) == 0 {
		return state.Tree{}
	}
	return state.FilterTree(newState, filter)
}
