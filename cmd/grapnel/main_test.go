package main

import (
	"bytes"
	"context"
	"errors"
	"os/user"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/grapnel-io/grapnel/rpc"
	"github.com/grapnel-io/grapnel/rpc/ankbase"
	"github.com/grapnel-io/grapnel/rpc/client"
)

var errStop = errors.New("stop here")

type invocation struct {
	app    *app
	code   int
	stdout string
	stderr string
	dialed *client.Options
}

// invoke runs a command line whose connection attempt is intercepted, so
// the test sees what the flags and environment turned into.
func invoke(t *testing.T, env map[string]string, args ...string) invocation {
	t.Helper()
	return invokeSys(t, env, filepath.Join(t.TempDir(), "absent.conf"), args...)
}

// invokeSys is invoke with system as /etc/ankaios/ank.conf.
func invokeSys(t *testing.T, env map[string]string, system string, args ...string) invocation {
	t.Helper()
	var out, errOut bytes.Buffer
	a := newApp(func(k string) string { return env[k] }, strings.NewReader(""), &out, &errOut)
	a.systemAnkConfig = system
	a.systemCLIConfig = filepath.Join(t.TempDir(), "absent-cli.yaml")
	inv := invocation{app: a}
	a.dial = func(_ context.Context, o client.Options) (conn, error) {
		inv.dialed = &o
		return nil, errStop
	}
	inv.code = run(context.Background(), args, a)
	inv.stdout, inv.stderr = out.String(), errOut.String()
	return inv
}

func TestGlobalOptions(t *testing.T) {
	tests := []struct {
		name      string
		env       map[string]string
		args      []string
		wantAddrs []string
		insecure  bool
		tls       rpc.TLSFiles
		timeout   time.Duration
		wantErr   string // on stderr; empty: the dial was reached
	}{
		{
			name:      "defaults need -k",
			args:      []string{"-k", "get", "state"},
			wantAddrs: []string{"127.0.0.1:25551"},
			insecure:  true,
			timeout:   3 * time.Second,
		},
		{
			name:    "without -k and PEMs the CLI refuses",
			args:    []string{"get", "state"},
			wantErr: "error: missing certificate files: pass --ca_pem, --crt_pem and --key_pem",
		},
		{
			name:      "server list with schemes, PEM files and timeout from flags",
			args:      []string{"get", "agents", "-s", "https://a:1,b:2", "--ca_pem", "ca.pem", "--crt_pem", "crt.pem", "--key_pem", "key.pem", "--response-timeout", "500"},
			wantAddrs: []string{"a:1", "b:2"},
			tls:       rpc.TLSFiles{CA: "ca.pem", Cert: "crt.pem", Key: "key.pem"},
			timeout:   500 * time.Millisecond,
		},
		{
			name:      "environment presets",
			env:       map[string]string{envServerURL: "http://e:9", envInsecure: "true"},
			args:      []string{"get", "configs"},
			wantAddrs: []string{"e:9"},
			insecure:  true,
			timeout:   3 * time.Second,
		},
		{
			name:      "PEM files from the environment",
			env:       map[string]string{envCAPem: "c", envCrtPem: "r", envKeyPem: "k"},
			args:      []string{"get", "configs"},
			wantAddrs: []string{"127.0.0.1:25551"},
			tls:       rpc.TLSFiles{CA: "c", Cert: "r", Key: "k"},
			timeout:   3 * time.Second,
		},
		{
			name:      "flags beat the environment",
			env:       map[string]string{envServerURL: "e:9"},
			args:      []string{"--server-url", "f:8", "-k", "get", "configs"},
			wantAddrs: []string{"f:8"},
			insecure:  true,
			timeout:   3 * time.Second,
		},
		{
			name:    "malformed boolean in the environment",
			env:     map[string]string{envInsecure: "maybe"},
			args:    []string{"get", "configs"},
			wantErr: "error: GRAPNEL_INSECURE: 'maybe' is not a boolean",
		},
		{
			name:    "bad timeout",
			args:    []string{"-k", "--response-timeout", "0", "get", "configs"},
			wantErr: "error: --response-timeout must be a positive number",
		},
		{
			name:    "bad server url",
			args:    []string{"-k", "-s", "nohost", "get", "configs"},
			wantErr: "error: server url 'nohost' is not of the form host:port",
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			inv := invoke(t, tt.env, tt.args...)
			if inv.code != exitError {
				t.Fatalf("exit code %d, want %d", inv.code, exitError)
			}
			if tt.wantErr != "" {
				if !strings.HasPrefix(inv.stderr, tt.wantErr) || strings.Count(inv.stderr, "\n") != 1 {
					t.Fatalf("stderr %q, want one line starting %q", inv.stderr, tt.wantErr)
				}
				if inv.dialed != nil {
					t.Fatal("dialed despite the error")
				}
				return
			}
			if inv.dialed == nil {
				t.Fatalf("never dialed; stderr %q", inv.stderr)
			}
			o := inv.dialed
			if !reflect.DeepEqual(o.Addrs, tt.wantAddrs) || o.Insecure != tt.insecure || o.TLS != tt.tls || o.ResponseTimeout != tt.timeout {
				t.Fatalf("options %+v", *o)
			}
			if inv.stderr != "error: stop here\n" {
				t.Fatalf("stderr %q", inv.stderr)
			}
		})
	}
}

