package servercmd

import (
	"errors"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"runtime/debug"
	"strings"
	"testing"
	"time"

	"github.com/grapnel-io/grapnel/internal/identity"
	"github.com/grapnel-io/grapnel/workloadpolicy"
)

func env(m map[string]string) func(string) (string, bool) {
	return func(k string) (string, bool) { v, ok := m[k]; return v, ok }
}

// swdd~server-loads-config-file~1
// swdd~server-supports-pem-file-paths-as-cli-arguments~1
// swdd~server-supports-cli-argument-for-insecure-communication~1
func TestConfigPrecedence(t *testing.T) {
	dir := t.TempDir()
	file := filepath.Join(dir, "server.yaml")
	if err := os.WriteFile(file, []byte("address: 10.0.0.1:1\nname: from-file\ninsecure: true\ndata_dir: /file\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	cases := []struct {
		name string
		args []string
		env  map[string]string
		want func(c config) bool
	}{
		{"file", []string{"-x", file}, nil, func(c config) bool {
			return c.Address == "10.0.0.1:1" && c.Name == "from-file" && c.Insecure && c.DataDir == "/file"
		}},
		{"env over file", []string{"-x", file}, map[string]string{"GRAPNEL_SERVER_NAME": "from-env"}, func(c config) bool { return c.Name == "from-env" && c.Address == "10.0.0.1:1" }},
		{"cli over env", []string{"-x", file, "--name", "from-cli"}, map[string]string{"GRAPNEL_SERVER_NAME": "from-env"}, func(c config) bool { return c.Name == "from-cli" }},
		{"config path from env", nil, map[string]string{"GRAPNEL_SERVER_CONFIG": file}, func(c config) bool { return c.Name == "from-file" }},
		{"defaults without file", []string{"-k", "-x", filepath.Join(dir, "none.yaml")}, nil, nil},
		{"insecure from env", nil, map[string]string{"GRAPNEL_SERVER_CONFIG": filepath.Join(dir, "absent"), "GRAPNEL_SERVER_INSECURE": "true"}, nil},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			cfg, err := loadConfig(c.args, env(c.env))
			if c.want == nil {
				// An explicitly named file that is missing is an error.
				if err == nil && c.name == "defaults without file" {
					t.Fatal("a missing explicit config file was accepted")
				}
				if c.name == "insecure from env" && (err == nil || !strings.Contains(err.Error(), "absent")) {
					t.Fatalf("got %v", err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if !c.want(cfg) {
				t.Fatalf("config %+v", cfg)
			}
		})
	}
}

// swdd~server-fails-on-missing-file-paths-and-insecure-cli-arguments~1
// swdd~server-establishes-insecure-communication-based-on-provided-insecure-cli-argument~1
// swdd~server-provides-file-paths-to-communication-middleware~1
func TestConfigNeedsSecurityMode(t *testing.T) {
	noFile := filepath.Join(t.TempDir(), "none")
	_, err := loadConfig(nil, env(map[string]string{"GRAPNEL_SERVER_CONFIG": noFile}))
	if err == nil {
		t.Fatal("started without a security mode")
	}
	_, err = loadConfig([]string{"-x", writeFile(t, "address: x\n")}, env(nil))
	if !errors.Is(err, errNoSecurityMode) || !strings.Contains(err.Error(), "--insecure") {
		t.Fatalf("error %v should name the options", err)
	}
	cfg, err := loadConfig([]string{"-k", "-x", writeFile(t, "")}, env(nil))
	if err != nil || !cfg.Insecure {
		t.Fatalf("-k: %v %+v", err, cfg)
	}
	dir := t.TempDir()
	ca, crt, key := filepath.Join(dir, "ca.pem"), filepath.Join(dir, "crt.pem"), filepath.Join(dir, "key.pem")
	for _, f := range []string{ca, crt} {
		os.WriteFile(f, []byte("x"), 0o644)
	}
	os.WriteFile(key, []byte("x"), 0o644)
	_, err = loadConfig([]string{"-x", writeFile(t, ""), "--ca_pem", ca, "--crt_pem", crt, "--key_pem", key}, env(nil))
	if err == nil || !strings.Contains(err.Error(), "key.pem") {
		t.Fatalf("a world-readable key was accepted: %v", err)
	}
	os.Chmod(key, 0o600)
	cfg, err = loadConfig([]string{"-x", writeFile(t, "")}, env(map[string]string{"GRAPNEL_SERVER_CA_PEM": ca, "GRAPNEL_SERVER_CRT_PEM": crt, "GRAPNEL_SERVER_KEY_PEM": key}))
	if err != nil || cfg.tlsFiles().CA != ca || cfg.tlsFiles().Key != key {
		t.Fatalf("PEM paths from env: %v %+v", err, cfg)
	}
}

func writeFile(t *testing.T, content string) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), "server.yaml")
	if err := os.WriteFile(p, []byte(content), 0o600); err != nil {
		t.Fatal(err)
	}
	return p
}

