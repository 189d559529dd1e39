package main

import (
	"strings"
	"testing"
)

// `get problems` exists under get, takes -o table|yaml|json and no
// arguments; a bad -o is refused before any call.
func TestGetProblemsCommand(t *testing.T) {
	for _, tt := range []struct {
		args []string
		want string
	}{
		{[]string{"-k", "get", "problems", "-o", "xml"}, `-o "xml": use table, json or yaml`},
		{[]string{"-k", "get", "problems", "extra"}, `unknown command "extra"`},
	} {
		inv := invoke(t, nil, tt.args...)
		if inv.code != exitError || !strings.Contains(inv.stderr, tt.want) {
			t.Errorf("%v: exit %d, stderr %q; want an error with %q", tt.args, inv.code, inv.stderr, tt.want)
		}
	}
	inv := invoke(t, nil, "get", "--help")
	if !strings.Contains(inv.stdout, "problems") {
		t.Fatalf("get --help does not list problems:\n%s", inv.stdout)
	}
}
