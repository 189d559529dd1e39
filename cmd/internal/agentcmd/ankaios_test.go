package agentcmd

import (
	"bytes"
	"errors"
	"maps"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/grapnel-io/grapnel/cmd/internal/versiontest"

	"github.com/spf13/pflag"

	"github.com/grapnel-io/grapnel/internal/layered"
	"github.com/grapnel-io/grapnel/rpc"
)

// withDefaultPaths points the default config files (Grapnel's and the
// Ankaios one) at test files for the rest of the test.
func withDefaultPaths(t *testing.T, grapnel, ankaios string) {
	t.Helper()
	g, a := defaultConfigPath, upstreamConfigPath
	defaultConfigPath, upstreamConfigPath = grapnel, ankaios
	t.Cleanup(func() { defaultConfigPath, upstreamConfigPath = g, a })
}

// An Ankaios agent config file and the ANKAGENT_ variables configure the
// agent: flags > GRAPNEL_AGENT_* > ANKAGENT_* > Grapnel's file > the
// Ankaios file > defaults.
func TestAnkaiosAgentConfig(t *testing.T) {
	dir := t.TempDir()
	ca, crt, key := writeFile(t, "ca.pem", "x"), writeFile(t, "crt.pem", "x"), writeFile(t, "key.pem", "x")
	ca2 := writeFile(t, "ca2.pem", "x")
	full := writeFile(t, "ank-agent.conf", `version = 'v1'
name = 'agent_A'
server_url = 'https://10.0.0.1:25551'
run_folder = '/run/ankaios'
insecure = false
runtimes = ['podman']
tags = { "cpu" = "x86_64", location = "front" }
ca_pem = '`+ca+`'
crt_pem = '`+crt+`'
key_pem = '`+key+`'
`)
	insecureConf := writeFile(t, "insecure.conf", "version = 'v1'\nname = 'agent_B'\ninsecure = true\nserver_url = 'https://a:1,https://b:2'\n")
	sniffed := writeFile(t, "agent-config", "version = 'v1'\nname = 'agent_C'\ninsecure = true\n")
	mixed := writeFile(t, "mixed.conf", "version = 'v1'\nname = 'a'\ninsecure = true\nruntimes = ['containerd', 'podman', 'process', 'podman-kube']\n")
	content := writeFile(t, "content.conf", "version = 'v1'\nname = 'a'\nca_pem_content = 'CA'\ncrt_pem_content = 'CRT'\nkey_pem_content = 'KEY'\n")
	grapnelYAML := writeFile(t, "agent.yaml", "name: from-yaml\ninsecure: false\nca_pem: "+ca+"\ncrt_pem: "+crt+"\nkey_pem: "+key+"\n")
	absent := filepath.Join(dir, "absent")

	tests := []struct {
		name             string
		grapnel, ankaios string
		args             []string
		env              map[string]string
		want             func(c config) bool
		warning          string
	}{
		{name: "-x Ankaios file", grapnel: absent, ankaios: absent, args: []string{"-x", full}, want: func(c config) bool {
			return c.Name == "agent_A" && slices.Equal(c.ServerURL, layered.List{"10.0.0.1:25551"}) && c.RunFolder == "/run/ankaios" &&
				!c.Insecure && slices.Equal(c.Runtimes, layered.List{"podman"}) &&
				maps.Equal(c.Tags, map[string]string{"cpu": "x86_64", "location": "front"}) &&
				c.tlsFiles() == rpc.TLSFiles{CA: ca, Cert: crt, Key: key}
		}},
		{name: "--agent-config as Ankaios; several servers", grapnel: absent, ankaios: absent, args: []string{"--agent-config", insecureConf},
			want: func(c config) bool {
				return c.Name == "agent_B" && c.Insecure && slices.Equal(c.ServerURL, layered.List{"a:1", "b:2"})
			}},
		{name: "a TOML file without extension", grapnel: absent, ankaios: absent, args: []string{"--config", sniffed},
			want: func(c config) bool { return c.Name == "agent_C" }},
		{name: "Ankaios default file when Grapnel's is absent", grapnel: absent, ankaios: insecureConf,
			want: func(c config) bool { return c.Name == "agent_B" }},
		{name: "Grapnel's default file when present", grapnel: grapnelYAML, ankaios: insecureConf,
			want: func(c config) bool { return c.Name == "from-yaml" && !c.Insecure }},
		{name: "every Ankaios runtime, containerd too", grapnel: absent, ankaios: mixed,
			want: func(c config) bool {
				return slices.Equal(c.Runtimes, layered.List{"containerd", "podman", "process", "podman-kube"})
			}},
		{name: "ANKAGENT_ over the Ankaios file", grapnel: absent, ankaios: full, env: map[string]string{"ANKAGENT_INSECURE": "true", "ANKAGENT_CA_PEM": ca2},
			want: func(c config) bool { return c.Insecure && c.CAPem == ca2 && c.Name == "agent_A" }},
		{name: "ANKAGENT_ over Grapnel's file", grapnel: grapnelYAML, ankaios: absent, env: map[string]string{"ANKAGENT_INSECURE": "true"},
			want: func(c config) bool { return c.Insecure && c.Name == "from-yaml" }},
		{name: "GRAPNEL_AGENT_ over ANKAGENT_", grapnel: absent, ankaios: full,
			env:  map[string]string{"ANKAGENT_INSECURE": "true", "GRAPNEL_AGENT_INSECURE": "false", "ANKAGENT_CRT_PEM": "/nope", "GRAPNEL_AGENT_CRT_PEM": ca2},
			want: func(c config) bool { return !c.Insecure && c.CrtPem == ca2 }},
		{name: "flags over GRAPNEL_AGENT_", grapnel: absent, ankaios: full, args: []string{"-k", "--key_pem", key, "-n", "cli", "-s", "c:1"},
			env: map[string]string{"GRAPNEL_AGENT_INSECURE": "false", "ANKAGENT_INSECURE": "false", "GRAPNEL_AGENT_KEY_PEM": "/g", "ANKAGENT_KEY_PEM": "/a"},
			want: func(c config) bool {
				return c.Insecure && c.KeyPem == key && c.Name == "cli" && slices.Equal(c.ServerURL, layered.List{"c:1"})
			}},
		{name: "PEM content", grapnel: absent, ankaios: content,
			want: func(c config) bool { return c.tlsFiles() == rpc.TLSFiles{CAPEM: "CA", CertPEM: "CRT", KeyPEM: "KEY"} }},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			withDefaultPaths(t, tt.grapnel, tt.ankaios)
			var stderr bytes.Buffer
			cfg, err := loadConfigTo(tt.args, env(tt.env), &bytes.Buffer{}, &stderr)
			if err != nil {
				t.Fatal(err)
			}
			if !tt.want(cfg) {
				t.Fatalf("config %+v", cfg)
			}
			if stderr.String() != tt.warning {
				t.Fatalf("stderr %q, want %q", stderr.String(), tt.warning)
			}
		})
	}
}

