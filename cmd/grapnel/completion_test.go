package main

import (
	"bytes"
	"context"
	"errors"
	"io"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/spf13/cobra"

	"github.com/grapnel-io/grapnel/agent"
	"github.com/grapnel-io/grapnel/internal/testwait"
	"github.com/grapnel-io/grapnel/rpc"
	"github.com/grapnel-io/grapnel/rpc/client"
	"github.com/grapnel-io/grapnel/server/testcluster"
)

// envTestAsCLI makes this test binary run as grapnel (TestMain), so that
// bash can call it as the completion does.
const envTestAsCLI = "GRAPNEL_TEST_AS_CLI"

// bashCompletions sources `COMPLETE=bash grapnel` in a real bash, with
// this test binary as grapnel on PATH, and asks it for the completions of
// each line (the cursor at its end) the way bash's programmable
// completion calls the function: COMP_LINE, COMP_POINT, COMP_WORDS,
// COMP_CWORD. It returns each line's COMPREPLY.
func bashCompletions(t *testing.T, env []string, lines ...string) map[string][]string {
	t.Helper()
	bash, err := exec.LookPath("bash")
	if err != nil {
		t.Fatalf("the completion test needs bash: %v", err)
	}
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	if err := os.Symlink(self, filepath.Join(dir, "grapnel")); err != nil {
		t.Fatal(err)
	}
	script := `set -u
source <(COMPLETE=bash grapnel) || exit 3
complete -p grapnel >/dev/null || exit 4
comp() {
    COMP_LINE=$1 COMP_POINT=${#1}
    read -ra COMP_WORDS <<<"$1"
    [[ $1 == *" " ]] && COMP_WORDS+=("")
    COMP_CWORD=$(( ${#COMP_WORDS[@]} - 1 ))
    COMPREPLY=()
    _grapnel_complete
    printf '== %s\n' "$1"
    [[ ${#COMPREPLY[@]} -eq 0 ]] || printf '%s\n' "${COMPREPLY[@]}"
}
`
	for _, l := range lines {
		script += "comp " + shellQuote(l) + "\n"
	}
	cmd := exec.Command(bash, "--norc", "--noprofile", "-c", script)
	cmd.Env = append(os.Environ(), "PATH="+dir+string(os.PathListSeparator)+os.Getenv("PATH"), envTestAsCLI+"=1",
		"HOME="+dir, envInsecure+"=true")
	cmd.Env = append(cmd.Env, env...)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("bash: %v\nstdout:\n%s\nstderr:\n%s", err, out, stderr.String())
	}
	got := map[string][]string{}
	cur := ""
	for _, l := range strings.Split(strings.TrimRight(string(out), "\n"), "\n") {
		if rest, ok := strings.CutPrefix(l, "== "); ok {
			cur = rest
			got[cur] = []string{}
			continue
		}
		got[cur] = append(got[cur], l)
	}
	return got
}

// Issue 31 point 7: `source <(COMPLETE=bash grapnel)` works as ank's
// documented completion does: it registers a completion in plain bash
// (no bash-completion package) that completes commands, flags, flag
// values, names and field masks. On main it printed the help text, a
// bash syntax error. No server answers here: the masks are the static
// ones.
func TestCompleteEnvBash(t *testing.T) {
	got := bashCompletions(t, []string{envServerURL + "=127.0.0.1:1"},
		"grapnel ",
		"grapnel get wo",
		"grapnel get workloads --wa",
		"grapnel get workloads -o ",
		"grapnel get agents --output=j",
		"grapnel get state -o=",
		"grapnel get state ",
		"grapnel get state work",
		"grapnel get state desiredState.w",
		"grapnel get state desiredState.workloads.",
		"grapnel -k -s 127.0.0.1:1 get ev",
		"grapnel logs --f",
		"grapnel cluster upgrade ",
	)
	contains := func(line string, want ...string) {
		t.Helper()
		for _, w := range want {
			found := false
			for _, c := range got[line] {
				found = found || c == w
			}
			if !found {
				t.Errorf("%q: completions %q lack %q", line, got[line], w)
			}
		}
	}
	exactly := func(line string, want ...string) {
		t.Helper()
		if want == nil {
			want = []string{}
		}
		if !reflect.DeepEqual(got[line], want) {
			t.Errorf("%q: completions %q, want %q", line, got[line], want)
		}
	}
	contains("grapnel ", "get", "apply", "delete", "logs", "run", "set", "cluster")
	exactly("grapnel get wo", "workloads")
	exactly("grapnel get workloads --wa", "--watch")
	exactly("grapnel get workloads -o ", "table", "json", "yaml")
	// readline replaces only what follows the '=' (a word break).
	exactly("grapnel get agents --output=j", "json")
	exactly("grapnel get state -o=", "yaml", "json")
	exactly("grapnel get state ", "desiredState", "workloadStates", "agents")
	exactly("grapnel get state work", "workloadStates")
	exactly("grapnel get state desiredState.w", "desiredState.workloads")
	exactly("grapnel get state desiredState.workloads.")
	exactly("grapnel -k -s 127.0.0.1:1 get ev", "events")
	exactly("grapnel logs --f", "--follow")
	contains("grapnel cluster upgrade ", "status", "finalize")
}

