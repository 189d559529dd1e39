package events

import (
	"slices"
	"strings"

	"github.com/grapnel-io/grapnel/state"
)

const wildcard = "*"

// matchMask compares a subscriber mask with an altered field path segment
// by segment over the shorter length; a wildcard in the subscriber mask
// matches any segment. On a match it returns the most specific of the two:
// the altered path when the subscriber mask is not longer, otherwise the
// subscriber mask with its leading segments (wildcards included) taken from
// the altered path. Segments of the subscriber mask beyond the altered path
// are kept as they are, wildcards included.
//
// swdd~event-handler-creates-altered-fields-and-filter-masks~1
// swdd~event-handler-expands-subscriber-field-mask-using-altered-field-masks~1
func matchMask(subscriber, altered []string) ([]string, bool) {
	n := min(len(subscriber), len(altered))
	for i := range n {
		if subscriber[i] != wildcard && subscriber[i] != altered[i] {
			return nil, false
		}
	}
	if len(subscriber) <= len(altered) {
		return altered, true
	}
	// For i < len(altered) the subscriber segment is a wildcard or equal to
	// the altered one, so the altered segment is the expansion in both cases.
	return append(slices.Clone(altered), subscriber[len(altered):]...), true
}

// existing resolves an expanded subscriber mask against the new state: its
// remaining wildcards are expanded and only paths to fields that exist are
// kept, so an added or updated altered field always names real data.
func existing(newState state.Tree, mask []string) []string {
	return state.ExpandWildcards(newState, strings.Join(mask, "."))
}
