package rpc

import (
	"math"

	"github.com/grapnel-io/grapnel/rpc/ankbase"
	"github.com/grapnel-io/grapnel/state"
)

func agentsFromTree(v any, path string) (*ankbase.AgentMap, error) {
	agents, err := asMap(v, path)
	if err != nil {
		return nil, err
	}
	out := &ankbase.AgentMap{Agents: make(map[string]*ankbase.AgentAttributes, len(agents))}
	for _, name := range state.SortedKeys(agents) {
		p := joinPath(path, name)
		m, err := asMap(agents[name], p)
		if err != nil {
			return nil, err
		}
		if err := state.OnlyKeys(m, p, "status", "tags"); err != nil {
			return nil, err
		}
		a := &ankbase.AgentAttributes{}
		if v, ok := present(m, "status"); ok {
			if a.Status, err = agentStatusFromTree(v, joinPath(p, "status")); err != nil {
				return nil, err
			}
		}
		if v, ok := present(m, "tags"); ok {
			tags, err := state.DecodeTags(v, joinPath(p, "tags"))
			if err != nil {
				return nil, err
			}
			a.Tags = &ankbase.Tags{Tags: tags}
		}
		out.Agents[name] = a
	}
	return out, nil
}

func agentStatusFromTree(v any, path string) (*ankbase.AgentStatus, error) {
	m, err := asMap(v, path)
	if err != nil {
		return nil, err
	}
	if err := state.OnlyKeys(m, path, "cpuUsage", "freeMemory"); err != nil {
		return nil, err
	}
	st := &ankbase.AgentStatus{}
	if v, ok := present(m, "cpuUsage"); ok {
		n, err := asUint(v, joinPath(path, "cpuUsage"), math.MaxUint32)
		if err != nil {
			return nil, err
		}
		st.CpuUsage = &ankbase.CpuUsage{CpuUsage: uint32(n)}
	}
	if v, ok := present(m, "freeMemory"); ok {
		n, err := asUint(v, joinPath(path, "freeMemory"), math.MaxUint64)
		if err != nil {
			return nil, err
		}
		st.FreeMemory = &ankbase.FreeMemory{FreeMemory: n}
	}
	return st, nil
}

// present returns m[key] unless it is missing or null.
func present(m map[string]any, key string) (any, bool) {
	v, ok := m[key]
	return v, ok && v != nil
}

// asMap is state.AsMap without its leniency for null: a tree for the wire
// holds only present values, so a null where a map belongs (a workload, an
// agent, a file or a rule) is refused, not read as an empty map.
func asMap(v any, path string) (map[string]any, error) {
	if v == nil {
		return nil, fieldErr(path, "expected a map, got %s", state.TypeName(v))
	}
	return state.AsMap(v, path)
}

func optStringPtr(m map[string]any, key, path string) (*string, error) {
	v, ok := present(m, key)
	if !ok {
		return nil, nil
	}
	s, err := state.AsString(v, joinPath(path, key))
	if err != nil {
		return nil, err
	}
	return &s, nil
}

// asUint accepts the integer forms a Tree may hold (int64 canonically; int,
// uint64 and whole float64 from other decoders) within [0, limit].
func asUint(v any, path string, limit uint64) (uint64, error) {
	var n uint64
	switch x := v.(type) {
	case int64:
		if x < 0 {
			return 0, fieldErr(path, "must not be negative, got %d", x)
		}
		n = uint64(x)
	case int:
		if x < 0 {
			return 0, fieldErr(path, "must not be negative, got %d", x)
		}
		n = uint64(x)
	case uint64:
		n = x
	case float64:
		if x < 0 || x != math.Trunc(x) || x >= math.MaxUint64 {
			return 0, fieldErr(path, "expected a whole non-negative number, got %v", x)
		}
		n = uint64(x)
	default:
		return 0, fieldErr(path, "expected a number, got %s", state.TypeName(v))
	}
	if n > limit {
		return 0, fieldErr(path, "%d is larger than %d", n, limit)
	}
	return n, nil
}
