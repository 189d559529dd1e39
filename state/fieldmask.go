package state

import "sort"

// Names the field-mask rules single out.
const (
	keyDesiredState   = "desiredState"
	keyEffectiveState = "effectiveState"
	keyWorkloadStates = "workloadStates"
	keyAPIVersion     = "apiVersion"
	keyState          = "state"
	keySubState       = "subState"
)

// FilterTree answers a GetCompleteState field mask: without masks a deep
// copy of t, otherwise a new tree holding the union of the subtrees the
// masks select. Masks to missing fields select nothing. A '*' segment
// matches every key or index at its level. Any mask into desiredState
// (effectiveState) also selects its apiVersion, and an execution state's
// state and subState are always returned together.
//
// A mask that reaches into a sequence keeps only the selected elements, in
// their order; their indices in the result may therefore be lower than in t.
func FilterTree(t Tree, masks []string) Tree {
	if len(masks) == 0 {
		return CloneValue(t).(map[string]any)
	}
	var f filter
	var out any
	for _, m := range compileMasks(masks) {
		out = f.pick(out, t, m)
	}
	res, _ := out.(map[string]any)
	if res == nil {
		return Tree{}
	}
	if f.lists {
		finishLists(res)
	}
	return res
}

// compiledMask holds, per level, the names a mask accepts there ('*' for
// any). Giving the last level two names lets one walk fetch both state and
// subState.
type compiledMask [][]string

func compileMasks(masks []string) []compiledMask {
	out := make([]compiledMask, 0, len(masks)+2)
	var desired, effective bool
	for _, m := range masks {
		segs := SplitMask(m)
		if len(segs) == 0 {
			continue
		}
		c := make(compiledMask, len(segs))
		for i := range segs {
			c[i] = segs[i : i+1 : i+1]
		}
		if sib, ok := ExecStateSibling(segs); ok {
			switch segs[0] {
			case keyWorkloadStates:
				c[4] = []string{segs[4], sib}
			case wildcard:
				pair := compiledMask{{keyWorkloadStates}, c[1], c[2], c[3], {sib}}
				out = append(out, pair)
			}
		}
		switch segs[0] {
		case keyDesiredState:
			desired = true
		case keyEffectiveState:
			effective = true
		case wildcard:
			desired, effective = true, true
		}
		out = append(out, c)
	}
	if desired {
		out = append(out, compiledMask{{keyDesiredState}, {keyAPIVersion}})
	}
	if effective {
		out = append(out, compiledMask{{keyEffectiveState}, {keyAPIVersion}})
	}
	return out
}

// ExecStateSibling reports, for a mask workloadStates.<agent>.<wl>.<id>.state
// (or .subState), the other field of the pair: FilterTree returns both
// when one is asked for, so access control (package access) checks both.
func ExecStateSibling(segs []string) (string, bool) {
	if len(segs) != 5 || (segs[0] != keyWorkloadStates && segs[0] != wildcard) {
		return "", false
	}
	switch segs[4] {
	case keyState:
		return keySubState, true
	case keySubState:
		return keyState, true
	}
	return "", false
}

// filter builds a filtered tree. Output nodes are either full copies of
// the input (after the last mask segment) or partial ones: a map holding
// only selected keys, or a partialList until finishLists turns it into a
// sequence.
type filter struct {
	lists bool // some partialList was made
}

// partialList holds the selected elements of a sequence by index.
type partialList map[int]any

// pick adds to dst, the output node for src, what m selects below src and
// returns the output node (nil when nothing is selected and dst was nil).
func (f *filter) pick(dst, src any, m compiledMask) any {
	if len(m) == 0 {
		return CloneValue(src)
	}
	switch s := src.(type) {
	case map[string]any:
		d, _ := dst.(map[string]any)
		if dst != nil && d == nil {
			return dst
		}
		for _, name := range m[0] {
			if name == wildcard {
				for k, v := range s {
					d = f.pickKey(d, k, v, m[1:], len(s))
				}
			} else if v, ok := s[name]; ok {
				d = f.pickKey(d, name, v, m[1:], len(m[0]))
			}
		}
		if d == nil {
			return dst
		}
		return d
	case []any:
		if _, full := dst.([]any); full {
			return dst
		}
		d, _ := dst.(partialList)
		for _, name := range m[0] {
			if name == wildcard {
				for i, v := range s {
					d = f.pickIndex(d, i, v, m[1:], len(s))
				}
			} else if i, ok := parseIndex(name, len(s)); ok {
				d = f.pickIndex(d, i, s[i], m[1:], len(m[0]))
			}
		}
		if d == nil {
			return dst
		}
		f.lists = true
		return d
	}
	return dst
}

func (f *filter) pickKey(d map[string]any, k string, v any, rest compiledMask, hint int) map[string]any {
	var prev any
	if d != nil {
		prev = d[k]
	}
	c := f.pick(prev, v, rest)
	if c == nil {
		return d
	}
	if d == nil {
		d = make(map[string]any, hint)
	}
	d[k] = c
	return d
}

func (f *filter) pickIndex(d partialList, i int, v any, rest compiledMask, hint int) partialList {
	c := f.pick(d[i], v, rest)
	if c == nil {
		return d
	}
	if d == nil {
		d = make(partialList, hint)
	}
	d[i] = c
	return d
}

// finishLists replaces every partialList below v by a sequence of its
// elements in index order and returns the result.
func finishLists(v any) any {
	switch x := v.(type) {
	case map[string]any:
		for k, c := range x {
			switch c.(type) {
			case map[string]any, partialList:
				x[k] = finishLists(c)
			}
		}
		return x
	case partialList:
		idx := make([]int, 0, len(x))
		for i := range x {
			idx = append(idx, i)
		}
		sort.Ints(idx)
		out := make([]any, len(idx))
		for j, i := range idx {
			out[j] = finishLists(x[i])
		}
		return out
	}
	return v
}
