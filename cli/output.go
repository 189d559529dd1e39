package cli

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"sort"
	"strings"

	"gopkg.in/yaml.v3"
)

// Format is the output format of state and events.
type Format string

// Output formats.
const (
	FormatYAML Format = "yaml"
	FormatJSON Format = "json"
)

// ParseFormat accepts "yaml" and "json".
func ParseFormat(s string) (Format, error) {
	switch f := Format(strings.ToLower(s)); f {
	case FormatYAML, FormatJSON:
		return f, nil
	}
	return "", fmt.Errorf("output format %q is not supported: use yaml or json", s)
}

// KeyOrder gives the preferred key order of the map at path, or nil for
// alphabetical order. Field order follows the Ankaios message definitions,
// so YAML and JSON read like ank's; maps keyed by user names (workloads,
// agents, configs) stay alphabetical. "*" in a pattern matches any key or
// list index.
type KeyOrder func(path []string) []string

// The order of a workload's fields is the order of upstream ank's
// FilteredWorkloadSpec (controlInterfaceAccess before configs), files last.
var (
	stateFields    = []string{"apiVersion", "workloads", "configs"}
	workloadFields = []string{"agent", "tags", "dependencies", "restartPolicy", "runtime", "runtimeConfig", "controlInterfaceAccess", "configs", "files"}
	ruleFields     = []string{"type", "operation", "filterMasks", "workloadNames"}
)

var completeStateOrders = []struct {
	pattern []string
	keys    []string
}{
	{nil, []string{"desiredState", "workloadStates", "agents", "effectiveState"}},
	{[]string{"desiredState"}, stateFields},
	{[]string{"effectiveState"}, stateFields},
	{[]string{"desiredState", "workloads", "*"}, workloadFields},
	{[]string{"effectiveState", "workloads", "*"}, workloadFields},
	{[]string{"*", "workloads", "*", "controlInterfaceAccess"}, []string{"allowRules", "denyRules"}},
	{[]string{"*", "workloads", "*", "controlInterfaceAccess", "*", "*"}, ruleFields},
	{[]string{"*", "workloads", "*", "files", "*"}, []string{"mountPoint", "data", "binaryData"}},
	{[]string{"workloadStates", "*", "*", "*"}, []string{"state", "subState", "additionalInfo"}},
	{[]string{"agents", "*"}, []string{"status", "tags"}},
	{[]string{"agents", "*", "status"}, []string{"cpuUsage", "freeMemory"}},
}

// completeStateOrder orders the keys of a complete-state tree.
func completeStateOrder(path []string) []string {
	for _, o := range completeStateOrders {
		if matchPath(o.pattern, path) {
			return o.keys
		}
	}
	return nil
}

func matchPath(pattern, path []string) bool {
	if len(pattern) != len(path) {
		return false
	}
	for i, p := range pattern {
		if p != "*" && p != path[i] {
			return false
		}
	}
	return true
}

// orderedKeys lists m's keys: first those named by order, in that order,
// then the rest alphabetically.
func orderedKeys(m map[string]any, order []string) []string {
	keys := make([]string, 0, len(m))
	seen := make(map[string]bool, len(order))
	for _, k := range order {
		if _, ok := m[k]; ok {
			keys = append(keys, k)
			seen[k] = true
		}
	}
	rest := make([]string, 0, len(m)-len(keys))
	for k := range m {
		if !seen[k] {
			rest = append(rest, k)
		}
	}
	sort.Strings(rest)
	return append(keys, rest...)
}

// plainScalar is a string that YAML prints without quotes, as serde_yaml
// (ank's serializer) does for text that reads back as a string in YAML
// 1.2, while yaml.v3 would quote it because YAML 1.1 reads it as another
// type (an RFC 3339 time). Only text that is safe as a plain scalar may be
// one. JSON writes it as a string.
type plainScalar string

// EncodeYAML renders a tree as a YAML document; multi-line strings become
// literal blocks.
func EncodeYAML(v any, order KeyOrder) (string, error) {
	n, err := yamlNode(v, nil, order)
	if err != nil {
		return "", err
	}
	var b bytes.Buffer
	enc := yaml.NewEncoder(&b)
	enc.SetIndent(2)
	if err := enc.Encode(n); err != nil {
		return "", fmt.Errorf("cannot write YAML: %w", err)
	}
	if err := enc.Close(); err != nil {
		return "", fmt.Errorf("cannot write YAML: %w", err)
	}
	return b.String(), nil
}

