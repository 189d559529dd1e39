package main

import (
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/grapnel-io/grapnel/cmd/internal/versiontest"

	"github.com/grapnel-io/grapnel/cli"
	"github.com/grapnel-io/grapnel/rpc"
)

func writeConf(t *testing.T, dir, name, content string) string {
	t.Helper()
	p := filepath.Join(dir, name)
	if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(p, []byte(content), 0o600); err != nil {
		t.Fatal(err)
	}
	return p
}

// The Ankaios CLI config file and the ANK_ variables come in below
// Grapnel's variables and the flags: flags > GRAPNEL_* > ANK_* > ank.conf
// > defaults.
func TestAnkaiosCLIConfig(t *testing.T) {
	dir := t.TempDir()
	full := writeConf(t, dir, "full.conf", `version = "v1"
response_timeout = 700
verbose = true
quiet = true
no_wait = true

[default]
server_url = "https://f:1"
insecure = false
ca_pem = "/f/ca.pem"
crt_pem = "/f/crt.pem"
key_pem = "/f/key.pem"
`)
	insecure := writeConf(t, dir, "insecure.conf", "version = 'v1'\n[default]\nserver_url = 'http://i:2'\ninsecure = true\n")
	content := writeConf(t, dir, "content.conf", "version = 'v1'\nca_pem_content = 'CA'\ncrt_pem_content = 'CRT'\nkey_pem_content = '''KEY'''\n")
	home := t.TempDir()
	writeConf(t, home, ".config/ankaios/ank.conf", "version = 'v1'\nserver_url = 'user:3'\ninsecure = true\n")
	brokenHome := t.TempDir()
	brokenUser := writeConf(t, brokenHome, ".config/ankaios/ank.conf", "version = 'v1'\nserver-url = 'x:1'\n")
	grapnelYAML := writeConf(t, dir, "cli.yaml", "server_url: y:4\ninsecure: true\nresponse_timeout: 900\n")
	bothHome := t.TempDir()
	writeConf(t, bothHome, ".config/grapnel/cli.yaml", "server_url: own:5\ninsecure: true\n")
	writeConf(t, bothHome, ".config/ankaios/ank.conf", "version = 'v1'\nserver_url = 'user:3'\ninsecure = true\n")
	fileTLS := rpc.TLSFiles{CA: "/f/ca.pem", Cert: "/f/crt.pem", Key: "/f/key.pem"}
	bad := func(name, content string) string { return writeConf(t, dir, name, content) }

	type want struct {
		addrs    []string
		insecure bool
		tls      rpc.TLSFiles
		timeout  time.Duration
		verbose  bool
		quiet    bool
		noWait   bool
	}
	tests := []struct {
		name   string
		env    map[string]string
		system string // /etc/ankaios/ank.conf; "" absent
		args   []string
		want   want
		err    string // on stderr; "" the dial was reached
	}{
		{name: "-x file, [default] and top-level keys", args: []string{"-x", full, "get", "state"},
			want: want{addrs: []string{"f:1"}, tls: fileTLS, timeout: 700 * time.Millisecond, verbose: true, quiet: true, noWait: true}},
		{name: "--ank-config", args: []string{"--ank-config", insecure, "get", "state"},
			want: want{addrs: []string{"i:2"}, insecure: true, timeout: 3 * time.Second}},
		{name: "-x after the subcommand", args: []string{"get", "state", "-x", insecure},
			want: want{addrs: []string{"i:2"}, insecure: true, timeout: 3 * time.Second}},
		{name: "system file when there is no user file", system: insecure, args: []string{"get", "state"},
			want: want{addrs: []string{"i:2"}, insecure: true, timeout: 3 * time.Second}},
		{name: "user file before the system file", env: map[string]string{"HOME": home}, system: full, args: []string{"get", "state"},
			want: want{addrs: []string{"user:3"}, insecure: true, timeout: 3 * time.Second}},
		{name: "-x over the default files", env: map[string]string{"HOME": home}, system: full, args: []string{"-x", insecure, "get", "state"},
			want: want{addrs: []string{"i:2"}, insecure: true, timeout: 3 * time.Second}},
		{name: "ANK_ variables over the file", env: map[string]string{"ANK_SERVER_URL": "http://ank:9", "ANK_INSECURE": "true", "ANK_CA_PEM": "/a/ca"},
			args: []string{"-x", full, "get", "state"},
			// Insecure: the PEM files are not used.
			want: want{addrs: []string{"ank:9"}, insecure: true, timeout: 700 * time.Millisecond, verbose: true, quiet: true, noWait: true}},
		{name: "ANK_ PEM path over the file's", env: map[string]string{"ANK_CA_PEM": "/a/ca"}, args: []string{"-x", full, "get", "state"},
			want: want{addrs: []string{"f:1"}, tls: rpc.TLSFiles{CA: "/a/ca", Cert: "/f/crt.pem", Key: "/f/key.pem"},
				timeout: 700 * time.Millisecond, verbose: true, quiet: true, noWait: true}},
		{name: "ANK_ variables alone", env: map[string]string{"ANK_SERVER_URL": "ank:9", "ANK_CA_PEM": "c", "ANK_CRT_PEM": "r", "ANK_KEY_PEM": "k"},
			args: []string{"get", "state"}, want: want{addrs: []string{"ank:9"}, tls: rpc.TLSFiles{CA: "c", Cert: "r", Key: "k"}, timeout: 3 * time.Second}},
		{name: "GRAPNEL_ over ANK_", env: map[string]string{"ANK_SERVER_URL": "ank:9", envServerURL: "g:8", "ANK_INSECURE": "true", envInsecure: "false",
			"ANK_KEY_PEM": "/a/key", envKeyPem: "/g/key"},
			args: []string{"-x", full, "get", "state"},
			want: want{addrs: []string{"g:8"}, tls: rpc.TLSFiles{CA: "/f/ca.pem", Cert: "/f/crt.pem", Key: "/g/key"},
				timeout: 700 * time.Millisecond, verbose: true, quiet: true, noWait: true}},
		{name: "an empty variable is not set", env: map[string]string{"ANK_SERVER_URL": "", envServerURL: "", "ANK_INSECURE": ""},
			args: []string{"-x", insecure, "get", "state"}, want: want{addrs: []string{"i:2"}, insecure: true, timeout: 3 * time.Second}},
		{name: "flags over everything", env: map[string]string{"ANK_SERVER_URL": "ank:9", envServerURL: "g:8", "ANK_INSECURE": "true", envInsecure: "true"},
			args: []string{"-x", full, "-s", "cli:7", "--insecure=false", "--response-timeout", "50", "--verbose=false", "--quiet=false", "--no-wait=false", "get", "state"},
			want: want{addrs: []string{"cli:7"}, tls: fileTLS, timeout: 50 * time.Millisecond}},
		{name: "local --server-url over the file", args: []string{"-x", insecure, "logs", "--server-url", "l:6", "wl"},
			want: want{addrs: []string{"l:6"}, insecure: true, timeout: 3 * time.Second}},
		{name: "PEM content", args: []string{"-x", content, "get", "state"},
			want: want{addrs: []string{"127.0.0.1:25551"}, tls: rpc.TLSFiles{CAPEM: "CA", CertPEM: "CRT", KeyPEM: "KEY"}, timeout: 3 * time.Second}},
		{name: "a path from a variable goes with the file's content (the path wins)", env: map[string]string{"ANK_CA_PEM": "/a/ca"},
			args: []string{"-x", content, "get", "state"},
			want: want{addrs: []string{"127.0.0.1:25551"}, tls: rpc.TLSFiles{CA: "/a/ca", CAPEM: "CA", CertPEM: "CRT", KeyPEM: "KEY"}, timeout: 3 * time.Second}},

		{name: "-x Grapnel YAML", args: []string{"-x", grapnelYAML, "get", "state"},
			want: want{addrs: []string{"y:4"}, insecure: true, timeout: 900 * time.Millisecond}},
		{name: "Grapnel's own file before the Ankaios one", env: map[string]string{"HOME": bothHome}, args: []string{"get", "state"},
			want: want{addrs: []string{"own:5"}, insecure: true, timeout: 3 * time.Second}},
		{name: "YAML unknown key", args: []string{"-x", bad("u.yaml", "server-url: x:1\n"), "get", "state"},
			err: "error: grapnel CLI config " + filepath.Join(dir, "u.yaml") + ": key 'server-url': unknown key (known: version, response_timeout,"},
		{name: "YAML wrong type", args: []string{"-x", bad("t.yaml", "insecure: [1]\n"), "get", "state"},
			err: "key 'insecure': expected a boolean (true or false), got an array"},
		{name: "YAML not YAML", args: []string{"-x", bad("n.yaml", "a: [\n"), "get", "state"},
			err: "error: grapnel CLI config " + filepath.Join(dir, "n.yaml") + ": not valid YAML"},
		{name: "malformed ANK_INSECURE", env: map[string]string{"ANK_INSECURE": "maybe"}, args: []string{"get", "state"},
			err: "error: ANK_INSECURE: 'maybe' is not a boolean"},
		{name: "unknown key", args: []string{"-x", bad("unknown.conf", "version = 'v1'\n[default]\nserver = 'x:1'\n"), "get", "state"},
			err: "error: Ankaios CLI config " + filepath.Join(dir, "unknown.conf") + ": key 'server': unknown key (known: version, response_timeout,"},
		{name: "another context table", args: []string{"-x", bad("ctx.conf", "version = 'v1'\n[other]\ninsecure = true\n"), "get", "state"},
			err: "key 'other': unknown key"},
		{name: "wrong type", args: []string{"-x", bad("type.conf", "version = 'v1'\nresponse_timeout = '3s'\n"), "get", "state"},
			err: `key 'response_timeout': expected a whole number (0 or more), got the string "3s"`},
		{name: "wrong type in [default]", args: []string{"-x", bad("type2.conf", "version = 'v1'\n[default]\ninsecure = 'yes'\n"), "get", "state"},
			err: `key 'insecure': expected a boolean (true or false), got the string "yes"`},
		{name: "zero timeout", args: []string{"-x", bad("zero.conf", "version = 'v1'\nresponse_timeout = 0\n"), "get", "state"},
			err: "key 'response_timeout': 0: must be a positive number of milliseconds"},
		{name: "no version", args: []string{"-x", bad("nover.conf", "insecure = true\n"), "get", "state"},
			err: `key 'version': missing: an Ankaios config file states version = "v1"`},
		{name: "other version", args: []string{"-x", bad("v2.conf", "version = 'v2'\n"), "get", "state"},
			err: `key 'version': got the string "v2", the only version is "v1"`},
		{name: "key twice", args: []string{"-x", bad("twice.conf", "version = 'v1'\ninsecure = true\n[default]\ninsecure = false\n"), "get", "state"},
			err: "key 'default.insecure': also given at the top level"},
		{name: "path and content", args: []string{"-x", bad("both.conf", "version = 'v1'\nca_pem = 'a'\nca_pem_content = 'b'\n"), "get", "state"},
			err: "key 'ca_pem_content': ca_pem is given too"},
		{name: "not TOML", args: []string{"-x", bad("yaml.conf", "server_url: x\n"), "get", "state"},
			err: "error: Ankaios CLI config " + filepath.Join(dir, "yaml.conf") + ": not valid TOML: line 1, column"},
		{name: "named file missing", args: []string{"-x", filepath.Join(dir, "gone.conf"), "get", "state"},
			err: "error: Ankaios CLI config " + filepath.Join(dir, "gone.conf") + ": open "},
		{name: "broken default file", env: map[string]string{"HOME": brokenHome}, args: []string{"-k", "get", "state"},
			err: "error: Ankaios CLI config " + brokenUser + ": key 'server-url': unknown key"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			system := tt.system
			if system == "" {
				system = filepath.Join(dir, "absent-system.conf")
			}
			inv := invokeSys(t, tt.env, system, tt.args...)
			if inv.code != exitError {
				t.Fatalf("exit code %d", inv.code)
			}
			if tt.err != "" {
				if !strings.Contains(inv.stderr, tt.err) || strings.Count(inv.stderr, "\n") != 1 || inv.dialed != nil {
					t.Fatalf("stderr %q (dialed %v), want one line with %q", inv.stderr, inv.dialed != nil, tt.err)
				}
				return
			}
			if inv.dialed == nil {
				t.Fatalf("never dialed; stderr %q", inv.stderr)
			}
			o, g := inv.dialed, inv.app.global
			got := want{addrs: o.Addrs, insecure: o.Insecure, tls: o.TLS, timeout: o.ResponseTimeout, verbose: g.Verbose, quiet: g.Quiet, noWait: g.NoWait}
			if !reflect.DeepEqual(got, tt.want) {
				t.Fatalf("got  %+v\nwant %+v", got, tt.want)
			}
		})
	}
}