// TestShortSMeansSomethingElseLocally checks the -s clash: ank's logs
// -s/--since and get workloads -s/--state take -s; --server-url still
// works there.
func TestShortSMeansSomethingElseLocally(t *testing.T) {
	tests := []struct {
		name      string
		args      []string
		wantAddrs []string
		check     func(a *app) bool
	}{
		{
			name:      "logs -s is --since",
			args:      []string{"-k", "logs", "web", "-s", "2026-01-01T00:00:00Z", "-u", "2026-01-02T00:00:00Z", "-t", "3", "-f", "-n"},
			wantAddrs: []string{"127.0.0.1:25551"},
			check: func(a *app) bool {
				l := a.logs
				return l.Since == "2026-01-01T00:00:00Z" && l.Until == "2026-01-02T00:00:00Z" && l.Tail == 3 && l.Follow && l.Names && reflect.DeepEqual(l.Workloads, []string{"web"})
			},
		},
		{
			name:      "logs --server-url still works",
			args:      []string{"-k", "logs", "--server-url", "x:1", "web"},
			wantAddrs: []string{"x:1"},
			check:     func(a *app) bool { return a.logs.Since == "" && a.logs.Tail == -1 },
		},
		{
			name:      "get workloads -s is --state",
			args:      []string{"-k", "get", "workloads", "-s", "running", "-a", "agent_A", "web"},
			wantAddrs: []string{"127.0.0.1:25551"},
			check: func(a *app) bool {
				return a.filter.State == "running" && a.filter.Agent == "agent_A" && reflect.DeepEqual(a.filter.Names, []string{"web"})
			},
		},
		{
			name:      "get workload is an alias",
			args:      []string{"-k", "get", "workload", "--server-url", "y:2", "-w"},
			wantAddrs: []string{"y:2"},
			check:     func(a *app) bool { return a.watch },
		},
		{
			name:      "-s elsewhere is the server",
			args:      []string{"-k", "get", "events", "-s", "z:3", "-c", "-o", "json"},
			wantAddrs: []string{"z:3"},
			check:     func(a *app) bool { return a.includeCurrent && a.output == "json" },
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			inv := invoke(t, nil, tt.args...)
			if inv.dialed == nil {
				t.Fatalf("never dialed; stderr %q", inv.stderr)
			}
			if !reflect.DeepEqual(inv.dialed.Addrs, tt.wantAddrs) {
				t.Fatalf("addrs %v, want %v", inv.dialed.Addrs, tt.wantAddrs)
			}
			if !tt.check(inv.app) {
				t.Fatalf("flags parsed wrongly: %+v", inv.app)
			}
		})
	}
}

