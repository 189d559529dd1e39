package check

import (
	"fmt"
	"hash/fnv"
	"maps"
	"sort"
	"strings"

	"github.com/anishathalye/porcupine"
	"github.com/grapnel-io/grapnel/chaos/history"
)

// kvInput is the input of one porcupine operation.
type kvInput struct {
	kind  history.Kind
	key   string // write/delete: the key; read: "" for all keys, else one key
	value string
	id    int64
}

// kvState is the desired state the clients own: key → value, no entry for
// an absent key. When wild is set, the keys not in m have an unknown value
// (the state before a window of the history); the first read fixes them.
// States are never mutated: Step returns a new one.
type kvState struct {
	m    map[string]string
	wild bool
	h    uint64 // XOR of entryHash over m, so equal maps hash equally
}

func entryHash(k, v string) uint64 {
	f := fnv.New64a()
	f.Write([]byte(k))
	f.Write([]byte{0})
	f.Write([]byte(v))
	return f.Sum64()
}

func (s kvState) set(k, v string) kvState {
	m := maps.Clone(s.m)
	if m == nil {
		m = map[string]string{}
	}
	h := s.h
	if old, ok := m[k]; ok {
		h ^= entryHash(k, old)
	}
	if v == "" {
		delete(m, k)
	} else {
		m[k] = v
		h ^= entryHash(k, v)
	}
	// A known-absent key in a wild state is kept as "" so it is not wild.
	if v == "" && s.wild {
		m[k] = ""
		h ^= entryHash(k, "")
	}
	return kvState{m: m, wild: s.wild, h: h}
}

// read says whether a read of key ("" = all keys) may observe seen in s,
// and returns the state with the unknown keys fixed by the observation.
func (s kvState) read(key string, seen map[string]string) (bool, kvState) {
	if key != "" {
		want, known := s.m[key]
		if !known && s.wild {
			return true, s.set(key, seen[key])
		}
		return seen[key] == want, s
	}
	for k, v := range s.m {
		if seen[k] != v {
			return false, s
		}
	}
	if !s.wild {
		for k, v := range seen {
			if v != "" && s.m[k] != v {
				return false, s
			}
		}
		return true, s
	}
	fixed := kvState{m: map[string]string{}}
	for k, v := range seen {
		if v != "" {
			fixed.m[k] = v
			fixed.h ^= entryHash(k, v)
		}
	}
	return true, fixed
}

func (s kvState) equal(o kvState) bool {
	if s.wild != o.wild || s.h != o.h || len(s.m) != len(o.m) {
		return false
	}
	for k, v := range s.m {
		if w, ok := o.m[k]; !ok || w != v {
			return false
		}
	}
	return true
}

func (s kvState) String() string {
	keys := make([]string, 0, len(s.m))
	for k := range s.m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	var b strings.Builder
	b.WriteString("{")
	for i, k := range keys {
		if i > 0 {
			b.WriteString(", ")
		}
		v := s.m[k]
		if v == "" {
			v = "absent"
		}
		fmt.Fprintf(&b, "%s=%s", k, v)
	}
	if s.wild {
		b.WriteString(", others unknown")
	}
	b.WriteString("}")
	return b.String()
}

// kvModel is the porcupine model of the desired state. wild starts from an
// unknown state (used to check a window cut out of a history).
func kvModel(wild bool) porcupine.Model {
	return porcupine.Model{
		Partition: partitionByKey,
		Init:      func() any { return kvState{m: map[string]string{}, wild: wild} },
		Step: func(st, in, out any) (bool, any) {
			s, op := st.(kvState), in.(kvInput)
			switch op.kind {
			case history.Write:
				return true, s.set(op.key, op.value)
			case history.Delete:
				return true, s.set(op.key, "")
			default:
				seen, _ := out.(map[string]string)
				return s.read(op.key, seen)
			}
		},
		Equal: func(a, b any) bool { return a.(kvState).equal(b.(kvState)) },
		Hash: func(st any) uint64 {
			s := st.(kvState)
			if s.wild {
				return ^s.h
			}
			return s.h
		},
		DescribeOperation: func(in, out any) string {
			op := in.(kvInput)
			switch op.kind {
			case history.Write:
				return fmt.Sprintf("#%d %s=%s", op.id, op.key, op.value)
			case history.Delete:
				return fmt.Sprintf("#%d delete %s", op.id, op.key)
			default:
				seen, _ := out.(map[string]string)
				return fmt.Sprintf("#%d read %s", op.id, kvState{m: seen})
			}
		},
		DescribeState: func(st any) string { return st.(kvState).String() },
	}
}

// partitionByKey splits a history into one sub-history per key: the writes
// and deletes of the key, and every read projected onto the key (a read of
// all keys observes each key). See the package doc for what this checks.
func partitionByKey(ops []porcupine.Operation) [][]porcupine.Operation {
	keys := map[string]int{}
	var parts [][]porcupine.Operation
	part := func(k string) int {
		i, ok := keys[k]
		if !ok {
			i = len(parts)
			keys[k] = i
			parts = append(parts, nil)
		}
		return i
	}
	for _, op := range ops {
		in := op.Input.(kvInput)
		if in.kind != history.Read {
			part(in.key)
			continue
		}
		if in.key != "" {
			part(in.key)
			continue
		}
		seen, _ := op.Output.(map[string]string)
		for k := range seen {
			part(k)
		}
	}
	for _, op := range ops {
		in := op.Input.(kvInput)
		if in.kind != history.Read || in.key != "" {
			i := part(in.key)
			parts[i] = append(parts[i], op)
			continue
		}
		for k, i := range keys {
			sub := op
			in.key = k
			sub.Input = in
			parts[i] = append(parts[i], sub)
		}
	}
	return parts
}