// An -x file given with a -s before the subcommand: the -s is still the
// server, and logs -s is still --since.
func TestAnkConfigWithGlobalS(t *testing.T) {
	conf := writeConf(t, t.TempDir(), "ank.conf", "version = 'v1'\ninsecure = true\n")
	inv := invoke(t, nil, "-x", conf, "-s", "a:1", "logs", "wl", "-s", "2026-01-01T00:00:00Z")
	if inv.dialed == nil || !reflect.DeepEqual(inv.dialed.Addrs, []string{"a:1"}) || !inv.dialed.Insecure || inv.app.logs.Since != "2026-01-01T00:00:00Z" {
		t.Fatalf("dialed %+v, since %q; stderr %q", inv.dialed, inv.app.logs.Since, inv.stderr)
	}
}

// Requirement (issue 28, point 1): --version prints the release and the
// formats of the release, the same as grapnel-server's.
func TestVersion(t *testing.T) {
	for _, args := range [][]string{{"--version"}, {"-V"}} {
		inv := invoke(t, map[string]string{"ANK_INSECURE": "maybe"}, args...)
		if inv.code != exitOK || inv.stderr != "" || inv.dialed != nil {
			t.Fatalf("%v: exit %d, stdout %q, stderr %q", args, inv.code, inv.stdout, inv.stderr)
		}
		if err := versiontest.VersionOK("grapnel", inv.stdout); err != nil {
			t.Fatalf("%v: %v:\n%s", args, err, inv.stdout)
		}
	}
}

// ClientOptions counts PEM content as given.
func TestClientOptionsPEMContent(t *testing.T) {
	g := cli.GlobalOptions{ServerURL: "a:1", CAPemContent: "CA", CrtPem: "/crt", KeyPemContent: "KEY"}
	o, _, err := g.ClientOptions()
	if err != nil || o.TLS != (rpc.TLSFiles{CAPEM: "CA", Cert: "/crt", KeyPEM: "KEY"}) {
		t.Fatalf("%+v, %v", o.TLS, err)
	}
	g.CrtPem = ""
	if _, _, err := g.ClientOptions(); err == nil || !strings.Contains(err.Error(), "--crt_pem not given") {
		t.Fatalf("got %v", err)
	}
}