func TestCommandArguments(t *testing.T) {
	tests := []struct {
		name    string
		args    []string
		dials   bool
		wantErr string
		check   func(a *app) bool
	}{
		{name: "apply --agent is told apart from no --agent", args: []string{"-k", "apply", "--agent", "", "m.yaml"}, dials: true,
			check: func(a *app) bool { return a.applyAgent == "" }},
		{name: "apply -d", args: []string{"-k", "apply", "-d", "-"}, dials: true, check: func(a *app) bool { return a.applyDelete }},
		{name: "apply needs a file", args: []string{"-k", "apply"}, wantErr: "requires at least 1 arg"},
		{name: "apply --dry-run -o yaml", args: []string{"-k", "apply", "--dry-run", "-o", "yaml", "m.yaml"}, dials: true,
			check: func(a *app) bool { return a.dryRun && a.planOutput == "yaml" }},
		{name: "apply --plan-revision", args: []string{"-k", "apply", "--plan-revision", "7", "m.yaml"}, dials: true,
			check: func(a *app) bool { return a.expectSeq == 7 && !a.dryRun }},
		// Its former name stays, hidden, for the scripts that use it.
		{name: "apply --expect-seq", args: []string{"-k", "apply", "--expect-seq", "7", "m.yaml"}, dials: true,
			check: func(a *app) bool { return a.expectSeq == 7 && !a.dryRun }},
		{name: "a dry-run does not expect a revision", args: []string{"-k", "apply", "--dry-run", "--expect-seq", "3", "m.yaml"}, wantErr: "--dry-run and --plan-revision"},
		{name: "the flag and its former name", args: []string{"-k", "apply", "--expect-seq", "3", "--plan-revision", "3", "m.yaml"}, wantErr: "--plan-revision and --expect-seq are one flag"},
		{name: "delete workloads --dry-run", args: []string{"-k", "delete", "workloads", "--dry-run", "-o", "json", "w"}, dials: true,
			check: func(a *app) bool { return a.dryRun && a.planOutput == "json" }},
		{name: "delete workloads --plan-revision", args: []string{"-k", "delete", "workloads", "--plan-revision", "4", "w"}, dials: true,
			check: func(a *app) bool { return a.expectSeq == 4 }},
		{name: "delete workloads --expect-revision", args: []string{"-k", "delete", "workloads", "--expect-revision", "5", "w"}, dials: true,
			check: func(a *app) bool { return a.expectRevision == 5 }},
		{name: "delete configs --dry-run --expect-revision", args: []string{"-k", "delete", "configs", "--dry-run", "--expect-revision", "5", "c"}, wantErr: "--expect-revision goes with neither --dry-run"},
		{name: "-o is for dry-runs", args: []string{"-k", "apply", "-o", "yaml", "m.yaml"}, wantErr: "-o applies to --dry-run only"},
		{name: "bad plan output", args: []string{"-k", "apply", "--dry-run", "-o", "xml", "m.yaml"}, wantErr: `-o "xml": use table, yaml or json`},
		{name: "set state --dry-run", args: []string{"-k", "set", "state", "--dry-run", "desiredState.workloads.w", "f.yaml"}, dials: true,
			check: func(a *app) bool { return a.dryRun && a.planOutput == "table" }},
		{name: "run needs its flags", args: []string{"-k", "run", "workload", "web", "--runtime", "podman"}, wantErr: `required flag(s) "agent", "config" not set`},
		{name: "run with tags", args: []string{"-k", "run", "workload", "web", "--runtime", "podman", "--config", "image: x", "--agent", "a", "--tags", "k=v", "--tags", "x=y"}, dials: true,
			check: func(a *app) bool {
				return reflect.DeepEqual(a.runTags, []string{"k=v", "x=y"}) && a.runSpec.RuntimeConfig == "image: x"
			}},
		{name: "run with a bad tag", args: []string{"-k", "run", "workload", "web", "--runtime", "p", "--config", "c", "--agent", "a", "--tags", "kv"}, wantErr: "tag 'kv' is not of the form key=value"},
		{name: "set state needs a mask and a file", args: []string{"-k", "set", "state", "file.yaml"}, wantErr: "requires at least 2 arg"},
		{name: "delete workload needs a name", args: []string{"-k", "delete", "workload"}, wantErr: "requires at least 1 arg"},
		{name: "delete configs", args: []string{"-k", "delete", "configs", "c"}, dials: true},
		{name: "get agents takes no arguments", args: []string{"-k", "get", "agents", "x"}, wantErr: "unknown command"},
		{name: "bad output format", args: []string{"-k", "get", "state", "-o", "xml"}, wantErr: "output format \"xml\" is not supported"},
		{name: "unknown flag", args: []string{"get", "state", "--nope"}, wantErr: "unknown flag: --nope"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			inv := invoke(t, nil, tt.args...)
			if (inv.dialed != nil) != tt.dials {
				t.Fatalf("dialed = %v, want %v; stderr %q", inv.dialed != nil, tt.dials, inv.stderr)
			}
			if tt.wantErr != "" && !strings.Contains(inv.stderr, tt.wantErr) {
				t.Fatalf("stderr %q, want %q", inv.stderr, tt.wantErr)
			}
			if inv.code != exitError {
				t.Fatalf("exit code %d", inv.code)
			}
			if tt.check != nil && !tt.check(inv.app) {
				t.Fatalf("flags parsed wrongly: %+v", inv.app)
			}
		})
	}
}