// With a cluster that answers, field masks complete below the static
// parts from its state (workload names, config keys, agents), and so do
// the names commands and flags take.
func TestCompleteEnvBashMasksFromTheCluster(t *testing.T) {
	cl := testcluster.New(t, 1)
	dir := t.TempDir()
	manifest := filepath.Join(dir, "m.yaml")
	if err := os.WriteFile(manifest, []byte(`apiVersion: v1
workloads:
  web: {agent: agent_A, runtime: podman, runtimeConfig: "image: nginx"}
  worker: {agent: agent_A, runtime: podman, runtimeConfig: "image: w"}
configs:
  site: s
`), 0o600); err != nil {
		t.Fatal(err)
	}
	if code, _, stderr := cliRun(cl, "--no-wait", "apply", manifest); code != exitOK {
		t.Fatalf("apply: %d %s", code, stderr)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() {
		done <- agent.Run(ctx, agent.Config{
			Name: "agent_A", Servers: cl.Addrs(), Insecure: true, RunFolder: t.TempDir(),
			Runtimes: []string{agent.RuntimeProcess}, Logger: slog.New(slog.NewTextHandler(io.Discard, nil)),
		})
	}()
	t.Cleanup(func() {
		cancel()
		select {
		case <-done:
		case <-time.After(15 * time.Second):
			t.Error("the agent did not stop")
		}
	})
	testwait.For(t, 20*time.Second, func() bool {
		_, out, _ := cliRun(cl, "get", "agents")
		return strings.Contains(out, "agent_A")
	}, "agent_A to connect")
	got := bashCompletions(t, []string{envServerURL + "=" + strings.Join(cl.Addrs(), ",")},
		"grapnel get state desiredState.workloads.",
		"grapnel get state desiredState.workloads.wo",
		"grapnel get events desiredState.configs.",
		"grapnel logs w",
		"grapnel get workloads -a ",
		"grapnel agent resync ",
		"grapnel agent resync agent_A ",
		"grapnel get state agents.",
	)
	for line, want := range map[string][]string{
		"grapnel get state desiredState.workloads.":   {"desiredState.workloads.web", "desiredState.workloads.worker"},
		"grapnel get state desiredState.workloads.wo": {"desiredState.workloads.worker"},
		"grapnel get events desiredState.configs.":    {"desiredState.configs.site"},
		"grapnel logs w":                {"web", "worker"},
		"grapnel get workloads -a ":     {"agent_A"},
		"grapnel agent resync ":         {"agent_A"},
		"grapnel agent resync agent_A ": {},
		"grapnel get state agents.":     {"agents.agent_A"},
	} {
		if !reflect.DeepEqual(got[line], want) {
			t.Errorf("%q: completions %q, want %q", line, got[line], want)
		}
	}
}

// The answer to one request names the options bash sets: no space after
// a mask that goes on, file names where cobra would offer them.
func TestCompleteBashRequestOptions(t *testing.T) {
	for _, tc := range []struct {
		line string
		want string
	}{
		{"grapnel get state desiredS", "nospace\ndesiredState\n"},
		{"grapnel apply ", "files\n"},
		{"grapnel get workloads --state=Run", "\nRunning\n"},
		{"grapnel -s 127.0.0.1:", "files\n"},
		// set state: masks, and file names where no mask fits.
		{"grapnel set state desiredState.c", "nospace\ndesiredState.configs\n"},
		{"grapnel set state desiredState.configs ma", "files\n"},
	} {
		var out bytes.Buffer
		a := newApp(func(k string) string { return map[string]string{envInsecure: "true", envServerURL: "127.0.0.1:1"}[k] }, strings.NewReader(""), &out, &bytes.Buffer{})
		a.systemAnkConfig = filepath.Join(t.TempDir(), "absent.conf")
		a.dial = func(context.Context, client.Options) (conn, error) { return nil, errStop }
		if code := a.completeBashRequest(context.Background(), tc.line, ""); code != exitOK {
			t.Fatalf("%q: exit %d", tc.line, code)
		}
		if out.String() != tc.want {
			t.Errorf("%q: answer %q, want %q", tc.line, out.String(), tc.want)
		}
	}
}

// COMPLETE=zsh, fish and powershell print cobra's scripts for grapnel;
// another shell is refused by name; COMPLETE empty or 0 is off, as in
// clap, and with other arguments the command runs as usual.
func TestCompleteEnvShells(t *testing.T) {
	for shell, want := range map[string]string{
		"zsh":        "compdef _grapnel grapnel",
		"fish":       "complete -c grapnel ",
		"powershell": "Register-ArgumentCompleter",
		"bash":       "complete -o nosort -F _grapnel_complete grapnel",
	} {
		var out, errOut bytes.Buffer
		a := newApp(func(k string) string { return map[string]string{envComplete: shell}[k] }, strings.NewReader(""), &out, &errOut)
		code, done := completeEnv(context.Background(), "grapnel", nil, a)
		if !done || code != exitOK || !strings.Contains(out.String(), want) {
			t.Errorf("COMPLETE=%s: done %v, exit %d, script lacks %q:\n%.300s\n%s", shell, done, code, want, out.String(), errOut.String())
		}
	}
	var out, errOut bytes.Buffer
	a := newApp(func(k string) string { return map[string]string{envComplete: "elvish"}[k] }, strings.NewReader(""), &out, &errOut)
	if code, done := completeEnv(context.Background(), "grapnel", nil, a); !done || code != exitError || !strings.Contains(errOut.String(), `COMPLETE="elvish": grapnel completes bash, zsh, fish or powershell`) {
		t.Errorf("COMPLETE=elvish: done %v, exit %d, stderr %q", done, code, errOut.String())
	}
	for _, tc := range []struct {
		value string
		args  []string
	}{{"", nil}, {"0", nil}, {"bash", []string{"get", "state"}}} {
		a := newApp(func(k string) string { return map[string]string{envComplete: tc.value}[k] }, strings.NewReader(""), &out, &errOut)
		if _, done := completeEnv(context.Background(), "grapnel", tc.args, a); done {
			t.Errorf("COMPLETE=%q with %q was taken as a completion request", tc.value, tc.args)
		}
	}
}

// In process, the masks below the static parts come from the state the
// server answers; without a server only the static ones are offered.
func TestCompleteMasks(t *testing.T) {
	cs, err := rpc.CompleteStateFromTree(map[string]any{
		"desiredState": map[string]any{"workloads": map[string]any{
			"web": map[string]any{"agent": "agent_A", "runtime": "podman", "runtimeConfig": "x"},
		}},
		"agents": map[string]any{"agent_A": map[string]any{}},
	})
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		prefix string
		dial   bool
		want   []string
	}{
		{"", false, []string{"desiredState", "workloadStates", "agents"}},
		{"desiredState.", false, []string{"desiredState.apiVersion", "desiredState.workloads", "desiredState.configs"}},
		{"desiredState.workloads.", false, nil},
		{"desiredState.workloads.", true, []string{"desiredState.workloads.web"}},
		{"desiredState.workloads.web.ag", true, []string{"desiredState.workloads.web.agent"}},
		{"agents.", true, []string{"agents.agent_A"}},
	} {
		var out bytes.Buffer
		a := newApp(func(string) string { return "" }, strings.NewReader(""), &out, &bytes.Buffer{})
		a.systemAnkConfig = filepath.Join(t.TempDir(), "absent.conf")
		a.dial = func(context.Context, client.Options) (conn, error) {
			if !tc.dial {
				return nil, errors.New("connection refused")
			}
			return stateConn{cs}, nil
		}
		if code := run(context.Background(), []string{"-k", "__complete", "get", "state", tc.prefix}, a); code != exitOK {
			t.Fatalf("%q: exit code %d", tc.prefix, code)
		}
		lines := strings.Split(strings.TrimSpace(out.String()), "\n")
		got := lines[:len(lines)-1]
		if len(got) == 0 {
			got = nil
		}
		if !reflect.DeepEqual(got, tc.want) {
			t.Errorf("%q (server %v): offered %q, want %q", tc.prefix, tc.dial, got, tc.want)
		}
	}
}