// A bad Ankaios file or variable stops the agent with the file, the key
// and the reason.
func TestAnkaiosAgentConfigRefusals(t *testing.T) {
	dir := t.TempDir()
	absent := filepath.Join(dir, "absent")
	bad := func(name, content string) string { return writeFile(t, name, content) }
	tests := []struct {
		name string
		args []string
		env  map[string]string
		want string
	}{
		{"unknown key", []string{"-x", bad("unknown.conf", "version = 'v1'\nname = 'a'\nrun_dir = '/x'\n")}, nil, "key 'run_dir': unknown key"},
		{"wrong type", []string{"-x", bad("type.conf", "version = 'v1'\nname = 'a'\nruntimes = 'podman'\n")}, nil,
			`key 'runtimes': expected an array of strings, got the string "podman"`},
		{"wrong type in the list", []string{"-x", bad("type2.conf", "version = 'v1'\nruntimes = ['podman', 1]\n")}, nil,
			"key 'runtimes': expected an array of strings, got the integer 1 at index 1"},
		{"wrong type of a tag", []string{"-x", bad("tags.conf", "version = 'v1'\ntags = { cores = 8 }\n")}, nil,
			"key 'tags': expected a table of strings, got the integer 8 for 'cores'"},
		{"unknown runtime", []string{"-x", bad("rt.conf", "version = 'v1'\nname = 'a'\nruntimes = ['docker']\n")}, nil,
			`key 'runtimes': unknown runtime "docker"`},
		{"no runtime", []string{"-x", bad("rt2.conf", "version = 'v1'\nname = 'a'\nruntimes = []\n")}, nil,
			"key 'runtimes': no runtime Grapnel has (process, podman, podman-kube, containerd) is listed"},
		{"no version", []string{"-x", bad("nover.conf", "name = 'a'\n")}, nil, "key 'version': missing"},
		{"malformed ANKAGENT_INSECURE", []string{"-n", "a"}, map[string]string{"ANKAGENT_INSECURE": "maybe"}, "ANKAGENT_INSECURE"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			withDefaultPaths(t, absent, absent)
			_, err := loadConfigTo(tt.args, env(tt.env), &bytes.Buffer{}, &bytes.Buffer{})
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Fatalf("err = %v, want it to contain %q", err, tt.want)
			}
			if len(tt.args) == 2 && tt.args[0] == "-x" && !strings.Contains(err.Error(), "Ankaios agent config "+tt.args[1]+": ") {
				t.Fatalf("err = %v does not name the file", err)
			}
		})
	}
}

// Requirement (issue 28, point 1): --version prints the release and the
// formats of the release, the same as grapnel-server's.
func TestVersion(t *testing.T) {
	var stdout bytes.Buffer
	if _, err := loadConfigTo([]string{"--version"}, env(nil), &stdout, &bytes.Buffer{}); !errors.Is(err, pflag.ErrHelp) {
		t.Fatal(err)
	}
	if err := versiontest.VersionOK("grapnel-agent", stdout.String()); err != nil {
		t.Fatalf("%v:\n%s", err, stdout.String())
	}
	if code := run([]string{"-V"}); code != 0 {
		t.Fatalf("exit code %d", code)
	}
}
