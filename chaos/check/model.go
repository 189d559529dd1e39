package check

import (
	"fmt"
	"hash/fnv"
	"slices"
	"strings"

	"github.com/anishathalye/porcupine"
	"github.com/grapnel-io/grapnel/chaos/history"
)

// absent is the value of a key that is not in the desired state.
const absent = ""

// regInput is the input of one porcupine operation on one key.
type regInput struct {
	kind  history.Kind
	value string // write: the value; read: what it saw (absent for none)
	maybe bool   // write or delete that may or may not have taken effect
	id    int64
}

// regState is what the checker knows of one key at a point of a
// linearization: the set of values it may have. A maybe-applied write or
// delete adds its value to the set; a read narrows the set to what it saw.
// any means every value is possible (the unknown start of a window).
// States are never mutated: step returns a new one.
type regState struct {
	vals []string // sorted, without duplicates
	any  bool
}

func known(v string) regState { return regState{vals: []string{v}} }

func (s regState) has(v string) bool {
	_, ok := slices.BinarySearch(s.vals, v)
	return s.any || ok
}

func (s regState) with(v string) regState {
	if s.has(v) {
		return s
	}
	i, _ := slices.BinarySearch(s.vals, v)
	return regState{vals: slices.Insert(slices.Clone(s.vals), i, v)}
}

func (s regState) step(in regInput) (bool, regState) {
	v := in.value
	if in.kind == history.Delete {
		v = absent
	}
	switch {
	case in.kind == history.Read:
		return s.has(v), known(v)
	case in.maybe:
		return true, s.with(v)
	}
	return true, known(v)
}

func (s regState) equal(o regState) bool {
	return s.any == o.any && slices.Equal(s.vals, o.vals)
}

func (s regState) hash() uint64 {
	f := fnv.New64a()
	if s.any {
		f.Write([]byte{1})
	}
	for _, v := range s.vals {
		f.Write([]byte(v))
		f.Write([]byte{0})
	}
	return f.Sum64()
}

func describe(v string) string {
	if v == absent {
		return "absent"
	}
	return v
}

func (s regState) String() string {
	if s.any {
		return "unknown"
	}
	out := make([]string, len(s.vals))
	for i, v := range s.vals {
		out[i] = describe(v)
	}
	if len(out) == 1 {
		return out[0]
	}
	return "one of {" + strings.Join(out, ", ") + "}"
}

// regModel is the porcupine model of one key of the desired state,
// starting from init.
func regModel(key string, init regState) porcupine.Model {
	return porcupine.Model{
		Init: func() any { return init },
		Step: func(st, in, _ any) (bool, any) {
			return st.(regState).step(in.(regInput))
		},
		Equal: func(a, b any) bool { return a.(regState).equal(b.(regState)) },
		Hash:  func(st any) uint64 { return st.(regState).hash() },
		DescribeOperation: func(in, _ any) string {
			op := in.(regInput)
			maybe := ""
			if op.maybe {
				maybe = " (maybe)"
			}
			switch op.kind {
			case history.Write:
				return fmt.Sprintf("#%d %s=%s%s", op.id, key, op.value, maybe)
			case history.Delete:
				return fmt.Sprintf("#%d delete %s%s", op.id, key, maybe)
			}
			return fmt.Sprintf("#%d read %s=%s", op.id, key, describe(op.value))
		},
		DescribeState: func(st any) string { return key + "=" + st.(regState).String() },
	}
}