func TestCompletionCommandExists(t *testing.T) {
	var out bytes.Buffer
	a := newApp(func(string) string { return "" }, strings.NewReader(""), &out, &out)
	a.systemAnkConfig = filepath.Join(t.TempDir(), "absent.conf")
	if code := run(context.Background(), []string{"completion", "bash"}, a); code != exitOK {
		t.Fatalf("exit code %d: %s", code, out.String())
	}
	if !strings.Contains(out.String(), "bash completion") {
		t.Fatalf("no bash completion script:\n%.200s", out.String())
	}
}

func TestInterruptedExitCode(t *testing.T) {
	var out bytes.Buffer
	a := newApp(func(string) string { return "" }, strings.NewReader(""), &out, &out)
	a.systemAnkConfig = filepath.Join(t.TempDir(), "absent.conf")
	a.dial = func(ctx context.Context, _ client.Options) (conn, error) { return nil, ctx.Err() }
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if code := run(ctx, []string{"-k", "get", "state"}, a); code != exitInterrupted {
		t.Fatalf("exit code %d, want %d; output %q", code, exitInterrupted, out.String())
	}
	if out.Len() != 0 {
		t.Fatalf("an interrupt printed %q", out.String())
	}
}

func TestSpellOutGlobalS(t *testing.T) {
	tests := []struct {
		in   string
		want string
	}{
		{"-s a:1 logs wl -s T", "--server-url a:1 logs wl -s T"},
		{"-k -s a:1 get workloads -s running", "-k --server-url a:1 get workloads -s running"},
		{"-ks a:1 get state", "-k --server-url a:1 get state"},
		{"-kvsa:1 get state", "-kv --server-url=a:1 get state"},
		{"-s=a:1 get state", "--server-url=a:1 get state"},
		{"--ca_pem -s -s a:1 get state", "--ca_pem -s --server-url a:1 get state"},
		{"--response-timeout 5 -s a:1 logs", "--response-timeout 5 --server-url a:1 logs"},
		{"--server-url=x -s y get", "--server-url=x --server-url y get"},
		{"logs wl -s T", "logs wl -s T"},
		{"-q get state -s a:1", "-q get state -s a:1"},
		{"-s", "--server-url"},
		{"-z -s a get", "-z --server-url a get"},
		{"-x f.conf -s a logs wl -s T", "-x f.conf --server-url a logs wl -s T"},
		{"-kx f.conf -s a logs", "-kx f.conf --server-url a logs"},
		{"-xf.conf -s a logs", "-xf.conf --server-url a logs"},
		{"--ank-config f.conf -s a logs", "--ank-config f.conf --server-url a logs"},
		{"", ""},
	}
	for _, tt := range tests {
		got := strings.Join(spellOutGlobalS(strings.Fields(tt.in)), " ")
		if got != tt.want {
			t.Errorf("%q → %q, want %q", tt.in, got, tt.want)
		}
	}
}

func TestGlobalSBeforeTheSubcommandIsTheServer(t *testing.T) {
	inv := invoke(t, nil, "-k", "-s", "a:1", "logs", "wl", "-s", "2026-01-01T00:00:00Z")
	if inv.dialed == nil || !reflect.DeepEqual(inv.dialed.Addrs, []string{"a:1"}) || inv.app.logs.Since != "2026-01-01T00:00:00Z" {
		t.Fatalf("dialed %+v, since %q; stderr %q", inv.dialed, inv.app.logs.Since, inv.stderr)
	}
	inv = invoke(t, nil, "-k", "-s", "b:2", "get", "workloads", "-s", "running")
	if inv.dialed == nil || !reflect.DeepEqual(inv.dialed.Addrs, []string{"b:2"}) || inv.app.filter.State != "running" {
		t.Fatalf("dialed %+v, state %q; stderr %q", inv.dialed, inv.app.filter.State, inv.stderr)
	}
}

// stateConn answers every request with one complete state.
type stateConn struct {
	cs *ankbase.CompleteState
}

func (c stateConn) Request(context.Context, *ankbase.Request) (*ankbase.Response, error) {
	return &ankbase.Response{ResponseContent: &ankbase.Response_CompleteStateResponse{CompleteStateResponse: &ankbase.CompleteStateResponse{CompleteState: c.cs}}}, nil
}
func (c stateConn) Subscribe(context.Context, *ankbase.Request) (<-chan *ankbase.Response, func(), error) {
	return nil, nil, errStop
}
func (c stateConn) WorkloadStates() <-chan []*ankbase.WorkloadState { return nil }
func (c stateConn) Err() error                                      { return nil }
func (c stateConn) Close() error                                    { return nil }

