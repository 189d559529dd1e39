package servercmd

import (
	"bytes"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/grapnel-io/grapnel/cmd/internal/versiontest"

	"github.com/spf13/pflag"

	"github.com/grapnel-io/grapnel/internal/buildinfo"
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

func put(t *testing.T, dir, name, content string, perm os.FileMode) string {
	t.Helper()
	p := filepath.Join(dir, name)
	if err := os.WriteFile(p, []byte(content), perm); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(p, perm); err != nil {
		t.Fatal(err)
	}
	return p
}

// An Ankaios server config file and the ANKSERVER_ variables configure
// the server: flags > GRAPNEL_SERVER_* > ANKSERVER_* > Grapnel's file >
// the Ankaios file > defaults.
func TestAnkaiosServerConfig(t *testing.T) {
	dir := t.TempDir()
	ca, crt, key := put(t, dir, "ca.pem", "x", 0o644), put(t, dir, "crt.pem", "x", 0o644), put(t, dir, "key.pem", "x", 0o600)
	ca2 := put(t, dir, "ca2.pem", "x", 0o644)
	full := put(t, dir, "ank-server.conf", `# an Ankaios server
version = 'v1'
startup_manifest = '/etc/ankaios/state.yaml'
address = '10.0.0.1:25551'
insecure = false
ca_pem = '`+ca+`'
crt_pem = '`+crt+`'
key_pem = '`+key+`'
`, 0o600)
	insecureConf := put(t, dir, "insecure.toml", "version = \"v1\"\ninsecure = true\naddress = \"10.0.0.2:1\"\n", 0o600)
	sniffed := put(t, dir, "server-config", "\n# no extension\nversion = \"v1\"\ninsecure = true\naddress = \"10.0.0.3:1\"\n", 0o600)
	hooks := put(t, dir, "hooks.conf", "version = 'v1'\ninsecure = true\n[[mutating_hooks]]\nname = 'h'\nprio = 10\n", 0o600)
	content := put(t, dir, "content.conf", "version = 'v1'\nca_pem_content = 'CA'\ncrt_pem_content = 'CRT'\nkey_pem_content = 'KEY'\n", 0o600)
	grapnelYAML := put(t, dir, "server.yaml", "insecure: false\nname: from-yaml\nca_pem: "+ca+"\ncrt_pem: "+crt+"\nkey_pem: "+key+"\n", 0o600)
	absent := filepath.Join(dir, "absent")

	tests := []struct {
		name             string
		grapnel, ankaios string // the default files
		args             []string
		env              map[string]string
		want             func(c config) bool
		warning          string // on stderr
	}{
		{name: "-x Ankaios file", grapnel: absent, ankaios: absent, args: []string{"-x", full}, want: func(c config) bool {
			return c.StartupManifest == "/etc/ankaios/state.yaml" && c.Address == "10.0.0.1:25551" && !c.Insecure &&
				c.tlsFiles() == rpc.TLSFiles{CA: ca, Cert: crt, Key: key}
		}},
		{name: "--server-config .toml", grapnel: absent, ankaios: absent, args: []string{"--server-config", insecureConf},
			want: func(c config) bool { return c.Insecure && c.Address == "10.0.0.2:1" }},
		{name: "a TOML file without extension, from the variable", grapnel: absent, ankaios: absent,
			env: map[string]string{"GRAPNEL_SERVER_CONFIG": sniffed}, want: func(c config) bool { return c.Insecure && c.Address == "10.0.0.3:1" }},
		{name: "Ankaios default file when Grapnel's is absent", grapnel: absent, ankaios: insecureConf,
			want: func(c config) bool { return c.Insecure && c.Address == "10.0.0.2:1" }},
		{name: "Grapnel's default file when present", grapnel: grapnelYAML, ankaios: insecureConf,
			want: func(c config) bool { return !c.Insecure && c.Name == "from-yaml" && c.Address == "127.0.0.1:25551" }},
		{name: "neither default file", grapnel: absent, ankaios: absent, args: []string{"-k"},
			want: func(c config) bool { return c.Insecure && c.Address == "127.0.0.1:25551" }},
		{name: "ANKSERVER_ over the Ankaios file", grapnel: absent, ankaios: full,
			env:  map[string]string{"ANKSERVER_INSECURE": "true", "ANKSERVER_CA_PEM": ca2},
			want: func(c config) bool { return c.Insecure && c.CAPem == ca2 && c.CrtPem == crt }},
		{name: "ANKSERVER_ over Grapnel's file", grapnel: grapnelYAML, ankaios: absent,
			env:  map[string]string{"ANKSERVER_INSECURE": "1"},
			want: func(c config) bool { return c.Insecure && c.Name == "from-yaml" }},
		{name: "GRAPNEL_SERVER_ over ANKSERVER_", grapnel: absent, ankaios: full,
			env: map[string]string{"ANKSERVER_INSECURE": "true", "GRAPNEL_SERVER_INSECURE": "false",
				"ANKSERVER_KEY_PEM": "/nope", "GRAPNEL_SERVER_KEY_PEM": key, "ANKSERVER_CRT_PEM": ca2},
			want: func(c config) bool { return !c.Insecure && c.KeyPem == key && c.CrtPem == ca2 && c.CAPem == ca }},
		{name: "flags over GRAPNEL_SERVER_", grapnel: absent, ankaios: full, args: []string{"--ca_pem", ca, "--insecure=false"},
			env:  map[string]string{"GRAPNEL_SERVER_CA_PEM": ca2, "ANKSERVER_CA_PEM": ca2, "GRAPNEL_SERVER_INSECURE": "true"},
			want: func(c config) bool { return !c.Insecure && c.CAPem == ca }},
		{name: "ANKSERVER_SERVER_URL is the address", grapnel: absent, ankaios: full, env: map[string]string{"ANKSERVER_SERVER_URL": "10.0.0.9:2"},
			want: func(c config) bool { return c.Address == "10.0.0.9:2" }},
		{name: "the Ankaios server's older flag names", grapnel: absent, ankaios: absent, args: []string{"-k", "-c", "/a.yaml"},
			want: func(c config) bool { return c.StartupManifest == "/a.yaml" }},
		{name: "--startup-config", grapnel: absent, ankaios: absent, args: []string{"-k", "--startup-config", "/b.yaml"},
			want: func(c config) bool { return c.StartupManifest == "/b.yaml" }},
		{name: "an empty ANKSERVER_ variable is not set", grapnel: absent, ankaios: full, env: map[string]string{"ANKSERVER_CA_PEM": "", "ANKSERVER_INSECURE": ""},
			want: func(c config) bool { return !c.Insecure && c.CAPem == ca }},
		{name: "mutating hooks: a warning", grapnel: absent, ankaios: absent, args: []string{"-x", hooks},
			want:    func(c config) bool { return c.Insecure },
			warning: "grapnel-server: warning: Ankaios server config " + hooks + ": key 'mutating_hooks' has no Grapnel equivalent and is ignored: Grapnel runs no mutating hooks"},
		{name: "PEM content", grapnel: absent, ankaios: content, want: func(c config) bool {
			return !c.Insecure && c.tlsFiles() == rpc.TLSFiles{CAPEM: "CA", CertPEM: "CRT", KeyPEM: "KEY"}
		}},
		{name: "a path from a variable with the file's content", grapnel: absent, ankaios: content, env: map[string]string{"ANKSERVER_CA_PEM": ca},
			want: func(c config) bool {
				return c.tlsFiles() == rpc.TLSFiles{CA: ca, CAPEM: "CA", CertPEM: "CRT", KeyPEM: "KEY"}
			}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			withDefaultPaths(t, tt.grapnel, tt.ankaios)
			var stdout, stderr bytes.Buffer
			cfg, err := loadConfigTo(tt.args, env(tt.env), &stdout, &stderr)
			if err != nil {
				t.Fatal(err)
			}
			if !tt.want(cfg) {
				t.Fatalf("config %+v", cfg)
			}
			if tt.warning == "" && stderr.Len() > 0 || !strings.HasPrefix(stderr.String(), tt.warning) || strings.Count(stderr.String(), "\n") > 1 {
				t.Fatalf("stderr %q, want %q", stderr.String(), tt.warning)
			}
		})
	}
}

