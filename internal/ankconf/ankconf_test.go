package ankconf

import (
	"errors"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

var testFormat = Format{
	What: "test config",
	Keys: []Key{
		{Name: "s", Kind: String}, {Name: "b", Kind: Bool}, {Name: "n", Kind: Uint},
		{Name: "l", Kind: StringList}, {Name: "t", Kind: StringTable},
		{Name: "old", Kind: Any, Unsupported: "not here"},
		{Name: "p", Kind: String}, {Name: "p_content", Kind: String},
	},
	Section:   "default",
	Exclusive: [][2]string{{"p", "p_content"}},
}

func TestParse(t *testing.T) {
	f, err := Parse(testFormat, "t.conf", []byte(`version = "v1"
s = 'text'
n = 12
l = ["a", "b"]
t = { x = "1" }
old = [{ name = "h" }]
[default]
b = true
`))
	if err != nil {
		t.Fatal(err)
	}
	s, sok := f.String("s")
	b, bok := f.Bool("b")
	n, nok := f.Uint("n")
	l, lok := f.List("l")
	tb, tok := f.Table("t")
	if s != "text" || !sok || !b || !bok || n != 12 || !nok || !slices.Equal(l, []string{"a", "b"}) || !lok ||
		!maps.Equal(tb, map[string]string{"x": "1"}) || !tok {
		t.Fatalf("values %v", f.values)
	}
	if f.Has("old") || f.Has("p") || f.Has("version") {
		t.Fatal("Has is wrong")
	}
	if _, ok := f.String("n"); ok {
		t.Fatal("a number read as a string")
	}
	if len(f.Warnings) != 1 || f.Warnings[0] != "test config t.conf: key 'old' has no Grapnel equivalent and is ignored: not here" {
		t.Fatalf("warnings %q", f.Warnings)
	}
}

func TestParseRefusals(t *testing.T) {
	tests := []struct {
		name, data, key, reason string
	}{
		{"empty", "", "version", `missing: an Ankaios config file states version = "v1"`},
		{"version number", "version = 1", "version", `got the integer 1, the only version is "v1"`},
		{"unknown", "version = 'v1'\nz = 1", "z", "unknown key (known: version, s, b, n, l, t, old, p, p_content, [default])"},
		{"unknown in section", "version = 'v1'\n[default]\nz = 1", "z", "unknown key"},
		{"section not a table", "version = 'v1'\ndefault = 1", "default", "expected a table, got the integer 1"},
		{"twice", "version = 'v1'\nb = true\n[default]\nb = true", "default.b", "also given at the top level; give it once"},
		{"string", "version = 'v1'\ns = 1.5", "s", "expected a string, got the float 1.5"},
		{"bool", "version = 'v1'\nb = 'no'", "b", `expected a boolean (true or false), got the string "no"`},
		{"negative", "version = 'v1'\nn = -1", "n", "expected a whole number (0 or more), got -1"},
		{"date", "version = 'v1'\nn = 2026-01-01", "n", "expected a whole number (0 or more), got a date or time"},
		{"list", "version = 'v1'\nl = { a = 'b' }", "l", "expected an array of strings, got a table"},
		{"list item", "version = 'v1'\nl = ['a', true]", "l", "expected an array of strings, got the boolean true at index 1"},
		{"array of tables", "version = 'v1'\n[[l]]\na = 'b'", "l", "expected an array of strings, got a table at index 0"},
		{"table value", "version = 'v1'\nt = { a = ['b'] }", "t", "expected a table of strings, got an array for 'a'"},
		{"exclusive", "version = 'v1'\np = 'a'\n[default]\np_content = 'b'", "p_content", "p is given too; give either the file or its content"},
		{"syntax", "version = 'v1'\ns = ", "", "not valid TOML: line 2, column 4: expected value"},
		{"duplicate", "version = 'v1'\ns = 'a'\ns = 'b'", "", "not valid TOML: line 3, column 1: key s is already defined"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := Parse(testFormat, "/x/t.conf", []byte(tt.data))
			var e *Error
			if !errors.As(err, &e) || e.Key != tt.key || !strings.HasPrefix(e.Reason, tt.reason) || e.Path != "/x/t.conf" || e.What != "test config" {
				t.Fatalf("got %#v (%v), want key %q reason %q", e, err, tt.key, tt.reason)
			}
			want := "test config /x/t.conf: "
			if tt.key != "" {
				want += "key '" + tt.key + "': "
			}
			if !strings.HasPrefix(err.Error(), want+tt.reason) {
				t.Fatalf("message %q", err.Error())
			}
		})
	}
}

