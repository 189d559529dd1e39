package main

import (
	"bytes"
	"context"
	"path/filepath"
	"strings"
	"testing"

	"github.com/grapnel-io/grapnel/rpc"
	"github.com/grapnel-io/grapnel/rpc/client"
)

// get graph takes its own -o (default dot), narrows to the workloads
// given, and leaves the -o default of get state and get events alone.
func TestGetGraphCommand(t *testing.T) {
	cs, err := rpc.CompleteStateFromTree(map[string]any{"desiredState": map[string]any{
		"workloads": map[string]any{
			"web": map[string]any{"agent": "a", "runtime": "podman", "runtimeConfig": "x", "dependencies": map[string]any{"db": "ADD_COND_RUNNING"}},
			"db":  map[string]any{"agent": "a", "runtime": "podman", "runtimeConfig": "z"},
			"etc": map[string]any{"agent": "b", "runtime": "podman", "runtimeConfig": "y"},
		},
	}})
	if err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		args []string
		code int
		want string
		not  string
	}{
		{args: []string{"-k", "get", "graph"}, want: `"web" -> "db" [label="running"]`},
		{args: []string{"-k", "get", "graph", "-o", "svg"}, want: `<g class="node" data-workload="web"`},
		{args: []string{"-k", "get", "graph", "-o", "json", "web"}, want: `"name": "db"`, not: `"name": "etc"`},
		{args: []string{"-k", "get", "graph", "-o", "png"}, code: exitError, want: "use dot, svg or json"},
		{args: []string{"-k", "get", "graph", "--graphviz"}, code: exitError, want: "--graphviz draws SVG: use it with -o svg"},
		{args: []string{"-k", "get", "state"}, want: "desiredState:\n"},
	}
	for _, tt := range tests {
		var out, errOut bytes.Buffer
		a := newApp(func(string) string { return "" }, strings.NewReader(""), &out, &errOut)
		a.systemAnkConfig = filepath.Join(t.TempDir(), "absent.conf")
		a.systemCLIConfig = filepath.Join(t.TempDir(), "absent-cli.yaml")
		a.dial = func(context.Context, client.Options) (conn, error) { return stateConn{cs}, nil }
		if code := run(context.Background(), tt.args, a); code != tt.code {
			t.Errorf("%v: exit code %d, want %d; stderr %s", tt.args, code, tt.code, errOut.String())
			continue
		}
		got := out.String() + errOut.String()
		if !strings.Contains(got, tt.want) {
			t.Errorf("%v: output lacks %q:\n%s", tt.args, tt.want, got)
		}
		if tt.not != "" && strings.Contains(got, tt.not) {
			t.Errorf("%v: output has %q:\n%s", tt.args, tt.not, got)
		}
	}
}
