// Package yamlnode reads yaml.v3 node trees the way the runtimes read a
// runtimeConfig: aliases followed, a null the same as an absent field,
// numbers and booleans in a list of strings kept as written (as Ankaios'
// YAML decoder does). The agent's podman runtimes and the workload
// policy read the same configs with it, so both see the same values.
//
// It is a leaf package and pure: no I/O.
package yamlnode

import "gopkg.in/yaml.v3"

// Resolve follows aliases to the node they name.
func Resolve(n *yaml.Node) *yaml.Node {
	for n != nil && n.Kind == yaml.AliasNode && n.Alias != nil {
		n = n.Alias
	}
	return n
}

// IsNull reports whether n is absent or null.
func IsNull(n *yaml.Node) bool {
	n = Resolve(n)
	return n == nil || n.Kind == yaml.ScalarNode && n.Tag == "!!null"
}

// MapValue is the value of key in the mapping m, or nil.
func MapValue(m *yaml.Node, key string) *yaml.Node {
	m = Resolve(m)
	if m == nil || m.Kind != yaml.MappingNode {
		return nil
	}
	for i := 0; i+1 < len(m.Content); i += 2 {
		if k := Resolve(m.Content[i]); k.Kind == yaml.ScalarNode && k.Value == key {
			return Resolve(m.Content[i+1])
		}
	}
	return nil
}

// Strings reads a list of scalars; a null is no list. notList says n is
// something else than a list; bad is the index of the first item that
// is not a scalar, -1 when every one is.
func Strings(n *yaml.Node) (out []string, notList bool, bad int) {
	n = Resolve(n)
	if IsNull(n) {
		return nil, false, -1
	}
	if n.Kind != yaml.SequenceNode {
		return nil, true, -1
	}
	out = make([]string, 0, len(n.Content))
	for i, item := range n.Content {
		item = Resolve(item)
		if item.Kind != yaml.ScalarNode || IsNull(item) {
			return nil, false, i
		}
		out = append(out, item.Value)
	}
	return out, false, -1
}

// Fields parses text, a document that must be a mapping or empty, and
// calls fn for each key with its field path (root.KEY), refusing keys
// that are not strings or that repeat. bad makes the caller's error
// naming a field; keys, when not empty, names the expected keys in the
// error for a document that is not a mapping.
func Fields(text, root, keys string, bad func(field, format string, args ...any) error, fn func(field, key string, v *yaml.Node) error) error {
	var doc yaml.Node
	if err := yaml.Unmarshal([]byte(text), &doc); err != nil {
		return bad(root, "not valid YAML: %v", err)
	}
	n := Resolve(&doc)
	if n.Kind == yaml.DocumentNode && len(n.Content) > 0 {
		n = Resolve(n.Content[0])
	}
	switch {
	case n.Kind == 0 || n.Kind == yaml.DocumentNode || IsNull(n):
		return nil // empty: only what is required is missing
	case n.Kind != yaml.MappingNode && keys != "":
		return bad(root, "expected a mapping with the keys %s", keys)
	case n.Kind != yaml.MappingNode:
		return bad(root, "expected a mapping")
	}
	seen := map[string]bool{}
	for i := 0; i+1 < len(n.Content); i += 2 {
		k, v := Resolve(n.Content[i]), Resolve(n.Content[i+1])
		if k.Kind != yaml.ScalarNode {
			return bad(root, "keys must be strings (line %d)", k.Line)
		}
		field := root + "." + k.Value
		if seen[k.Value] {
			return bad(field, "defined more than once")
		}
		seen[k.Value] = true
		if err := fn(field, k.Value, v); err != nil {
			return err
		}
	}
	return nil
}