// Issue 31 point 7: after get workloads or logs, -s is the command's own
// flag (--state, --since), as in ank; a value there that looks like a
// server address gets a warning that says where the server flag goes.
func TestLocalSThatLooksLikeAServerWarns(t *testing.T) {
	for _, tc := range []struct {
		args []string
		warn string
	}{
		{[]string{"-k", "get", "workloads", "-s", "127.0.0.1:25551"}, `after "get workloads", -s is --state, and "127.0.0.1:25551" looks like a server address: give the server before the subcommand (grapnel -s 127.0.0.1:25551 get workloads ...) or as --server-url 127.0.0.1:25551`},
		{[]string{"-k", "logs", "web", "-s", "s1:25551,s2:25551"}, `after "logs", -s is --since, and "s1:25551,s2:25551" looks like a server address`},
		{[]string{"-k", "get", "workloads", "-s", "running"}, ""},
		{[]string{"-k", "logs", "web", "-s", "2026-01-01T10:00:00+01:00"}, ""},
		{[]string{"-k", "-s", "127.0.0.1:25551", "get", "workloads"}, ""},
	} {
		inv := invoke(t, nil, tc.args...)
		if tc.warn == "" {
			if strings.Contains(inv.stderr, "warning") {
				t.Errorf("%q: stderr %q, want no warning", tc.args, inv.stderr)
			}
			continue
		}
		if !strings.Contains(inv.stderr, "warning: "+tc.warn) {
			t.Errorf("%q: stderr %q, want the warning %q", tc.args, inv.stderr, tc.warn)
		}
		if inv.dialed == nil {
			t.Errorf("%q: a warning, not a refusal: the command should still run", tc.args)
		}
	}
}

