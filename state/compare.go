package state

import (
	"reflect"
	"sort"
)

// StateDiff lists the absolute dot paths at which two trees differ, each
// list sorted. A path names the highest field that was added or removed;
// nothing below it is listed.
type StateDiff struct{ Added, Updated, Removed []string }

// Empty reports whether the trees were equal.
func (d StateDiff) Empty() bool {
	return len(d.Added) == 0 && len(d.Updated) == 0 && len(d.Removed) == 0
}

// CompareTrees finds what changed from before to after, depth first. Maps
// are descended into; a sequence is a leaf, except that one turning from
// empty to non-empty counts as added and the reverse as removed. A map that
// became a scalar or a sequence (or the other way round) is updated.
func CompareTrees(before, after Tree) StateDiff {
	c := comparator{path: make([]byte, 0, 128)}
	c.maps(before, after)
	sort.Strings(c.d.Added)
	sort.Strings(c.d.Updated)
	sort.Strings(c.d.Removed)
	return c.d
}

// comparator keeps the path being visited in one buffer, so that only
// differing paths cost a string.
type comparator struct {
	path []byte
	d    StateDiff
}

func (c *comparator) maps(before, after map[string]any) {
	for k, bv := range before {
		mark := c.enter(k)
		if av, ok := after[k]; ok {
			c.values(bv, av)
		} else {
			c.d.Removed = append(c.d.Removed, string(c.path))
		}
		c.path = c.path[:mark]
	}
	for k := range after {
		if _, ok := before[k]; !ok {
			mark := c.enter(k)
			c.d.Added = append(c.d.Added, string(c.path))
			c.path = c.path[:mark]
		}
	}
}

func (c *comparator) values(before, after any) {
	switch b := before.(type) {
	case map[string]any:
		if a, ok := after.(map[string]any); ok {
			c.maps(b, a)
			return
		}
	case []any:
		if a, ok := after.([]any); ok {
			switch {
			case len(b) == 0 && len(a) > 0:
				c.d.Added = append(c.d.Added, string(c.path))
			case len(b) > 0 && len(a) == 0:
				c.d.Removed = append(c.d.Removed, string(c.path))
			case !equalValues(b, a):
				c.d.Updated = append(c.d.Updated, string(c.path))
			}
			return
		}
	}
	if !equalValues(before, after) {
		c.d.Updated = append(c.d.Updated, string(c.path))
	}
}

// enter appends key to the path and returns the length to cut back to.
func (c *comparator) enter(key string) int {
	mark := len(c.path)
	if mark > 0 {
		c.path = append(c.path, '.')
	}
	c.path = append(c.path, key...)
	return mark
}

// equalValues compares two tree values deeply.
func equalValues(a, b any) bool {
	switch x := a.(type) {
	case map[string]any:
		y, ok := b.(map[string]any)
		if !ok || len(x) != len(y) {
			return false
		}
		for k, v := range x {
			w, ok := y[k]
			if !ok || !equalValues(v, w) {
				return false
			}
		}
		return true
	case []any:
		y, ok := b.([]any)
		if !ok || len(x) != len(y) {
			return false
		}
		for i := range x {
			if !equalValues(x[i], y[i]) {
				return false
			}
		}
		return true
	case nil, string, bool, int, int64, uint64, float64:
		// Comparable dynamic type: == cannot panic whatever b holds.
		return a == b
	}
	return reflect.DeepEqual(a, b)
}
