package process

import (
	"errors"
	"reflect"
	"testing"

	"github.com/grapnel-io/grapnel/agent/runtime"
)

func TestCheckAccepts(t *testing.T) {
	tests := []struct {
		name string
		in   string
		want processConfig
	}{
		{"command only", "command: sleep", processConfig{Command: "sleep"}},
		{"everything", `
command: /bin/sh
args: ["-c", "echo hi"]
env:
  FOO: bar
  EMPTY: ""
workingDir: /tmp
`, processConfig{Command: "/bin/sh", Args: []string{"-c", "echo hi"},
			Env: map[string]string{"FOO": "bar", "EMPTY": ""}, WorkingDir: "/tmp"}},
		{"scalars are taken as written", "command: sleep\nargs: [5, 0.5, true]\nenv: {PORT: 8080, DEBUG: yes}",
			processConfig{Command: "sleep", Args: []string{"5", "0.5", "true"}, Env: map[string]string{"PORT": "8080", "DEBUG": "yes"}}},
		{"empty args, env and workingDir", "command: x\nargs:\nenv:\nworkingDir:", processConfig{Command: "x"}},
		{"aliases", "command: &c echo\nargs: [*c]", processConfig{Command: "echo", Args: []string{"echo"}}},
		{"user by name", "command: x\nuser: nobody", processConfig{Command: "x", User: "nobody"}},
		{"user by uid", "command: x\nuser: 1234", processConfig{Command: "x", User: "1234"}},
		{"user null", "command: x\nuser:", processConfig{Command: "x"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := parseConfig(tt.in)
			if err != nil {
				t.Fatalf("parseConfig: %v", err)
			}
			if !reflect.DeepEqual(*got, tt.want) {
				t.Fatalf("got %+v, want %+v", *got, tt.want)
			}
		})
	}
}

func TestCheckRejects(t *testing.T) {
	tests := []struct {
		name, in, want string
	}{
		{"empty", "", "runtimeConfig.command: required"},
		{"null", "~", "runtimeConfig.command: required"},
		{"no command", "args: [a]", "runtimeConfig.command: required"},
		{"not a mapping", "- sleep", "runtimeConfig: expected a mapping with the keys command, args, env, workingDir and user"},
		{"bad yaml", "command: [", ""},
		{"command list", "command: [sleep]", "runtimeConfig.command: expected a string"},
		{"command null", "command: ~", "runtimeConfig.command: expected a string"},
		{"command empty", "command: ''", "runtimeConfig.command: must not be empty"},
		{"command NUL", `command: "a\0b"`, "runtimeConfig.command: must not contain a NUL byte"},
		{"args scalar", "command: x\nargs: a b", "runtimeConfig.args: expected a list of strings"},
		{"args item list", "command: x\nargs: [a, [b]]", "runtimeConfig.args[1]: expected a string"},
		{"args item null", "command: x\nargs: [a, b, ~]", "runtimeConfig.args[2]: expected a string"},
		{"args item mapping", "command: x\nargs: [{a: b}]", "runtimeConfig.args[0]: expected a string"},
		{"env list", "command: x\nenv: [A]", "runtimeConfig.env: expected a mapping of names to strings"},
		{"env value list", "command: x\nenv: {A: [b]}", "runtimeConfig.env.A: expected a string"},
		{"env value null", "command: x\nenv: {A: }", "runtimeConfig.env.A: expected a string"},
		{"env name with =", "command: x\nenv: {'A=B': c}", "runtimeConfig.env.A=B: a variable name must not contain '=' or a NUL byte"},
		{"env name empty", "command: x\nenv: {'': c}", "runtimeConfig.env: a variable name must not be empty"},
		{"env name not a string", "command: x\nenv: {[a]: c}", "runtimeConfig.env: names must be strings"},
		{"env duplicate", "command: x\nenv: {A: b, A: c}", "runtimeConfig.env.A: duplicate key"},
		{"workingDir relative", "command: x\nworkingDir: tmp", `runtimeConfig.workingDir: must be an absolute path, got "tmp"`},
		{"workingDir list", "command: x\nworkingDir: [/]", "runtimeConfig.workingDir: expected a string"},
		{"unknown key", "command: x\nimage: alpine", "runtimeConfig.image: unknown key (expected command, args, env, workingDir or user)"},
		{"user empty", "command: x\nuser: ''", "runtimeConfig.user: must not be empty (leave the key out for a uid of the workload's own)"},
		{"user list", "command: x\nuser: [a]", "runtimeConfig.user: expected a string"},
		{"user odd name", "command: x\nuser: 'a b'", `runtimeConfig.user: "a b" is neither a uid nor a user name ([a-zA-Z_][a-zA-Z0-9._-]*)`},
		{"user negative", "command: x\nuser: -1", `runtimeConfig.user: "-1" is neither a uid nor a user name ([a-zA-Z_][a-zA-Z0-9._-]*)`},
		{"user uid -1", "command: x\nuser: 4294967295", "runtimeConfig.user: uid 4294967295 is not a valid user"},
		{"duplicate key", "command: x\ncommand: y", "runtimeConfig.command: duplicate key"},
		{"key not a string", "command: x\n[a]: b", "runtimeConfig: keys must be strings"},
	}
	rt := &Runtime{}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := rt.Check(tt.in)
			if err == nil {
				t.Fatal("accepted")
			}
			if !errors.Is(err, runtime.ErrBadConfig) {
				t.Fatalf("%v does not wrap ErrBadConfig", err)
			}
			var ce *ConfigError
			if !errors.As(err, &ce) {
				t.Fatalf("%v is not a *ConfigError", err)
			}
			if tt.want == "" {
				if ce.Field != "runtimeConfig" {
					t.Fatalf("field %q, want runtimeConfig", ce.Field)
				}
				return
			}
			if err.Error() != tt.want {
				t.Fatalf("error %q, want %q", err, tt.want)
			}
		})
	}
}

// FuzzParseConfig: any text is parsed or refused with a *ConfigError,
// never a panic; what is accepted has a command.
func FuzzParseConfig(f *testing.F) {
	for _, seed := range []string{
		"command: sleep", "command: x\nargs: [a, 1]\nenv: {A: b}\nworkingDir: /tmp\nuser: nobody",
		"command: x\nuser: 0", "command: x\nuser: 4294967295", "command: x\nuser: ''", "command: x\nuser: [a]",
		"- a", "~", "command: &a x\nargs: [*a]",
	} {
		f.Add(seed)
	}
	f.Fuzz(func(t *testing.T, in string) {
		c, err := parseConfig(in)
		if err != nil {
			var ce *ConfigError
			if !errors.As(err, &ce) {
				t.Fatalf("%q: %v is not a *ConfigError", in, err)
			}
			return
		}
		if c.Command == "" {
			t.Fatalf("%q: accepted without a command", in)
		}
	})
}