// get workloads -o json goes with a listing, not with --watch.
func TestGetWorkloadsOutputFlag(t *testing.T) {
	inv := invoke(t, nil, "-k", "get", "workloads", "-o", "json")
	if inv.dialed == nil || inv.app.workloadsOutput != "json" {
		t.Fatalf("-o json: dialed %v, output %q, stderr %q", inv.dialed != nil, inv.app.workloadsOutput, inv.stderr)
	}
	inv = invoke(t, nil, "-k", "get", "workloads", "-w", "-o", "json")
	if inv.dialed != nil || !strings.Contains(inv.stderr, "-o json goes with a listing, not with --watch") {
		t.Fatalf("-w -o json: dialed %v, stderr %q", inv.dialed != nil, inv.stderr)
	}
	if inv = invoke(t, nil, "-k", "get", "workloads", "-w", "-o", "table"); inv.dialed == nil {
		t.Fatalf("-w -o table: stderr %q", inv.stderr)
	}
	for _, cmd := range []string{"workloads", "agents", "configs"} {
		inv = invoke(t, nil, "-k", "get", cmd, "-o", "xml")
		if inv.dialed != nil || !strings.Contains(inv.stderr, `-o "xml": use table, json or yaml`) {
			t.Errorf("get %s -o xml: dialed %v, stderr %q; want a refusal before connecting", cmd, inv.dialed != nil, inv.stderr)
		}
	}
	inv = invoke(t, nil, "-k", "get", "configs", "-o", "yaml")
	if inv.dialed == nil || inv.app.configsOutput != "yaml" {
		t.Fatalf("configs -o yaml: dialed %v, stderr %q", inv.dialed != nil, inv.stderr)
	}
}

// Every -o completes the formats its usage names.
func TestEveryOutputFlagCompletes(t *testing.T) {
	root := newRoot(newApp(func(string) string { return "" }, strings.NewReader(""), &bytes.Buffer{}, &bytes.Buffer{}))
	seen := 0
	var walk func(*cobra.Command)
	walk = func(c *cobra.Command) {
		for _, sub := range c.Commands() {
			walk(sub)
		}
		if c.Flags().Lookup("output") == nil {
			return
		}
		seen++
		fn, ok := c.GetFlagCompletionFunc("output")
		if !ok {
			t.Errorf("%s: -o does not complete", c.CommandPath())
			return
		}
		got, _ := fn(c, nil, "")
		if len(got) < 2 {
			t.Errorf("%s: -o completes %q", c.CommandPath(), got)
		}
		for _, g := range got {
			if g == "" || strings.ContainsAny(g, " ():") || !strings.Contains(c.Flags().Lookup("output").Usage, g) {
				t.Errorf("%s: -o completes %q, not a format of %q", c.CommandPath(), g, c.Flags().Lookup("output").Usage)
			}
		}
	}
	walk(root)
	if seen < 10 {
		t.Errorf("only %d commands with -o", seen)
	}
	if got := outputFormats("output format of --dry-run: table, yaml or json"); !reflect.DeepEqual(got, []string{"table", "yaml", "json"}) {
		t.Errorf("plan -o: %q", got)
	}
	if got := outputFormats("output format: table (a diff), json or yaml"); !reflect.DeepEqual(got, []string{"table", "json", "yaml"}) {
		t.Errorf("history show -o: %q", got)
	}
}
