package podman

import (
	"fmt"
	"strings"

	"gopkg.in/yaml.v3"

	"github.com/grapnel-io/grapnel/agent/runtime"
)

// runConfig is a parsed podman runtimeConfig, with the Ankaios field
// names: generalOptions go before `run`, commandOptions after it, and
// commandArgs after the image.
type runConfig struct {
	GeneralOptions []string
	Image          string
	CommandOptions []string
	CommandArgs    []string
}

// configError names the runtimeConfig field that was rejected and why.
type configError struct {
	Field  string
	Reason string
}

func (e *configError) Error() string { return e.Field + ": " + e.Reason }

// Unwrap lets errors.Is(err, runtime.ErrBadConfig) hold.
func (e *configError) Unwrap() error { return runtime.ErrBadConfig }

func badConfig(field, format string, args ...any) error {
	return &configError{Field: field, Reason: fmt.Sprintf(format, args...)}
}

const root = "runtimeConfig"

// parseConfig decodes a rendered runtimeConfig. It walks the YAML node
// tree rather than unmarshalling into a struct so that every error can
// name the exact field (and list index) at fault, and so that unknown
// or repeated keys are refused instead of silently ignored.
func parseConfig(text string) (runConfig, error) {
	var c runConfig
	err := eachField(text, "generalOptions, image, commandOptions and commandArgs", func(field, key string, v *yaml.Node) (err error) {
		switch key {
		case "generalOptions":
			c.GeneralOptions, err = stringList(field, v)
		case "commandOptions":
			c.CommandOptions, err = stringList(field, v)
		case "commandArgs":
			c.CommandArgs, err = stringList(field, v)
		case "image":
			c.Image, err = imageName(field, v)
		default:
			err = badConfig(field, "unknown field (expected generalOptions, image, commandOptions or commandArgs)")
		}
		return err
	})
	if err != nil {
		return runConfig{}, err
	}
	if c.Image == "" {
		return runConfig{}, badConfig(root+".image", "required")
	}
	return c, nil
}

// eachField parses a runtimeConfig that must be a mapping (or empty) and
// calls fn for each key with the key's field path, refusing keys that are
// not strings or that repeat; keys names them in the error for another
// kind of node.
func eachField(text, keys string, fn func(field, key string, v *yaml.Node) error) error {
	var doc yaml.Node
	if err := yaml.Unmarshal([]byte(text), &doc); err != nil {
		return badConfig(root, "not valid YAML: %v", err)
	}
	n := resolve(&doc)
	if n.Kind == yaml.DocumentNode && len(n.Content) > 0 {
		n = resolve(n.Content[0])
	}
	switch {
	case n.Kind == 0 || n.Kind == yaml.DocumentNode || isNull(n):
		return nil // empty: only what is required is missing
	case n.Kind != yaml.MappingNode:
		return badConfig(root, "expected a mapping with the keys %s", keys)
	}
	seen := map[string]bool{}
	for i := 0; i+1 < len(n.Content); i += 2 {
		k, v := resolve(n.Content[i]), resolve(n.Content[i+1])
		if k.Kind != yaml.ScalarNode {
			return badConfig(root, "keys must be strings (line %d)", k.Line)
		}
		field := root + "." + k.Value
		if seen[k.Value] {
			return badConfig(field, "defined more than once")
		}
		seen[k.Value] = true
		if err := fn(field, k.Value, v); err != nil {
			return err
		}
	}
	return nil
}

// resolve follows YAML aliases to the node they name.
func resolve(n *yaml.Node) *yaml.Node {
	for n.Kind == yaml.AliasNode && n.Alias != nil {
		n = n.Alias
	}
	return n
}

func isNull(n *yaml.Node) bool {
	return n.Kind == yaml.ScalarNode && n.Tag == "!!null"
}

// stringList accepts a sequence of scalars; numbers and booleans are kept
// as written (`commandArgs: [sleep, 5]`), as Ankaios' YAML decoder does.
func stringList(field string, n *yaml.Node) ([]string, error) {
	if isNull(n) {
		return nil, nil
	}
	if n.Kind != yaml.SequenceNode {
		return nil, badConfig(field, "expected a list of strings")
	}
	out := make([]string, 0, len(n.Content))
	for i, item := range n.Content {
		item = resolve(item)
		if item.Kind != yaml.ScalarNode || isNull(item) {
			return nil, badConfig(fmt.Sprintf("%s[%d]", field, i), "expected a string")
		}
		out = append(out, item.Value)
	}
	return out, nil
}

func imageName(field string, n *yaml.Node) (string, error) {
	if isNull(n) {
		return "", badConfig(field, "required")
	}
	if n.Kind != yaml.ScalarNode {
		return "", badConfig(field, "expected a string")
	}
	img := strings.TrimSpace(n.Value)
	switch {
	case img == "":
		return "", badConfig(field, "required")
	case strings.HasPrefix(img, "-"):
		// podman would read it as an option of `run`.
		return "", badConfig(field, "must not start with '-'")
	case strings.ContainsAny(img, " \t\n"):
		return "", badConfig(field, "must not contain whitespace")
	}
	return img, nil
}
