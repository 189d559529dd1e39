package workloadpolicy

import (
	"fmt"

	"gopkg.in/yaml.v3"

	"github.com/grapnel-io/grapnel/internal/yamlnode"
)

// The runtimeConfig is read as the runtimes read it (agent/runtime):
// a YAML mapping walked node by node, aliases followed, repeated keys
// refused. Fields the policy does not judge are left to the runtime.

// topFields calls fn for each key of the runtimeConfig's mapping; an
// empty config has none.
func topFields(text string, fn func(field, key string, v *yaml.Node) error) error {
	return yamlnode.Fields(text, root, "", parseErr, fn)
}

const root = "runtimeConfig"

// resolve, isNull and mapValue read nodes as the runtimes do.
var (
	resolve  = yamlnode.Resolve
	isNull   = yamlnode.IsNull
	mapValue = yamlnode.MapValue
)

// stringList reads a list of scalars as the runtimes do.
func stringList(field string, n *yaml.Node) ([]string, error) {
	out, notList, bad := yamlnode.Strings(n)
	switch {
	case notList:
		return nil, parseErr(field, "expected a list of strings")
	case bad >= 0:
		return nil, parseErr(fmt.Sprintf("%s[%d]", field, bad), "expected a string")
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
