package logcampaign

import "sort"

// idSet is a set of request ids.
type idSet map[string]struct{}

// sorted returns the ids in order, so callers send messages deterministically.
func (s idSet) sorted() []string {
	out := make([]string, 0, len(s))
	for id := range s {
		out = append(out, id)
	}
	sort.Strings(out)
	return out
}

// indexAdd records id under key.
func indexAdd[K comparable](index map[K]idSet, key K, id string) {
	set := index[key]
	if set == nil {
		set = idSet{}
		index[key] = set
	}
	set[id] = struct{}{}
}

// indexDel drops id from key and prunes the key when its set is empty, so
// the indexes never hold keys of participants without campaigns.
func indexDel[K comparable](index map[K]idSet, key K, id string) {
	set := index[key]
	delete(set, id)
	if len(set) == 0 {
		delete(index, key)
	}
}
