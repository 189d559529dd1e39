package podman

import (
	"errors"
	"reflect"
	"strings"
	"testing"

	"github.com/grapnel-io/grapnel/agent/runtime"
)

// The Ankaios podman runtimeConfig: generalOptions, image, commandOptions,
// commandArgs (swdd~podman-create-workload-runs-workload~1).
func TestCheck(t *testing.T) {
	r := &Runtime{}
	tests := []struct {
		name    string
		config  string
		want    runConfig
		wantErr string // the whole error text; "" means valid
	}{
		{
			name: "all fields",
			config: "generalOptions: [--log-level=warn]\n" +
				"image: localhost/grapnel-busybox:latest\n" +
				"commandOptions: [\"--env=A=1\", --network=host]\n" +
				"commandArgs: [sleep, \"1000\"]\n",
			want: runConfig{
				GeneralOptions: []string{"--log-level=warn"},
				Image:          "localhost/grapnel-busybox:latest",
				CommandOptions: []string{"--env=A=1", "--network=host"},
				CommandArgs:    []string{"sleep", "1000"},
			},
		},
		{
			name:   "image only",
			config: "image: docker.io/library/nginx",
			want:   runConfig{Image: "docker.io/library/nginx"},
		},
		{
			name:   "numbers and booleans kept as written",
			config: "image: img\ncommandArgs: [sleep, 5, true, 1.50]",
			want:   runConfig{Image: "img", CommandArgs: []string{"sleep", "5", "true", "1.50"}},
		},
		{
			name:   "block lists and empty lists",
			config: "image: img\ngeneralOptions:\ncommandOptions: []\ncommandArgs:\n  - sh\n  - -c\n  - echo hi\n",
			want:   runConfig{Image: "img", CommandOptions: []string{}, CommandArgs: []string{"sh", "-c", "echo hi"}},
		},
		{
			name:   "aliases resolved",
			config: "image: img\ncommandOptions: &o [--rm]\ngeneralOptions: *o",
			want:   runConfig{Image: "img", GeneralOptions: []string{"--rm"}, CommandOptions: []string{"--rm"}},
		},
		{name: "empty", config: "", wantErr: "runtimeConfig.image: required"},
		{name: "only a comment", config: "# nothing\n", wantErr: "runtimeConfig.image: required"},
		{name: "image missing", config: "commandArgs: [sh]", wantErr: "runtimeConfig.image: required"},
		{name: "image null", config: "image: ~", wantErr: "runtimeConfig.image: required"},
		{name: "image blank", config: "image: '  '", wantErr: "runtimeConfig.image: required"},
		{name: "image a list", config: "image: [a]", wantErr: "runtimeConfig.image: expected a string"},
		{name: "image an option", config: "image: --privileged", wantErr: "runtimeConfig.image: must not start with '-'"},
		{name: "image with a space", config: "image: 'a b'", wantErr: "runtimeConfig.image: must not contain whitespace"},
		{
			name:    "unknown field",
			config:  "image: img\ncommandArg: [sh]",
			wantErr: "runtimeConfig.commandArg: unknown field (expected generalOptions, image, commandOptions or commandArgs)",
		},
		{
			name:    "process runtime's field",
			config:  "image: img\ncommand: sh",
			wantErr: "runtimeConfig.command: unknown field (expected generalOptions, image, commandOptions or commandArgs)",
		},
		{name: "repeated field", config: "image: a\nimage: b", wantErr: "runtimeConfig.image: defined more than once"},
		{name: "list a string", config: "image: img\ngeneralOptions: --rm", wantErr: "runtimeConfig.generalOptions: expected a list of strings"},
		{name: "list a mapping", config: "image: img\ncommandOptions: {a: b}", wantErr: "runtimeConfig.commandOptions: expected a list of strings"},
		{name: "item a mapping", config: "image: img\ncommandArgs: [sh, {a: b}]", wantErr: "runtimeConfig.commandArgs[1]: expected a string"},
		{name: "item a list", config: "image: img\ncommandOptions: [[x]]", wantErr: "runtimeConfig.commandOptions[0]: expected a string"},
		{name: "item null", config: "image: img\ngeneralOptions: [a, ~]", wantErr: "runtimeConfig.generalOptions[1]: expected a string"},
		{
			name:    "not a mapping",
			config:  "- image: img",
			wantErr: "runtimeConfig: expected a mapping with the keys generalOptions, image, commandOptions and commandArgs",
		},
		{
			name:    "a scalar",
			config:  "sleep 5",
			wantErr: "runtimeConfig: expected a mapping with the keys generalOptions, image, commandOptions and commandArgs",
		},
		{name: "mapping key", config: "? [a]\n: b\nimage: img", wantErr: "runtimeConfig: keys must be strings (line 1)"},
		{name: "not YAML", config: "image: [unclosed", wantErr: "runtimeConfig: not valid YAML: "},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := parseConfig(tt.config)
			checkErr := r.Check(tt.config)
			if (err == nil) != (checkErr == nil) {
				t.Fatalf("parseConfig error %v, Check error %v", err, checkErr)
			}
			if tt.wantErr == "" {
				if err != nil {
					t.Fatalf("unexpected error: %v", err)
				}
				if !reflect.DeepEqual(got, tt.want) {
					t.Fatalf("got %#v, want %#v", got, tt.want)
				}
				return
			}
			if err == nil {
				t.Fatalf("no error, want %q", tt.wantErr)
			}
			if !errors.Is(err, runtime.ErrBadConfig) {
				t.Errorf("error %v does not wrap runtime.ErrBadConfig", err)
			}
			if strings.HasSuffix(tt.wantErr, ": ") {
				if !strings.HasPrefix(err.Error(), tt.wantErr) {
					t.Errorf("error %q, want prefix %q", err, tt.wantErr)
				}
			} else if err.Error() != tt.wantErr {
				t.Errorf("error %q, want %q", err, tt.wantErr)
			}
		})
	}
}

func TestName(t *testing.T) {
	if got := (&Runtime{}).Name(); got != "podman" {
		t.Fatalf("Name() = %q, want podman", got)
	}
}

func TestNewMissingBinary(t *testing.T) {
	if _, err := New(Config{Binary: "/nonexistent/podman"}); err == nil {
		t.Fatal("New with a missing binary: no error")
	}
	if Available("/nonexistent/podman") {
		t.Fatal("Available with a missing binary: true")
	}
}
