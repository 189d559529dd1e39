package state

import (
	"sort"
	"strconv"
	"strings"
)

// wildcard is the mask segment that matches every key or index at its level.
const wildcard = "*"

// SplitMask splits a dot-separated mask into its segments.
func SplitMask(mask string) []string {
	if mask == "" {
		return nil
	}
	return strings.Split(mask, ".")
}

// GetPath returns the value at path below t. Map keys are matched exactly;
// a decimal segment indexes a sequence.
func GetPath(t Tree, path []string) (any, bool) {
	return valueAt(t, path)
}

// valueAt is GetPath from any tree value.
func valueAt(v any, path []string) (any, bool) {
	for _, seg := range path {
		var ok bool
		if v, ok = childOf(v, seg); !ok {
			return nil, false
		}
	}
	return v, true
}

// SetPath stores v at path below t, creating missing parent maps. A parent
// that is neither a map nor a sequence indexed in range is replaced by a
// map, so that GetPath finds v afterwards. A nil t or an empty path is left
// alone: there is no parent to store into.
func SetPath(t Tree, path []string, v any) {
	if t == nil || len(path) == 0 {
		return
	}
	setIn(t, path, v, true)
}

// RemovePath deletes the value at path below t and reports whether there
// was one. Removing a sequence element shifts the later ones down.
func RemovePath(t Tree, path []string) bool {
	if t == nil || len(path) == 0 {
		return false
	}
	_, ok := removeIn(t, path)
	return ok
}

// ExpandWildcards returns the existing concrete paths of t that mask
// matches, sorted; a '*' segment stands for every key or index at its level.
func ExpandWildcards(t Tree, mask string) []string {
	segs := SplitMask(mask)
	if len(segs) == 0 {
		return nil
	}
	var out []string
	expandInto(t, segs, make([]string, 0, len(segs)), &out)
	sort.Strings(out)
	return out
}

func expandInto(v any, segs, prefix []string, out *[]string) {
	if len(segs) == 0 {
		*out = append(*out, strings.Join(prefix, "."))
		return
	}
	if segs[0] != wildcard {
		if c, ok := childOf(v, segs[0]); ok {
			expandInto(c, segs[1:], append(prefix, segs[0]), out)
		}
		return
	}
	switch x := v.(type) {
	case map[string]any:
		for k, c := range x {
			expandInto(c, segs[1:], append(prefix, k), out)
		}
	case []any:
		for i, c := range x {
			expandInto(c, segs[1:], append(prefix, strconv.Itoa(i)), out)
		}
	}
}

// childOf steps one segment down from v.
func childOf(v any, seg string) (any, bool) {
	switch x := v.(type) {
	case map[string]any:
		c, ok := x[seg]
		return c, ok
	case []any:
		if i, ok := parseIndex(seg, len(x)); ok {
			return x[i], true
		}
	}
	return nil, false
}

// parseIndex reads seg as an index below n. Only plain decimal digits count:
// no sign, no leading zero, so that every element has exactly one name.
func parseIndex(seg string, n int) (int, bool) {
	if seg == "" || len(seg) > 9 || (len(seg) > 1 && seg[0] == '0') {
		return 0, false
	}
	i := 0
	for j := 0; j < len(seg); j++ {
		c := seg[j]
		if c < '0' || c > '9' {
			return 0, false
		}
		i = i*10 + int(c-'0')
	}
	return i, i < n
}

// setIn stores v at path below node and returns the node to keep in its
// parent. When a parent on the way is neither a map nor a sequence indexed
// in range, force replaces it by a map; otherwise setIn changes nothing and
// returns the number of path segments that led to that parent.
func setIn(node any, path []string, v any, force bool) (any, int) {
	seg := path[0]
	switch x := node.(type) {
	case map[string]any:
		if len(path) == 1 {
			x[seg] = v
			return x, -1
		}
		c, ok := x[seg]
		if !ok {
			c = map[string]any{}
		}
		nc, blocked := setIn(c, path[1:], v, force)
		if blocked >= 0 {
			return node, blocked + 1
		}
		x[seg] = nc
		return x, -1
	case []any:
		if i, ok := parseIndex(seg, len(x)); ok {
			if len(path) == 1 {
				x[i] = v
				return x, -1
			}
			nc, blocked := setIn(x[i], path[1:], v, force)
			if blocked >= 0 {
				return node, blocked + 1
			}
			x[i] = nc
			return x, -1
		}
	}
	if !force {
		return node, 0
	}
	return setIn(map[string]any{}, path, v, force)
}

// removeIn deletes the value at path below node and returns the node to
// keep in its parent: a sequence loses an element by being rebuilt, so
// that other holders of the old slice do not see it shift.
func removeIn(node any, path []string) (any, bool) {
	seg := path[0]
	switch x := node.(type) {
	case map[string]any:
		c, ok := x[seg]
		if !ok {
			return node, false
		}
		if len(path) == 1 {
			delete(x, seg)
			return x, true
		}
		nc, ok := removeIn(c, path[1:])
		if ok {
			x[seg] = nc
		}
		return x, ok
	case []any:
		i, ok := parseIndex(seg, len(x))
		if !ok {
			return node, false
		}
		if len(path) == 1 {
			out := make([]any, 0, len(x)-1)
			out = append(out, x[:i]...)
			return append(out, x[i+1:]...), true
		}
		nc, ok := removeIn(x[i], path[1:])
		if ok {
			x[i] = nc
		}
		return x, ok
	}
	return node, false
}
