package workloadpolicy

import (
	"fmt"

	"gopkg.in/yaml.v3"
)

// The runtimeConfig is read as the runtimes read it (agent/runtime):
// a YAML mapping walked node by node, aliases followed, repeated keys
// refused. Fields the policy does not judge are left to the runtime.

// topFields calls fn for each key of the runtimeConfig's mapping; an
// empty config has none.
func topFields(text string, fn func(field, key string, v *yaml.Node) error) error {
	var doc yaml.Node
	if err := yaml.Unmarshal([]byte(text), &doc); err != nil {
		return parseErr(root, "not valid YAML: %v", err)
	}
	n := resolve(&doc)
	if n.Kind == yaml.DocumentNode && len(n.Content) > 0 {
		n = resolve(n.Content[0])
	}
	switch {
	case n.Kind == 0 || n.Kind == yaml.DocumentNode || isNull(n):
		return nil
	case n.Kind != yaml.MappingNode:
		return parseErr(root, "expected a mapping")
	}
	seen := map[string]bool{}
	for i := 0; i+1 < len(n.Content); i += 2 {
		k, v := resolve(n.Content[i]), resolve(n.Content[i+1])
		if k.Kind != yaml.ScalarNode {
			return parseErr(root, "keys must be strings")
		}
		field := root + "." + k.Value
		if seen[k.Value] {
			return parseErr(field, "defined more than once")
		}
		seen[k.Value] = true
		if err := fn(field, k.Value, v); err != nil {
			return err
		}
	}
	return nil
}

const root = "runtimeConfig"

func resolve(n *yaml.Node) *yaml.Node {
	for n != nil && n.Kind == yaml.AliasNode && n.Alias != nil {
		n = n.Alias
	}
	return n
}

func isNull(n *yaml.Node) bool {
	n = resolve(n)
	return n == nil || n.Kind == yaml.ScalarNode && n.Tag == "!!null"
}

// stringList reads a list of scalars as the runtimes do.
func stringList(field string, n *yaml.Node) ([]string, error) {
	if isNull(n) {
		return nil, nil
	}
	if n.Kind != yaml.SequenceNode {
		return nil, parseErr(field, "expected a list of strings")
	}
	out := make([]string, 0, len(n.Content))
	for i, item := range n.Content {
		item = resolve(item)
		if item.Kind != yaml.ScalarNode || isNull(item) {
			return nil, parseErr(fmt.Sprintf("%s[%d]", field, i), "expected a string")
		}
		out = append(out, item.Value)
	}
	return out, nil
}

// scalar reads a scalar field; "" for null.
func scalar(field string, n *yaml.Node) (string, error) {
	if isNull(n) {
		return "", nil
	}
	if n.Kind != yaml.ScalarNode {
		return "", parseErr(field, "expected a string")
	}
	return n.Value, nil
}

// mapValue is the value of key in the mapping m, or nil.
func mapValue(m *yaml.Node, key string) *yaml.Node {
	m = resolve(m)
	if m == nil || m.Kind != yaml.MappingNode {
		return nil
	}
	for i := 0; i+1 < len(m.Content); i += 2 {
		if k := resolve(m.Content[i]); k.Kind == yaml.ScalarNode && k.Value == key {
			return resolve(m.Content[i+1])
		}
	}
	return nil
}

// mapKeys calls fn for every key of the mapping m (none if m is not one).
func mapKeys(m *yaml.Node, fn func(key string, v *yaml.Node)) {
	m = resolve(m)
	if m == nil || m.Kind != yaml.MappingNode {
		return
	}
	for i := 0; i+1 < len(m.Content); i += 2 {
		if k := resolve(m.Content[i]); k.Kind == yaml.ScalarNode {
			fn(k.Value, resolve(m.Content[i+1]))
		}
	}
}

// items are the elements of the sequence n (none if n is not one).
func items(n *yaml.Node) []*yaml.Node {
	n = resolve(n)
	if n == nil || n.Kind != yaml.SequenceNode {
		return nil
	}
	out := make([]*yaml.Node, len(n.Content))
	for i, c := range n.Content {
		out[i] = resolve(c)
	}
	return out
}

// text is a scalar's value, "" for anything else.
func text(n *yaml.Node) string {
	n = resolve(n)
	if n == nil || n.Kind != yaml.ScalarNode || isNull(n) {
		return ""
	}
	return n.Value
}
