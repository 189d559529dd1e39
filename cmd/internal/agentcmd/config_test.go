package agentcmd

import (
	"encoding/base64"
	"errors"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/spf13/pflag"

	"github.com/grapnel-io/grapnel/agent"
	"github.com/grapnel-io/grapnel/agent/runtime/process"
	"github.com/grapnel-io/grapnel/internal/layered"
	"github.com/grapnel-io/grapnel/workloadpolicy"
)

func env(m map[string]string) func(string) (string, bool) {
	return func(k string) (string, bool) { v, ok := m[k]; return v, ok }
}

func writeFile(t *testing.T, name, content string) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), name)
	if err := os.WriteFile(p, []byte(content), 0o600); err != nil {
		t.Fatal(err)
	}
	return p
}

// Every setting comes from the file, the environment or the command line;
// the command line wins over the environment, which wins over the file.
func TestConfigPrecedence(t *testing.T) {
	file := writeFile(t, "agent.yaml", `name: from-file
server_url: https://10.0.0.1:25551, 10.0.0.2:25551
run_folder: /file
insecure: true
tags:
  zone: file
runtimes: [process]
gossip_join: [10.0.0.1:25571]
log_level: warn
`)
	empty := writeFile(t, "empty.yaml", "")
	ca, crt, key := writeFile(t, "ca.pem", "x"), writeFile(t, "crt.pem", "x"), writeFile(t, "key.pem", "x")
	tests := []struct {
		name string
		args []string
		env  map[string]string
		want func(c config) bool
	}{
		{"file", []string{"-x", file}, nil, func(c config) bool {
			return c.Name == "from-file" && slices.Equal(c.ServerURL, layered.List{"10.0.0.1:25551", "10.0.0.2:25551"}) &&
				c.RunFolder == "/file" && c.Insecure && maps.Equal(c.Tags, map[string]string{"zone": "file"}) &&
				slices.Equal(c.Runtimes, layered.List{"process"}) && slices.Equal(c.GossipJoin, layered.List{"10.0.0.1:25571"}) && c.LogLevel == "warn"
		}},
		{"env over file", []string{"-x", file}, map[string]string{
			"GRAPNEL_AGENT_NAME": "from-env", "GRAPNEL_AGENT_SERVER_URL": "e1:1,e2:2", "GRAPNEL_AGENT_TAGS": "zone=env,rack=7",
			"GRAPNEL_AGENT_RUNTIMES": "process,podman", "GRAPNEL_AGENT_RUN_FOLDER": "/env",
		}, func(c config) bool {
			return c.Name == "from-env" && slices.Equal(c.ServerURL, layered.List{"e1:1", "e2:2"}) &&
				maps.Equal(c.Tags, map[string]string{"zone": "env", "rack": "7"}) &&
				slices.Equal(c.Runtimes, layered.List{"process", "podman"}) && c.RunFolder == "/env" && c.LogLevel == "warn"
		}},
		{"command line over env", []string{"-x", file, "-n", "from-cli", "-s", "c1:1", "--server-url", "c2:2,c3:3",
			"-t", "zone=cli", "--tag", "a=b=c", "-r", "/cli", "--gossip-join", "g1:1", "--gossip-join", "g2:2"},
			map[string]string{"GRAPNEL_AGENT_NAME": "from-env", "GRAPNEL_AGENT_TAGS": "zone=env"}, func(c config) bool {
				return c.Name == "from-cli" && slices.Equal(c.ServerURL, layered.List{"c1:1", "c2:2", "c3:3"}) &&
					maps.Equal(c.Tags, map[string]string{"zone": "cli", "a": "b=c"}) && c.RunFolder == "/cli" &&
					slices.Equal(c.GossipJoin, layered.List{"g1:1", "g2:2"})
			}},
		{"--agent-config as Ankaios", []string{"--agent-config", file}, nil, func(c config) bool { return c.Name == "from-file" }},
		{"config path from env", nil, map[string]string{"GRAPNEL_AGENT_CONFIG": file}, func(c config) bool { return c.Name == "from-file" }},
		{"insecure from env", []string{"-n", "a", "-x", empty}, map[string]string{"GRAPNEL_AGENT_INSECURE": "1"}, func(c config) bool { return c.Insecure }},
		{"command line false over file true", []string{"-x", file, "--insecure=false", "--ca_pem", ca, "--crt_pem", crt, "--key_pem", key}, nil,
			func(c config) bool { return !c.Insecure && c.CAPem == ca }},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			cfg, err := loadConfig(tt.args, env(tt.env))
			if err != nil {
				t.Fatal(err)
			}
			if !tt.want(cfg) {
				t.Fatalf("config %+v", cfg)
			}
		})
	}
}

