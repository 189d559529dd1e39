package podman

import (
	"fmt"
	"strings"

	"gopkg.in/yaml.v3"

	"github.com/grapnel-io/grapnel/internal/yamlnode"

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
			err = runtime.BadConfig(field, "unknown field (expected generalOptions, image, commandOptions or commandArgs)")
		}
		return err
	})
	if err != nil {
		return runConfig{}, err
	}
	if c.Image == "" {
		return runConfig{}, runtime.BadConfig(root+".image", "required")
	}
	return c, nil
}

// eachField parses a runtimeConfig that must be a mapping (or empty) and
// calls fn for each key with the key's field path (yamlnode.Fields);
// keys names them in the error for another kind of node.
func eachField(text, keys string, fn func(field, key string, v *yaml.Node) error) error {
	return yamlnode.Fields(text, root, keys, runtime.BadConfig, fn)
}

// resolve and isNull read nodes as every runtimeConfig reader does.
var (
	resolve = yamlnode.Resolve
	isNull  = yamlnode.IsNull
)

// stringList accepts a sequence of scalars; numbers and booleans are kept
// as written (`commandArgs: [sleep, 5]`), as Ankaios' YAML decoder does.
func stringList(field string, n *yaml.Node) ([]string, error) {
	out, notList, bad := yamlnode.Strings(n)
	switch {
	case notList:
		return nil, runtime.BadConfig(field, "expected a list of strings")
	case bad >= 0:
		return nil, runtime.BadConfig(fmt.Sprintf("%s[%d]", field, bad), "expected a string")
	}
	return out, nil
}

func imageName(field string, n *yaml.Node) (string, error) {
	if isNull(n) {
		return "", runtime.BadConfig(field, "required")
	}
	if n.Kind != yaml.ScalarNode {
		return "", runtime.BadConfig(field, "expected a string")
	}
	img := strings.TrimSpace(n.Value)
	switch {
	case img == "":
		return "", runtime.BadConfig(field, "required")
	case strings.HasPrefix(img, "-"):
		// podman would read it as an option of `run`.
		return "", runtime.BadConfig(field, "must not start with '-'")
	case strings.ContainsAny(img, " \t\n"):
		return "", runtime.BadConfig(field, "must not contain whitespace")
	}
	return img, nil
}
