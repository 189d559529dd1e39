package process

import (
	"fmt"
	"math"
	"path/filepath"
	"strconv"
	"strings"

	"gopkg.in/yaml.v3"

	"github.com/grapnel-io/grapnel/agent/runtime"
)

// ConfigError names the runtimeConfig field that was rejected and why. It
// wraps runtime.ErrBadConfig.
type ConfigError struct {
	Field  string
	Reason string
}

func (e *ConfigError) Error() string { return e.Field + ": " + e.Reason }

// Unwrap lets errors.Is(err, runtime.ErrBadConfig) hold.
func (e *ConfigError) Unwrap() error { return runtime.ErrBadConfig }

func configErr(field, format string, args ...any) error {
	return &ConfigError{Field: field, Reason: fmt.Sprintf(format, args...)}
}

// processConfig is a parsed runtimeConfig.
type processConfig struct {
	Command    string
	Args       []string
	Env        map[string]string
	WorkingDir string
	// User is the user the workload asks to run as, a name or a number;
	// "" = a uid of its own from the agent's range (see users.go).
	User string
}

const root = "runtimeConfig"

// parseConfig reads a rendered runtimeConfig. It walks the YAML node tree
// rather than decoding into a struct so that every error can name the
// exact field, list index or env key.
func parseConfig(text string) (*processConfig, error) {
	var doc yaml.Node
	if err := yaml.Unmarshal([]byte(text), &doc); err != nil {
		return nil, configErr(root, "not valid YAML: %v", err)
	}
	if len(doc.Content) == 0 || isNull(doc.Content[0]) {
		return nil, configErr(root+".command", "required")
	}
	m := deref(doc.Content[0])
	if m.Kind != yaml.MappingNode {
		return nil, configErr(root, "expected a mapping with the keys command, args, env, workingDir and user")
	}
	var (
		c       processConfig
		seen    = map[string]bool{}
		hasCmd  bool
		content = m.Content
	)
	for i := 0; i+1 < len(content); i += 2 {
		k, v := deref(content[i]), deref(content[i+1])
		if k.Kind != yaml.ScalarNode {
			return nil, configErr(root, "keys must be strings")
		}
		field := root + "." + k.Value
		if seen[k.Value] {
			return nil, configErr(field, "duplicate key")
		}
		seen[k.Value] = true
		var err error
		switch k.Value {
		case "command":
			hasCmd = true
			c.Command, err = parseString(field, v)
			if err == nil && c.Command == "" {
				err = configErr(field, "must not be empty")
			}
		case "args":
			c.Args, err = parseArgs(field, v)
		case "env":
			c.Env, err = parseEnv(field, v)
		case "workingDir":
			if isNull(v) {
				break
			}
			c.WorkingDir, err = parseString(field, v)
			if err == nil && c.WorkingDir != "" && !filepath.IsAbs(c.WorkingDir) {
				err = configErr(field, "must be an absolute path, got %q", c.WorkingDir)
			}
		case "user":
			if isNull(v) {
				break
			}
			c.User, err = parseString(field, v)
			if err == nil {
				err = checkUserSyntax(field, c.User)
			}
		default:
			err = configErr(field, "unknown key (expected command, args, env, workingDir or user)")
		}
		if err != nil {
			return nil, err
		}
	}
	if !hasCmd {
		return nil, configErr(root+".command", "required")
	}
	return &c, nil
}

// checkUserSyntax accepts a uid (decimal) or a user name as useradd
// allows them; whether the user exists and may be used is the runtime's
// question (Runtime.Owner).
func checkUserSyntax(field, u string) error {
	if u == "" {
		return configErr(field, "must not be empty (leave the key out for a uid of the workload's own)")
	}
	if n, err := strconv.ParseUint(u, 10, 32); err == nil {
		if n == math.MaxUint32 {
			return configErr(field, "uid %d is not a valid user", n)
		}
		return nil
	}
	if len(u) > 32 {
		return configErr(field, "user name %.40q is longer than 32 characters", u)
	}
	for i, r := range u {
		ok := r == '_' || r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' ||
			i > 0 && (r == '-' || r == '.' || r >= '0' && r <= '9')
		if !ok {
			return configErr(field, "%q is neither a uid nor a user name ([a-zA-Z_][a-zA-Z0-9._-]*)", u)
		}
	}
	return nil
}

func parseArgs(field string, v *yaml.Node) ([]string, error) {
	if isNull(v) {
		return nil, nil
	}
	if v.Kind != yaml.SequenceNode {
		return nil, configErr(field, "expected a list of strings")
	}
	args := make([]string, 0, len(v.Content))
	for i, n := range v.Content {
		s, err := parseString(fmt.Sprintf("%s[%d]", field, i), deref(n))
		if err != nil {
			return nil, err
		}
		args = append(args, s)
	}
	return args, nil
}

func parseEnv(field string, v *yaml.Node) (map[string]string, error) {
	if isNull(v) {
		return nil, nil
	}
	if v.Kind != yaml.MappingNode {
		return nil, configErr(field, "expected a mapping of names to strings")
	}
	env := make(map[string]string, len(v.Content)/2)
	for i := 0; i+1 < len(v.Content); i += 2 {
		k, val := deref(v.Content[i]), deref(v.Content[i+1])
		if k.Kind != yaml.ScalarNode || isNull(k) {
			return nil, configErr(field, "names must be strings")
		}
		name := k.Value
		path := field + "." + name
		switch {
		case name == "":
			return nil, configErr(field, "a variable name must not be empty")
		case strings.ContainsAny(name, "=\x00"):
			return nil, configErr(path, "a variable name must not contain '=' or a NUL byte")
		}
		if _, dup := env[name]; dup {
			return nil, configErr(path, "duplicate key")
		}
		s, err := parseString(path, val)
		if err != nil {
			return nil, err
		}
		env[name] = s
	}
	return env, nil
}

// parseString accepts any non-null scalar as its literal text, so that
// `args: [-n, 5]` or `env: {DEBUG: true}` mean what they look like.
func parseString(field string, v *yaml.Node) (string, error) {
	if v.Kind != yaml.ScalarNode || isNull(v) {
		return "", configErr(field, "expected a string")
	}
	if strings.ContainsRune(v.Value, 0) {
		return "", configErr(field, "must not contain a NUL byte")
	}
	return v.Value, nil
}

func isNull(n *yaml.Node) bool {
	n = deref(n)
	return n.Kind == yaml.ScalarNode && n.Tag == "!!null"
}

// deref follows a YAML alias (*name) to the node it names.
func deref(n *yaml.Node) *yaml.Node {
	for n.Kind == yaml.AliasNode && n.Alias != nil {
		n = n.Alias
	}
	return n
}