// Without a config file the defaults hold: the Ankaios server address,
// the Ankaios run folder, both runtimes (podman when available).
func TestConfigDefaults(t *testing.T) {
	cfg, err := loadConfig([]string{"-n", "agent_A", "-k", "-x", writeFile(t, "empty.yaml", "")}, env(nil))
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(cfg.ServerURL, layered.List{"127.0.0.1:25551"}) || cfg.RunFolder != agent.DefaultRunFolder() ||
		cfg.Runtimes != nil || cfg.GossipAddress != agent.DefaultGossipAddress || cfg.LogLevel != "info" ||
		cfg.ResyncInterval != agent.DefaultResyncInterval {
		t.Fatalf("defaults %+v", cfg)
	}
	// --resync-interval 0 turns the periodic drift repair rounds off.
	cfg, err = loadConfig([]string{"-n", "agent_A", "-k", "-x", writeFile(t, "empty.yaml", ""), "--resync-interval", "0"}, env(nil))
	if err != nil {
		t.Fatal(err)
	}
	if ac, err := cfg.agentConfig(nil); err != nil || ac.ResyncInterval != 0 {
		t.Fatalf("--resync-interval 0 gives %v, %v", ac.ResyncInterval, err)
	}
	// Process workloads get uids of their own by default (issue 17,
	// point 5), and the workload policy is baseline (issue 27); root
	// workloads only at privileged, which --allow-root-workloads still
	// means.
	if ac, err := cfg.agentConfig(nil); err != nil || ac.WorkloadUIDs != process.DefaultUIDRange || ac.WorkloadPolicy != workloadpolicy.Baseline || len(ac.WorkloadUsers) != 0 {
		t.Fatalf("default workload uids %v, policy %v, users %v, %v", ac.WorkloadUIDs, ac.WorkloadPolicy, ac.WorkloadUsers, err)
	}
	cfg, err = loadConfig([]string{"-n", "agent_A", "-k", "-x", writeFile(t, "empty.yaml", ""), "--workload-uid-range", "off", "--allow-root-workloads"}, env(nil))
	if err != nil {
		t.Fatal(err)
	}
	if ac, err := cfg.agentConfig(nil); err != nil || !ac.WorkloadUIDs.IsZero() || ac.WorkloadPolicy != workloadpolicy.Privileged {
		t.Fatalf("--workload-uid-range off --allow-root-workloads gives %v, %v, %v", ac.WorkloadUIDs, ac.WorkloadPolicy, err)
	}
	cfg, err = loadConfig([]string{"-n", "agent_A", "-k", "-x", writeFile(t, "policy.yaml", "workload_policy: restricted\nworkload_users: [alice]\n"), "--workload-users", "alice,1000"}, env(nil))
	if err != nil {
		t.Fatal(err)
	}
	if ac, err := cfg.agentConfig(nil); err != nil || ac.WorkloadPolicy != workloadpolicy.Restricted || strings.Join(ac.WorkloadUsers, ",") != "alice,1000" {
		t.Fatalf("workload_policy restricted, --workload-users alice,1000 gives %v, %v, %v", ac.WorkloadPolicy, ac.WorkloadUsers, err)
	}
	// The log campaign caps (issue 27, point 5): defaults, and set.
	if ac, err := cfg.agentConfig(nil); err != nil || ac.MaxLogCampaignsPerWorkload != 8 || ac.MaxLogCampaigns != 64 || ac.MaxLogSources != 256 {
		t.Fatalf("default log caps %d, %d, %d, %v", ac.MaxLogCampaignsPerWorkload, ac.MaxLogCampaigns, ac.MaxLogSources, err)
	}
	cfg, err = loadConfig([]string{"-n", "agent_A", "-k", "-x", writeFile(t, "caps.yaml", "max_log_campaigns: 10\n"),
		"--max-log-campaigns-per-workload", "2", "--max-log-sources", "20"}, env(nil))
	if err != nil {
		t.Fatal(err)
	}
	if ac, err := cfg.agentConfig(nil); err != nil || ac.MaxLogCampaignsPerWorkload != 2 || ac.MaxLogCampaigns != 10 || ac.MaxLogSources != 20 {
		t.Fatalf("log caps %d, %d, %d, %v", ac.MaxLogCampaignsPerWorkload, ac.MaxLogCampaigns, ac.MaxLogSources, err)
	}
}