func TestRead(t *testing.T) {
	dir := t.TempDir()
	p := filepath.Join(dir, "ank.conf")
	if err := os.WriteFile(p, []byte("version = 'v1'\n[default]\ninsecure = true\nserver_url = 'http://a:1'\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	f, err := Read(CLI, p)
	if err != nil {
		t.Fatal(err)
	}
	if v, _ := f.Bool("insecure"); !v || f.Path != p {
		t.Fatalf("%+v", f)
	}
	if _, err := Read(CLI, filepath.Join(dir, "gone")); err == nil || !strings.HasPrefix(err.Error(), "Ankaios CLI config "+filepath.Join(dir, "gone")+": open ") {
		t.Fatalf("got %v", err)
	}
}

// Example files in the Ankaios format, one per program, each using every
// key; they are also the seeds of FuzzParse.
var examples = map[*Format]string{
	&Server: `version = 'v1'
startup_manifest = '/etc/ankaios/state.yaml'
address = '127.0.0.1:25551'
insecure = false
ca_pem = '/etc/ankaios/certs/ca.pem'
crt_pem = '/etc/ankaios/certs/ank-server.pem'
key_pem_content = '''-----BEGIN PRIVATE KEY-----
-----END PRIVATE KEY-----'''
[[mutating_hooks]]
name = 'h'
prio = 1
`,
	&Agent: `version = 'v1'
name = 'agent_A'
server_url = 'https://127.0.0.1:25551'
run_folder = '/tmp/ankaios/'
insecure = true
runtimes = [ "podman", "containerd" ]
tags = { "cpu" = "x86_64", "location" = "cloud" }
ca_pem_content = 'x'
crt_pem = 'c'
key_pem = 'k'
`,
	&CLI: `version = 'v1'
response_timeout = 3000
verbose = false
quiet = false
no_wait = false
[default]
server_url = 'https://127.0.0.1:25551'
insecure = false
ca_pem = '/etc/ankaios/certs/ca.pem'
crt_pem_content = 'c'
key_pem = 'k'
`,
}

func TestExamples(t *testing.T) {
	for f, data := range examples {
		file, err := Parse(*f, "x.conf", []byte(data))
		if err != nil {
			t.Fatalf("%s: %v", f.What, err)
		}
		for _, k := range f.Keys {
			if !file.Has(k.Name) && k.Unsupported == "" && !strings.HasSuffix(k.Name, "_pem") && !strings.HasSuffix(k.Name, "_content") {
				t.Errorf("%s: example lacks %s", f.What, k.Name)
			}
		}
	}
}

func TestIsTOML(t *testing.T) {
	tests := []struct {
		path, data string
		want       bool
	}{
		{"/etc/ankaios/ank-server.conf", "address: x", true},
		{"a.TOML", "", true},
		{"a.yaml", "version = 'v1'", false},
		{"a.yml", "[default]", false},
		{"cfg", "# comment\n\nversion = 'v1'\n", true},
		{"cfg", "  [default]\n", true},
		{"cfg", `"quoted key" = 1`, true},
		{"cfg", "a.b-c_d = 1", true},
		{"cfg", "address: 10.0.0.1:25551\n", false},
		{"cfg", "---\nname: x\n", false},
		{"cfg", "", false},
		{"cfg", "= 1", false},
		{"cfg", `"open = 1`, false},
		{"cfg", "- a = b", false},
		{"cfg", "name = x: y", true},
		{"cfg", "a . 'b' = 1", true},
		{"cfg", "a b = 1", false},
		{"cfg", "a.", false},
	}
	for _, tt := range tests {
		if got := IsTOML(tt.path, []byte(tt.data)); got != tt.want {
			t.Errorf("IsTOML(%q, %q) = %v", tt.path, tt.data, got)
		}
	}
}