func TestShellCompletionOffersNames(t *testing.T) {
	cs, err := rpc.CompleteStateFromTree(map[string]any{"desiredState": map[string]any{
		"workloads": map[string]any{
			"web":    map[string]any{"agent": "a", "runtime": "podman", "runtimeConfig": "x"},
			"worker": map[string]any{"agent": "a", "runtime": "podman", "runtimeConfig": "y"},
			"db":     map[string]any{"agent": "a", "runtime": "podman", "runtimeConfig": "z"},
		},
		"configs": map[string]any{"site": "s"},
	}})
	if err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		args []string
		want []string
	}{
		{[]string{"-k", "__complete", "delete", "workload", "w"}, []string{"web", "worker"}},
		{[]string{"-k", "__complete", "logs", "web", ""}, []string{"db", "worker"}},
		{[]string{"-k", "__complete", "delete", "config", ""}, []string{"site"}},
	}
	for _, tt := range tests {
		var out bytes.Buffer
		a := newApp(func(string) string { return "" }, strings.NewReader(""), &out, &bytes.Buffer{})
		a.systemAnkConfig = filepath.Join(t.TempDir(), "absent.conf")
		a.dial = func(context.Context, client.Options) (conn, error) { return stateConn{cs}, nil }
		if code := run(context.Background(), tt.args, a); code != exitOK {
			t.Fatalf("%v: exit code %d", tt.args, code)
		}
		lines := strings.Split(strings.TrimSpace(out.String()), "\n")
		got := lines[:len(lines)-1] // the last line is the directive
		if !reflect.DeepEqual(got, tt.want) {
			t.Errorf("%v: offered %q, want %q", tt.args, got, tt.want)
		}
	}
}

// Issue 31 point 2: a word that names no subcommand of a group is refused
// with a suggestion and a non-zero exit, at every level, as ank does; a
// group alone prints its help.
func TestUnknownSubcommandIsRefused(t *testing.T) {
	for _, tc := range []struct {
		args    []string
		suggest string
	}{
		{[]string{"get", "wokloads"}, "workloads"},
		{[]string{"cluster", "upgrade", "stat"}, "status"},
		{[]string{"agent", "frobnicate"}, ""},
	} {
		inv := invoke(t, nil, tc.args...)
		if inv.code == 0 || !strings.Contains(inv.stderr, "unknown command") {
			t.Errorf("grapnel %v: exit %d, stderr %q; want a refusal", tc.args, inv.code, inv.stderr)
		}
		if tc.suggest != "" && !strings.Contains(inv.stderr, "Did you mean this?\n\t"+tc.suggest) {
			t.Errorf("grapnel %v: stderr %q, want the suggestion %s", tc.args, inv.stderr, tc.suggest)
		}
		if inv.dialed != nil {
			t.Errorf("grapnel %v dialed a server", tc.args)
		}
	}
	if inv := invoke(t, nil, "get"); inv.code != 0 || !strings.Contains(inv.stdout, "Available Commands") {
		t.Errorf("grapnel get: exit %d, stdout %q; want its help", inv.code, inv.stdout)
	}
}

// Requirement (issue 30, point 8, D13): the default lock owner is
// USER@HOST, with the user from $USER, $USERNAME, the account of the
// uid, and last "uid<N>", so that clients without $USER on one host do
// not all share the bare host name.
func TestDefaultOwnerIsUserAtHost(t *testing.T) {
	env := func(vars map[string]string) func(string) string { return func(k string) string { return vars[k] } }
	account := func(name string, err error) func() (*user.User, error) {
		return func() (*user.User, error) { return &user.User{Username: name}, err }
	}
	host := func(h string, err error) func() (string, error) { return func() (string, error) { return h, err } }
	uid := func() int { return 1234 }
	for _, tc := range []struct {
		name    string
		getenv  func(string) string
		current func() (*user.User, error)
		host    func() (string, error)
		want    string
	}{
		{"$USER", env(map[string]string{"USER": "alice", "USERNAME": "bob"}), account("carol", nil), host("vm", nil), "alice@vm"},
		{"$USERNAME", env(map[string]string{"USERNAME": "bob"}), account("carol", nil), host("vm", nil), "bob@vm"},
		{"the uid's account", env(nil), account("carol", nil), host("vm", nil), "carol@vm"},
		{"no account", env(nil), account("", errors.New("unknown userid 1234")), host("vm", nil), "uid1234@vm"},
		{"no host name", env(map[string]string{"USER": "alice"}), account("carol", nil), host("", errors.New("none")), "alice@localhost"},
	} {
		if got := ownerOf(tc.getenv, tc.current, tc.host, uid); got != tc.want {
			t.Errorf("%s: owner %q, want %q", tc.name, got, tc.want)
		}
	}
}