// A root agent without a uid range would run every process workload as
// root: only --workload-policy privileged allows that (issue 27).
func TestRootAgentWithoutUIDRange(t *testing.T) {
	empty := writeFile(t, "empty.yaml", "")
	off := []string{"-n", "a", "-k", "-x", empty, "--workload-uid-range", "off"}
	for _, tc := range []struct {
		name string
		euid int
		args []string
		want string
	}{
		{"root at baseline", 0, off, "--workload-uid-range off: the agent runs as root, so every process workload would run as root, which needs --workload-policy privileged (it is baseline)"},
		{"root at restricted", 0, append(off, "--workload-policy", "restricted"), "(it is restricted)"},
		{"root at privileged", 0, append(off, "--workload-policy", "privileged"), ""},
		{"root with --allow-root-workloads", 0, append(off, "--allow-root-workloads"), ""},
		{"root without the process runtime", 0, append(off, "--runtimes", "podman"), ""},
		{"not root", 1000, off, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			defer func(g func() int) { geteuid = g }(geteuid)
			geteuid = func() int { return tc.euid }
			_, err := loadConfig(tc.args, env(nil))
			if tc.want == "" && err != nil || tc.want != "" && (err == nil || !strings.Contains(err.Error(), tc.want)) {
				t.Fatalf("err = %v, want %q", err, tc.want)
			}
		})
	}
}

// Bad settings are refused with a message that names the option.
func TestConfigRefusals(t *testing.T) {
	dir := t.TempDir()
	absent := filepath.Join(dir, "absent.yaml")
	empty := writeFile(t, "empty.yaml", "")
	tests := []struct {
		name string
		args []string
		env  map[string]string
		want string
	}{
		{"no name", []string{"-k", "-x", empty}, nil, "--name: required"},
		{"invalid name", []string{"-n", "a.b", "-k", "-x", empty}, nil, `--name "a.b"`},
		{"no security mode", []string{"-n", "a", "-x", empty}, nil, "--insecure/-k"},
		{"partial certificates", []string{"-n", "a", "--ca_pem", "ca.pem", "-x", empty}, nil, "--crt_pem"},
		{"named file missing", []string{"-n", "a", "-k", "-x", absent}, nil, absent},
		{"file from env missing", []string{"-n", "a", "-k"}, map[string]string{"GRAPNEL_AGENT_CONFIG": absent}, absent},
		{"unknown file key", []string{"-n", "a", "-k", "-x", writeFile(t, "bad.yaml", "name: a\nserver: x\n")}, nil, "field server not found"},
		{"unknown runtime", []string{"-n", "a", "-k", "-x", empty, "--runtimes", "process,docker"}, nil, `--runtimes: unknown runtime "docker"`},
		{"bad tag", []string{"-n", "a", "-k", "-x", empty, "-t", "novalue"}, nil, `"novalue": expected key=value`},
		{"bad tag in env", []string{"-n", "a", "-k", "-x", empty}, map[string]string{"GRAPNEL_AGENT_TAGS": "=x"}, "GRAPNEL_AGENT_TAGS"},
		{"bad boolean in env", []string{"-n", "a", "-x", empty}, map[string]string{"GRAPNEL_AGENT_INSECURE": "maybe"}, "GRAPNEL_AGENT_INSECURE"},
		{"no server", []string{"-n", "a", "-k", "-x", empty, "-s", ","}, nil, "--server-url"},
		{"server without port", []string{"-n", "a", "-k", "-x", empty, "-s", "https://host"}, nil, `--server-url "host": not host:port`},
		{"gossip join without port", []string{"-n", "a", "-k", "-x", empty, "--gossip-join", "10.0.0.1"}, nil, `--gossip-join "10.0.0.1"`},
		{"bad gossip address", []string{"-n", "a", "-k", "-x", empty, "--gossip-join", "h:1", "--gossip-address", "x"}, nil, `--gossip-address "x"`},
		{"bad log level", []string{"-n", "a", "-k", "-x", empty, "--log-level", "loud"}, nil, "--log-level"},
		{"negative resync interval", []string{"-n", "a", "-k", "-x", empty, "--resync-interval", "-1s"}, nil, "--resync-interval -1s: must not be negative"},
		{"bad workload uid range", []string{"-n", "a", "-k", "-x", empty, "--workload-uid-range", "0-10"}, nil, `--workload-uid-range "0-10": uid 0 is root`},
		{"no log campaigns per workload", []string{"-n", "a", "-k", "-x", empty, "--max-log-campaigns-per-workload", "0"}, nil, "--max-log-campaigns-per-workload 0: must be at least 1"},
		{"negative log campaigns", []string{"-n", "a", "-k", "-x", empty, "--max-log-campaigns", "-3"}, nil, "--max-log-campaigns -3: must be at least 1"},
		{"no log sources", []string{"-n", "a", "-k", "-x", empty}, map[string]string{"GRAPNEL_AGENT_MAX_LOG_SOURCES": "0"}, "--max-log-sources 0: must be at least 1"},
		{"log sources not a number", []string{"-n", "a", "-k", "-x", empty, "--max-log-sources", "many"}, nil, "max-log-sources"},
		{"bad workload policy", []string{"-n", "a", "-k", "-x", empty, "--workload-policy", "root"}, nil, `--workload-policy "root": not a workload policy level (privileged, baseline or restricted)`},
		{"bad workload policy in env", []string{"-n", "a", "-k", "-x", empty}, map[string]string{"GRAPNEL_AGENT_WORKLOAD_POLICY": "lax"}, `--workload-policy "lax"`},
		{"root workloads at restricted", []string{"-n", "a", "-k", "-x", empty, "--workload-policy", "restricted", "--allow-root-workloads"}, nil, "contradicts --workload-policy restricted"},
		{"stray argument", []string{"-n", "a", "-k", "-x", empty, "extra"}, nil, `unexpected argument "extra"`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := loadConfig(tt.args, env(tt.env))
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Fatalf("err = %v, want it to contain %q", err, tt.want)
			}
		})
	}
}