func TestClusterOptions(t *testing.T) {
	dir := t.TempDir()
	file := filepath.Join(dir, "server.yaml")
	yml := "insecure: true\nbootstrap_expect: 3\njoin: [10.0.0.2:25571]\nagent_reconnect_grace: 7s\nraft_heartbeat_timeout: 400ms\n"
	if err := os.WriteFile(file, []byte(yml), 0o600); err != nil {
		t.Fatal(err)
	}
	cases := []struct {
		name    string
		args    []string
		env     map[string]string
		want    func(c config) bool
		wantErr string
	}{
		{"file durations and lists", []string{"-x", file}, nil, func(c config) bool {
			return c.BootstrapExpect == 3 && len(c.Join) == 1 && c.Join[0] == "10.0.0.2:25571" &&
				c.AgentReconnectGrace == 7*time.Second && c.RaftHeartbeatTimeout == 400*time.Millisecond &&
				c.GossipAddress == defaultGossipAddress
		}, ""},
		{"env list", []string{"-x", file}, map[string]string{"GRAPNEL_SERVER_JOIN": "a:1, b:2"}, func(c config) bool {
			return len(c.Join) == 2 && c.Join[1] == "b:2"
		}, ""},
		{"repeated flag wins", []string{"-x", file, "--join", "c:3", "--join", "d:4"}, map[string]string{"GRAPNEL_SERVER_JOIN": "a:1"}, func(c config) bool {
			return len(c.Join) == 2 && c.Join[0] == "c:3" && c.Join[1] == "d:4"
		}, ""},
		{"single replica has no gossip", []string{"-k"}, nil, func(c config) bool { return c.GossipAddress == "" && c.BootstrapExpect == 0 }, ""},
		{"two voters refused", []string{"-k", "--bootstrap-expect", "2"}, nil, nil, "no fault tolerance"},
		{"bad env duration", []string{"-k"}, map[string]string{"GRAPNEL_SERVER_RPC_HOLD_TIMEOUT": "soon"}, nil, "GRAPNEL_SERVER_RPC_HOLD_TIMEOUT"},
		{"wildcard address in a cluster", []string{"-k", "--bootstrap-expect", "3", "-a", "0.0.0.0:25551"}, nil, nil, "not a wildcard"},
		{"lease above heartbeat", []string{"-k", "--raft-leader-lease-timeout", "1s"}, nil, nil, "must not exceed"},
		{"storage and GC defaults", []string{"-k"}, nil, func(c config) bool {
			return c.RaftSegmentMiB == 4 && c.GCPercent == defaultGCPercent && c.GCIdlePercent == defaultGCIdlePercent
		}, ""},
		{"storage and GC from env", []string{"-k"}, map[string]string{"GRAPNEL_SERVER_RAFT_SEGMENT_MIB": "8", "GRAPNEL_SERVER_GC_PERCENT": "100", "GRAPNEL_SERVER_GC_IDLE_PERCENT": "80"}, func(c config) bool {
			return c.RaftSegmentMiB == 8 && c.GCPercent == 100 && c.GCIdlePercent == 80
		}, ""},
		{"segment size out of range", []string{"-k", "--raft-segment-mib", "0"}, nil, nil, "--raft-segment-mib 0"},
		{"log store defaults to the WAL", []string{"-k"}, nil, func(c config) bool { return c.RaftLogStore == "wal" }, ""},
		{"log store bolt", []string{"-k", "--raft-log-store", "bolt"}, nil, func(c config) bool { return c.RaftLogStore == "bolt" }, ""},
		{"log store from env", []string{"-k"}, map[string]string{"GRAPNEL_SERVER_RAFT_LOG_STORE": "bolt"}, func(c config) bool { return c.RaftLogStore == "bolt" }, ""},
		{"log store unknown", []string{"-k", "--raft-log-store", "boltdb"}, nil, nil, `--raft-log-store "boltdb": must be wal or bolt`},
		{"group commit delay", []string{"-k", "--group-commit-delay", "0"}, nil, func(c config) bool { return c.GroupCommitDelay == 0 }, ""},
		{"group commit delay too long", []string{"-k", "--group-commit-delay", "1s"}, nil, nil, "--group-commit-delay 1s"},
		{"group commit max batch", []string{"-k", "--group-commit-max-batch", "1"}, nil, func(c config) bool { return c.GroupCommitMaxBatch == 1 }, ""},
		{"group commit max batch zero", []string{"-k", "--group-commit-max-batch", "0"}, nil, nil, "--group-commit-max-batch 0"},
		{"gc percent too low", []string{"-k", "--gc-percent", "5"}, nil, nil, "--gc-percent 5"},
		{"untyped certificates are agents by default", []string{"-k"}, nil, func(c config) bool {
			r, err := c.untypedRole()
			return err == nil && r == identity.Agent
		}, ""},
		{"untyped certificates refused", []string{"-k", "--untyped-cert-role", "refuse"}, nil, func(c config) bool {
			r, err := c.untypedRole()
			return err == nil && r == identity.None
		}, ""},
		{"untyped certificates as commanders, from env", []string{"-k"}, map[string]string{"GRAPNEL_SERVER_UNTYPED_CERT_ROLE": "commander"}, func(c config) bool {
			r, err := c.untypedRole()
			return err == nil && r == identity.Commander
		}, ""},
		{"untyped certificates never replicas", []string{"-k", "--untyped-cert-role", "replica"}, nil, nil, "--untyped-cert-role \"replica\""},
		{"untyped role unknown", []string{"-k", "--untyped-cert-role", "root"}, nil, nil, "must be agent, commander, operator or refuse"},
		{"gc idle percent too low", []string{"-k", "--gc-idle-percent", "10"}, nil, nil, "--gc-idle-percent 10"},
		{"workload policy baseline by default", []string{"-k"}, nil, func(c config) bool {
			l, err := c.workloadPolicy()
			return err == nil && l == workloadpolicy.Baseline
		}, ""},
		{"workload policy from env", []string{"-k"}, map[string]string{"GRAPNEL_SERVER_WORKLOAD_POLICY": "restricted"}, func(c config) bool {
			l, err := c.workloadPolicy()
			return err == nil && l == workloadpolicy.Restricted
		}, ""},
		{"workload policy unknown", []string{"-k", "--workload-policy", "root"}, nil, nil, `--workload-policy "root": not a workload policy level`},
		{"metrics and dashboard on one address", []string{"-k", "--metrics-address", "10.0.0.1:25581", "--ui-address", "10.0.0.1:25581"}, nil, nil, `--ui-address "10.0.0.1:25581": the same address as --metrics-address`},
		{"metrics and dashboard on their own ports", []string{"-k", "--metrics-address", "10.0.0.1:25581", "--ui-address", "10.0.0.1:25582"}, nil, func(c config) bool {
			return c.MetricsAddress == "10.0.0.1:25581" && c.UIAddress == "10.0.0.1:25582"
		}, ""},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			env := c.env
			if env == nil {
				env = map[string]string{}
			}
			if _, ok := env["GRAPNEL_SERVER_CONFIG"]; !ok && len(c.args) > 0 && c.args[0] != "-x" {
				env["GRAPNEL_SERVER_CONFIG"] = filepath.Join(dir, "absent-ok")
				if err := os.WriteFile(env["GRAPNEL_SERVER_CONFIG"], nil, 0o600); err != nil {
					t.Fatal(err)
				}
			}
			cfg, err := loadConfig(c.args, func(k string) (string, bool) { v, ok := env[k]; return v, ok })
			if c.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), c.wantErr) {
					t.Fatalf("got %v, want error containing %q", err, c.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if !c.want(cfg) {
				t.Fatalf("config %+v", cfg)
			}
		})
	}
}

