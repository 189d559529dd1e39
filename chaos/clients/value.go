package clients

import (
	"errors"
	"fmt"

	"gopkg.in/yaml.v3"
)

// ErrNoValue means a runtimeConfig carries no chaos value.
var ErrNoValue = errors.New("runtimeConfig carries no chaos value")

// ValueEnv is the env variable of the process workload that carries the
// written value.
const ValueEnv = "CHAOS_VALUE"

// Value is the value client writes in its seq-th write: unique in a run.
func Value(client int, seq int64) string { return fmt.Sprintf("c%d-%d", client, seq) }

// RuntimeConfig is the runtimeConfig of a process workload that carries
// value: a long sleep, so an agent that runs it has a stable process.
func RuntimeConfig(value string) string {
	return fmt.Sprintf("command: /bin/sleep\nargs: [\"86400\"]\nenv:\n  %s: %q\n", ValueEnv, value)
}

// ParseValue reads the value back out of a RuntimeConfig.
func ParseValue(runtimeConfig string) (string, error) {
	var rc struct {
		Env map[string]string `yaml:"env"`
	}
	if err := yaml.Unmarshal([]byte(runtimeConfig), &rc); err != nil {
		return "", fmt.Errorf("%w: %v", ErrNoValue, err)
	}
	v, ok := rc.Env[ValueEnv]
	if !ok || v == "" {
		return "", fmt.Errorf("%w: env.%s missing in %q", ErrNoValue, ValueEnv, runtimeConfig)
	}
	return v, nil
}