func yamlNode(v any, path []string, order KeyOrder) (*yaml.Node, error) {
	switch x := v.(type) {
	case map[string]any:
		n := &yaml.Node{Kind: yaml.MappingNode, Tag: "!!map"}
		var ord []string
		if order != nil {
			ord = order(path)
		}
		for _, k := range orderedKeys(x, ord) {
			kn := &yaml.Node{}
			if err := kn.Encode(k); err != nil {
				return nil, err
			}
			vn, err := yamlNode(x[k], append(path[:len(path):len(path)], k), order)
			if err != nil {
				return nil, err
			}
			n.Content = append(n.Content, kn, vn)
		}
		return n, nil
	case []any:
		n := &yaml.Node{Kind: yaml.SequenceNode, Tag: "!!seq"}
		for i, e := range x {
			en, err := yamlNode(e, append(path[:len(path):len(path)], fmt.Sprint(i)), order)
			if err != nil {
				return nil, err
			}
			n.Content = append(n.Content, en)
		}
		return n, nil
	case []string:
		l := make([]any, len(x))
		for i, e := range x {
			l[i] = e
		}
		return yamlNode(l, path, order)
	case plainScalar:
		// Without a tag the encoder neither resolves nor quotes the value.
		return &yaml.Node{Kind: yaml.ScalarNode, Value: string(x)}, nil
	case string:
		n := &yaml.Node{}
		if err := n.Encode(x); err != nil {
			return nil, err
		}
		if strings.Contains(x, "\n") {
			n.Style = yaml.LiteralStyle
		}
		return n, nil
	default:
		n := &yaml.Node{}
		if err := n.Encode(x); err != nil {
			return nil, fmt.Errorf("cannot write %T as YAML: %w", v, err)
		}
		return n, nil
	}
}

// EncodeJSON renders a tree as JSON with keys in the given order; pretty
// indents by two spaces, otherwise it is one line.
func EncodeJSON(v any, order KeyOrder, pretty bool) (string, error) {
	var b bytes.Buffer
	if err := writeJSON(&b, v, nil, order); err != nil {
		return "", err
	}
	if !pretty {
		return b.String(), nil
	}
	var out bytes.Buffer
	if err := json.Indent(&out, b.Bytes(), "", "  "); err != nil {
		return "", fmt.Errorf("cannot write JSON: %w", err)
	}
	return out.String(), nil
}

func writeJSON(b *bytes.Buffer, v any, path []string, order KeyOrder) error {
	switch x := v.(type) {
	case map[string]any:
		var ord []string
		if order != nil {
			ord = order(path)
		}
		b.WriteByte('{')
		for i, k := range orderedKeys(x, ord) {
			if i > 0 {
				b.WriteByte(',')
			}
			if err := jsonScalar(b, k); err != nil {
				return err
			}
			b.WriteByte(':')
			if err := writeJSON(b, x[k], append(path[:len(path):len(path)], k), order); err != nil {
				return err
			}
		}
		b.WriteByte('}')
		return nil
	case []any:
		b.WriteByte('[')
		for i, e := range x {
			if i > 0 {
				b.WriteByte(',')
			}
			if err := writeJSON(b, e, append(path[:len(path):len(path)], fmt.Sprint(i)), order); err != nil {
				return err
			}
		}
		b.WriteByte(']')
		return nil
	case []string:
		l := make([]any, len(x))
		for i, e := range x {
			l[i] = e
		}
		return writeJSON(b, l, path, order)
	case plainScalar:
		return jsonScalar(b, string(x))
	}
	return jsonScalar(b, v)
}

// jsonScalar writes one value without escaping <, > and &, which would
// only make runtime configs harder to read.
func jsonScalar(b *bytes.Buffer, v any) error {
	var s bytes.Buffer
	enc := json.NewEncoder(&s)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(v); err != nil {
		return fmt.Errorf("cannot write %T as JSON: %w", v, err)
	}
	b.Write(bytes.TrimRight(s.Bytes(), "\n"))
	return nil
}

// WriteTree writes v to w as JSON (pretty) when output is "json", as YAML
// otherwise, its maps' keys in order: the -o json|yaml of the commands
// that print a tree.
func WriteTree(w io.Writer, output string, v any, order KeyOrder) error {
	var (
		text string
		err  error
	)
	if output == "json" {
		text, err = EncodeJSON(v, order, true)
	} else {
		text, err = EncodeYAML(v, order)
	}
	if err != nil {
		return err
	}
	_, err = io.WriteString(w, text)
	return err
}