func TestGOGCWinsOverGCPercent(t *testing.T) {
	log := slog.New(slog.NewTextHandler(io.Discard, nil))
	old := debug.SetGCPercent(100)
	defer debug.SetGCPercent(old)
	setGC(300, 300, 0, func(k string) (string, bool) { return "150", k == "GOGC" }, log)()
	if got := debug.SetGCPercent(100); got != 100 {
		t.Fatalf("with GOGC set, the GC target changed to %d", got)
	}
	setGC(300, 300, 0, func(string) (string, bool) { return "", false }, log)()
	if got := debug.SetGCPercent(100); got != 300 {
		t.Fatalf("GC target %d, want 300", got)
	}
	// An idle target at or above the busy one means the busy one always.
	setGC(300, 500, 0, func(string) (string, bool) { return "", false }, log)()
	if got := debug.SetGCPercent(100); got != 300 {
		t.Fatalf("GC target %d, want 300", got)
	}
	// With a lower idle target a replica starts at the busy one, and
	// the tuner (gc_test.go) takes it from there.
	setGC(300, 60, 0, func(string) (string, bool) { return "", false }, log)()
	if got := debug.SetGCPercent(100); got != 300 {
		t.Fatalf("GC target %d at the start, want the busy 300", got)
	}
	// With GOGC set there is no switching either.
	setGC(300, 50, 0, func(k string) (string, bool) { return "150", k == "GOGC" }, log)()
	if got := debug.SetGCPercent(100); got != 100 {
		t.Fatalf("with GOGC set, the GC target changed to %d", got)
	}
}

