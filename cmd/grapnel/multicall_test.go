package main

import (
	"slices"
	"testing"
)

// The multi-call binary picks its program by the name it was started
// under, else by the first argument; the CLI's own `agent` verbs stay the
// CLI's.
func TestProgramByNameAndSubcommand(t *testing.T) {
	cases := []struct {
		argv0    string
		args     []string
		want     string
		wantArgs []string
	}{
		{"/usr/bin/grapnel-server", []string{"--insecure", "agent"}, progServer, []string{"--insecure", "agent"}},
		{"grapnel-agent", []string{"--name", "a"}, progAgent, []string{"--name", "a"}},
		{"/opt/x/grapnel-process-shim", []string{"grapnel-process-shim", "id"}, progShim, []string{"grapnel-process-shim", "id"}},
		{"/usr/bin/grapnel", []string{"server", "--insecure"}, progServer, []string{"--insecure"}},
		{"grapnel", []string{"agent", "--name", "a", "--insecure"}, progAgent, []string{"--name", "a", "--insecure"}},
		{"grapnel", []string{"agent"}, progAgent, []string{}},
		{"grapnel", []string{"shim"}, progShim, []string{}},
		// The operator's verbs on an agent.
		{"grapnel", []string{"agent", "resync", "a"}, progCLI, []string{"agent", "resync", "a"}},
		{"grapnel", []string{"agent", "maintenance", "a"}, progCLI, []string{"agent", "maintenance", "a"}},
		{"grapnel", []string{"help", "agent"}, progCLI, []string{"help", "agent"}},
		{"grapnel", []string{"agent", "--help"}, progAgent, []string{"--help"}},
		{"grapnel", []string{"-k", "agent", "resync", "a"}, progCLI, []string{"-k", "agent", "resync", "a"}},
		{"grapnel", []string{"get", "state"}, progCLI, []string{"get", "state"}},
		{"grapnel", nil, progCLI, nil},
		// Another name (a copy renamed, say) is the CLI.
		{"/usr/local/bin/gr", []string{"server"}, progServer, []string{}},
		{"/usr/local/bin/gr", []string{"get"}, progCLI, []string{"get"}},
	}
	for _, c := range cases {
		got, gotArgs := program(c.argv0, c.args)
		if got != c.want || !slices.Equal(gotArgs, c.wantArgs) {
			t.Errorf("program(%q, %q) = %q, %q; want %q, %q", c.argv0, c.args, got, gotArgs, c.want, c.wantArgs)
		}
	}
}