func TestConfigHelp(t *testing.T) {
	if _, err := loadConfig([]string{"--help"}, env(nil)); !errors.Is(err, pflag.ErrHelp) {
		t.Fatalf("err = %v", err)
	}
}

// The gossip key file holds the replicas' base64 key; anything else is
// refused naming the option.
func TestGossipKeyFile(t *testing.T) {
	key := make([]byte, 32)
	tests := []struct {
		name, content, want string
	}{
		{"good", base64.StdEncoding.EncodeToString(key) + "\n", ""},
		{"not base64", "%%%", "not base64"},
		{"wrong size", base64.StdEncoding.EncodeToString(key[:5]), "5 bytes"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			cfg, err := loadConfig([]string{"-n", "a", "-k", "-x", writeFile(t, "a.yaml", ""),
				"--gossip-key-file", writeFile(t, "key", tt.content)}, env(nil))
			if err != nil {
				t.Fatal(err)
			}
			ac, err := cfg.agentConfig(nil)
			switch {
			case tt.want == "" && (err != nil || len(ac.GossipKey) != 32):
				t.Fatalf("key %d bytes, %v", len(ac.GossipKey), err)
			case tt.want != "" && (err == nil || !strings.Contains(err.Error(), tt.want) || !strings.Contains(err.Error(), "--gossip-key-file")):
				t.Fatalf("err = %v, want %q naming the option", err, tt.want)
			}
		})
	}
}

// The example in deploy/ uses only keys the agent knows.
func TestDeployExampleParses(t *testing.T) {
	cfg := defaults()
	if err := layered.ReadFile("agent config", "../../../deploy/agent.yaml", true, &cfg); err != nil {
		t.Fatal(err)
	}
	if cfg.Name != "agent_A" || len(cfg.ServerURL) != 3 || len(cfg.GossipJoin) != 3 || cfg.RunFolder != "/var/lib/grapnel-agent" {
		t.Fatalf("example parsed as %+v", cfg)
	}
}

// Issue 31 point 2: a relative --run-folder is made absolute from the
// directory the agent started in (before, every process workload retried
// forever with "Spec.RunDir ... is not ..."), and so are the other paths.
func TestRelativePathsAreMadeAbsolute(t *testing.T) {
	wd, err := os.Getwd()
	if err != nil {
		t.Fatal(err)
	}
	cfg, err := loadConfig([]string{"-n", "agent_A", "-k", "-x", writeFile(t, "empty.yaml", ""), "--run-folder", "run/here",
		"--gossip-key-file", "keys/gossip.key"}, env(nil))
	if err != nil {
		t.Fatal(err)
	}
	if want := filepath.Join(wd, "run/here"); cfg.RunFolder != want {
		t.Fatalf("run folder %q, want %q", cfg.RunFolder, want)
	}
	if want := filepath.Join(wd, "keys/gossip.key"); cfg.GossipKeyFile != want {
		t.Fatalf("gossip key file %q, want %q", cfg.GossipKeyFile, want)
	}
}