// Requirement (issue 17, point 2): with TLS a gossip key is required (the
// refusal names the option), its file must be 0600 or 0400 (named with
// its mode), and the agents' pool has a key of its own.
func TestGossipKeyRequiredWithTLS(t *testing.T) {
	dir := t.TempDir()
	ca, crt, key := filepath.Join(dir, "ca.pem"), filepath.Join(dir, "crt.pem"), filepath.Join(dir, "key.pem")
	os.WriteFile(ca, []byte("x"), 0o644)
	os.WriteFile(crt, []byte("x"), 0o644)
	os.WriteFile(key, []byte("x"), 0o600)
	keyFile := func(name, content string, perm os.FileMode) string {
		p := filepath.Join(dir, name)
		os.WriteFile(p, []byte(content), perm)
		os.Chmod(p, perm)
		return p
	}
	replicasKey := keyFile("gossip.key", "MDEyMzQ1Njc4OWFiY2RlZg==\n", 0o600)
	loose := keyFile("loose.key", "MDEyMzQ1Njc4OWFiY2RlZg==\n", 0o644)
	agentsKey := keyFile("agents.key", "ZmVkY2JhOTg3NjU0MzIxMA==\n", 0o600)
	sameKey := keyFile("same.key", "MDEyMzQ1Njc4OWFiY2RlZg==\n", 0o600)
	tlsArgs := []string{"-x", writeFile(t, ""), "--ca_pem", ca, "--crt_pem", crt, "--key_pem", key, "--address", "10.0.0.1:25551",
		"--bootstrap-expect", "3", "--gossip-address", "10.0.0.1:25571"}
	for _, tc := range []struct {
		name string
		args []string
		want string // "" loads and reads the keys
	}{
		{"TLS without a gossip key", tlsArgs, "--gossip-key-file (config gossip_key_file) is required with TLS"},
		{"insecure without a gossip key", []string{"-k", "-x", writeFile(t, ""), "--bootstrap-expect", "3", "--address", "10.0.0.1:1"}, ""},
		{"TLS with a key", append(tlsArgs, "--gossip-key-file", replicasKey), ""},
		{"key file readable by others", append(tlsArgs, "--gossip-key-file", loose), "loose.key has permissions 0644"},
		{"agents' pool without its key", append(tlsArgs, "--gossip-key-file", replicasKey, "--agent-gossip-address", "10.0.0.1:25573"), "--agent-gossip-key-file (config agent_gossip_key_file) is required"},
		{"agents' pool with the replicas' key file", append(tlsArgs, "--gossip-key-file", replicasKey, "--agent-gossip-address", "10.0.0.1:25573", "--agent-gossip-key-file", replicasKey), "agents must not hold the replicas' key"},
		{"agents' pool with the replicas' key in another file", append(tlsArgs, "--gossip-key-file", replicasKey, "--agent-gossip-address", "10.0.0.1:25573", "--agent-gossip-key-file", sameKey), "agents must not hold the replicas' key"},
		{"agents' pool with its own key", append(tlsArgs, "--gossip-key-file", replicasKey, "--agent-gossip-address", "10.0.0.1:25573", "--agent-gossip-key-file", agentsKey), ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cfg, err := loadConfig(tc.args, env(nil))
			if err == nil {
				_, _, err = cfg.readGossipKeys()
			}
			switch {
			case tc.want == "" && err != nil:
				t.Fatalf("refused: %v", err)
			case tc.want != "" && (err == nil || !strings.Contains(err.Error(), tc.want)):
				t.Fatalf("error %v, want %q", err, tc.want)
			}
		})
	}
}