// A bad Ankaios file or variable stops the server with the file, the key
// and the reason.
func TestAnkaiosServerConfigRefusals(t *testing.T) {
	dir := t.TempDir()
	bad := func(name, content string) string { return put(t, dir, name, content, 0o600) }
	absent := filepath.Join(dir, "absent")
	brokenDefault := bad("default.conf", "version = 'v1'\nport = 1\n")
	tests := []struct {
		name    string
		ankaios string
		args    []string
		env     map[string]string
		want    string
	}{
		{"unknown key", absent, []string{"-x", bad("unknown.conf", "version = 'v1'\ninsecure = true\nadress = 'x:1'\n")}, nil,
			"Ankaios server config " + filepath.Join(dir, "unknown.conf") + ": key 'adress': unknown key (known: version, startup_manifest, address,"},
		{"wrong type", absent, []string{"-x", bad("type.conf", "version = 'v1'\naddress = 25551\n")}, nil,
			"Ankaios server config " + filepath.Join(dir, "type.conf") + ": key 'address': expected a string, got the integer 25551"},
		{"wrong type of a bool", absent, []string{"-x", bad("bool.conf", "version = 'v1'\ninsecure = 'true'\n")}, nil,
			`key 'insecure': expected a boolean (true or false), got the string "true"`},
		{"no version", absent, []string{"-x", bad("nover.conf", "insecure = true\n")}, nil, "key 'version': missing"},
		{"version 2", absent, []string{"-x", bad("v2.conf", "version = 'v2'\n")}, nil, `key 'version': got the string "v2"`},
		{"path and content", absent, []string{"-x", bad("both.conf", "version = 'v1'\nkey_pem = '/k'\nkey_pem_content = 'K'\n")}, nil,
			"key 'key_pem_content': key_pem is given too"},
		{"not TOML", absent, []string{"-x", bad("broken.conf", "version = 'v1\n")}, nil,
			"Ankaios server config " + filepath.Join(dir, "broken.conf") + ": not valid TOML: line 1"},
		{"broken default file", brokenDefault, []string{"-k"}, nil,
			"Ankaios server config " + brokenDefault + ": key 'port': unknown key"},
		{"malformed ANKSERVER_INSECURE", absent, nil, map[string]string{"ANKSERVER_INSECURE": "maybe"}, `ANKSERVER_INSECURE: "maybe" is not a boolean`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			withDefaultPaths(t, absent, tt.ankaios)
			_, err := loadConfigTo(tt.args, env(tt.env), &bytes.Buffer{}, &bytes.Buffer{})
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Fatalf("err = %v, want it to contain %q", err, tt.want)
			}
		})
	}
}

// Requirement (issue 28, point 1): --version prints the release and the
// formats the build understands.
func TestVersion(t *testing.T) {
	for _, flag := range []string{"--version", "-V"} {
		var stdout bytes.Buffer
		_, err := loadConfigTo([]string{flag}, env(nil), &stdout, &bytes.Buffer{})
		if !errors.Is(err, layered.ErrVersion) || !errors.Is(err, pflag.ErrHelp) {
			t.Fatalf("%s: %v", flag, err)
		}
		if err := versiontest.VersionOK("grapnel-server", stdout.String()); err != nil {
			t.Fatalf("%s: %v:\n%s", flag, err, stdout.String())
		}
	}
	if version != buildinfo.Version {
		t.Fatalf("gossip version %q", version)
	}
}
