package state

import (
	"bytes"
	"encoding/json"
	"fmt"

	"gopkg.in/yaml.v3"
)

// ParseTree reads YAML (or JSON, which is YAML) into a Tree.
func ParseTree(data []byte) (Tree, error) {
	var v any
	dec := yaml.NewDecoder(bytes.NewReader(data))
	if err := dec.Decode(&v); err != nil {
		if err.Error() == "EOF" {
			return Tree{}, nil
		}
		return nil, &FieldError{Reason: fmt.Sprintf("not valid YAML: %v", err)}
	}
	if v == nil {
		return Tree{}, nil
	}
	n, err := Normalize(v, "")
	if err != nil {
		return nil, err
	}
	t, ok := n.(map[string]any)
	if !ok {
		return nil, &FieldError{Reason: fmt.Sprintf("expected a map at the top level, got %s", TypeName(n))}
	}
	return t, nil
}

// Normalize turns decoded YAML or JSON into canonical Tree values: string
// map keys, int64 integers.
func Normalize(v any, path string) (any, error) {
	switch x := v.(type) {
	case map[string]any:
		out := make(map[string]any, len(x))
		for k, e := range x {
			n, err := Normalize(e, join(path, k))
			if err != nil {
				return nil, err
			}
			out[k] = n
		}
		return out, nil
	case map[any]any:
		m, err := AsMap(x, path)
		if err != nil {
			return nil, err
		}
		return Normalize(m, path)
	case []any:
		out := make([]any, len(x))
		for i, e := range x {
			n, err := Normalize(e, fmt.Sprintf("%s.%d", path, i))
			if err != nil {
				return nil, err
			}
			out[i] = n
		}
		return out, nil
	case int:
		return int64(x), nil
	case uint64:
		return int64(x), nil
	case json.Number:
		if i, err := x.Int64(); err == nil {
			return i, nil
		}
		f, _ := x.Float64()
		return f, nil
	}
	return v, nil
}

// ParseManifest parses a manifest (the desired state in YAML or JSON),
// checks its apiVersion and naming rules, and returns it with a warning for
// the deprecated v0.1 format.
func ParseManifest(data []byte) (State, string, error) {
	t, err := ParseTree(data)
	if err != nil {
		return State{}, "", err
	}
	s, err := DecodeState(t, "")
	if err != nil {
		return State{}, "", err
	}
	warn, err := CheckAPIVersion(s.APIVersion)
	if err != nil {
		return State{}, "", err
	}
	if err := s.Validate(); err != nil {
		return State{}, "", err
	}
	return s, warn, nil
}