// Requirement: the dashboard is off by default and set by flag,
// environment or config file (docs/operations.md, "Dashboard").
func TestUIAddressOption(t *testing.T) {
	dir := t.TempDir()
	empty := filepath.Join(dir, "empty.yaml")
	file := filepath.Join(dir, "server.yaml")
	if err := os.WriteFile(empty, []byte("insecure: true\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(file, []byte("insecure: true\nui_address: 10.0.0.1:25582\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		name string
		args []string
		env  map[string]string
		want string
	}{
		{"off by default", []string{"-x", empty}, nil, ""},
		{"flag", []string{"-x", empty, "--ui-address", "127.0.0.1:25582"}, nil, "127.0.0.1:25582"},
		{"environment", []string{"-x", empty}, map[string]string{"GRAPNEL_SERVER_UI_ADDRESS": ":8443"}, ":8443"},
		{"config file", []string{"-x", file}, nil, "10.0.0.1:25582"},
	} {
		t.Run(c.name, func(t *testing.T) {
			cfg, err := loadConfig(c.args, env(c.env))
			if err != nil {
				t.Fatal(err)
			}
			if cfg.UIAddress != c.want {
				t.Fatalf("ui address %q, want %q", cfg.UIAddress, c.want)
			}
		})
	}
}

// The render budget and the dry-run bound have defaults, flags and
// variables, and a value out of range is refused naming the flag.
func TestRenderBudgetOptions(t *testing.T) {
	cfg, err := loadConfig([]string{"-k"}, env(nil))
	if err != nil {
		t.Fatal(err)
	}
	if cfg.limits().MaxRenderStepsPerRequest != 1<<20 || cfg.MaxConcurrentDryRuns != 1 {
		t.Fatalf("defaults: %d steps, %d dry-runs", cfg.limits().MaxRenderStepsPerRequest, cfg.MaxConcurrentDryRuns)
	}
	cfg, err = loadConfig([]string{"-k", "--max-render-steps-per-request", "5000"},
		env(map[string]string{"GRAPNEL_SERVER_MAX_CONCURRENT_DRY_RUNS": "2"}))
	if err != nil {
		t.Fatal(err)
	}
	if cfg.limits().MaxRenderStepsPerRequest != 5000 || cfg.MaxConcurrentDryRuns != 2 {
		t.Fatalf("set: %d steps, %d dry-runs", cfg.limits().MaxRenderStepsPerRequest, cfg.MaxConcurrentDryRuns)
	}
	for _, args := range [][]string{{"--max-render-steps-per-request", "0"}, {"--max-concurrent-dry-runs", "0"}, {"--max-concurrent-dry-runs", "65"}} {
		_, err := loadConfig(append([]string{"-k"}, args...), env(nil))
		if err == nil || !strings.Contains(err.Error(), args[0]) {
			t.Errorf("%v: %v", args, err)
		}
	}
}

// Issue 31 point 2: relative path flags are made absolute from the
// directory the server started in (a restart in place executes it again
// there, systemd starts it in "/").
func TestRelativePathsAreMadeAbsolute(t *testing.T) {
	wd, err := os.Getwd()
	if err != nil {
		t.Fatal(err)
	}
	cfg, err := loadConfig([]string{"-k", "-x", writeFile(t, ""), "--data-dir", "data/r1", "--secret-key-file", "keys/secrets"}, env(nil))
	if err != nil {
		t.Fatal(err)
	}
	if cfg.DataDir != filepath.Join(wd, "data/r1") || cfg.SecretKeyFile != filepath.Join(wd, "keys/secrets") {
		t.Fatalf("data dir %q, secret key file %q; want both under %s", cfg.DataDir, cfg.SecretKeyFile, wd)
	}
}
