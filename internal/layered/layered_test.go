package layered

import (
	"bytes"
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/spf13/pflag"

	"github.com/grapnel-io/grapnel/internal/ankconf"
)

type toy struct {
	Name  string            `yaml:"name"`
	On    bool              `yaml:"on"`
	N     int               `yaml:"n"`
	Wait  time.Duration     `yaml:"wait"`
	Peers List              `yaml:"peers"`
	Tags  map[string]string `yaml:"tags"`
}

func toySpec(path string) Spec[toy] {
	return Spec[toy]{
		Program: "toy", What: "toy config", Prefix: "TOY_", ConfigFlag: "config", ConfigShort: "x",
		ConfigAliases: []string{"toy-config"}, DefaultPath: path,
		Defaults: func() toy { return toy{Name: "default", N: 1, Peers: List{"d:1"}} },
		Options: []Option[toy]{
			Opt("name", "n", "NAME", "name", func(c *toy) any { return &c.Name }),
			Opt("on", "", "ON", "on", func(c *toy) any { return &c.On }),
			Opt("count", "", "N", "count", func(c *toy) any { return &c.N }),
			Opt("wait", "", "WAIT", "wait", func(c *toy) any { return &c.Wait }),
			Opt("peer", "", "PEERS", "peers", func(c *toy) any { return &c.Peers }),
			Opt("tag", "t", "TAGS", "tags", func(c *toy) any { return &c.Tags }),
		},
	}
}

// Each layer overrides the one before it, a list or map as a whole.
func TestLayersOverrideInOrder(t *testing.T) {
	dir := t.TempDir()
	file := filepath.Join(dir, "toy.yaml")
	if err := os.WriteFile(file, []byte("name: file\nn: 2\npeers: f:1, f:2\ntags: {a: b}\nwait: 2s\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	absent := filepath.Join(dir, "absent.yaml")
	cases := []struct {
		name string
		args []string
		env  map[string]string
		path string
		want func(c toy) bool
		err  string
	}{
		{"defaults, absent default file", nil, nil, absent, func(c toy) bool { return c.Name == "default" && c.N == 1 && slices.Equal(c.Peers, List{"d:1"}) }, ""},
		{"file", nil, nil, file, func(c toy) bool {
			return c.Name == "file" && c.N == 2 && slices.Equal(c.Peers, List{"f:1", "f:2"}) && c.Tags["a"] == "b" && c.Wait == 2*time.Second
		}, ""},
		{"file by variable", nil, map[string]string{"TOY_CONFIG": file}, absent, func(c toy) bool { return c.Name == "file" }, ""},
		{"file by alias", []string{"--toy-config", file}, nil, absent, func(c toy) bool { return c.Name == "file" }, ""},
		{"env over file", nil, map[string]string{"TOY_NAME": "env", "TOY_PEERS": "e:1,e:2", "TOY_ON": "true", "TOY_TAGS": "x=1,y=2"}, file, func(c toy) bool {
			return c.Name == "env" && c.On && slices.Equal(c.Peers, List{"e:1", "e:2"}) && len(c.Tags) == 2 && c.N == 2
		}, ""},
		{"flags over env", []string{"-n", "cli", "--peer", "c:1", "--peer", "c:2,c:3", "-t", "k=v", "--count", "9"}, map[string]string{"TOY_NAME": "env", "TOY_PEERS": "e:1"}, file, func(c toy) bool {
			return c.Name == "cli" && slices.Equal(c.Peers, List{"c:1", "c:2", "c:3"}) && len(c.Tags) == 1 && c.Tags["k"] == "v" && c.N == 9
		}, ""},
		{"named file missing", []string{"-x", absent}, nil, file, nil, "toy config " + absent},
		{"unknown key", nil, nil, writeFile(t, dir, "bad.yaml", "nmae: typo\n"), nil, "field nmae not found"},
		{"bad variable", nil, map[string]string{"TOY_WAIT": "soon"}, absent, nil, "TOY_WAIT"},
		{"bad tag", []string{"-t", "novalue"}, nil, absent, nil, "expected key=value"},
		{"stray argument", []string{"extra"}, nil, absent, nil, `unexpected argument "extra"`},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			got, err := Load(toySpec(c.path), c.args, func(k string) (string, bool) { v, ok := c.env[k]; return v, ok })
			if c.err != "" {
				if err == nil || !strings.Contains(err.Error(), c.err) {
					t.Fatalf("got %v, want an error containing %q", err, c.err)
				}
				return
			}
			if err != nil || !c.want(got) {
				t.Fatalf("got %+v, %v", got, err)
			}
		})
	}
}

func TestHelpIsErrHelp(t *testing.T) {
	_, err := Load(toySpec("/nonexistent"), []string{"--help"}, func(string) (string, bool) { return "", false })
	if !errors.Is(err, pflag.ErrHelp) {
		t.Fatalf("got %v", err)
	}
}

func writeFile(t *testing.T, dir, name, content string) string {
	t.Helper()
	p := filepath.Join(dir, name)
	if err := os.WriteFile(p, []byte(content), 0o600); err != nil {
		t.Fatal(err)
	}
	return p
}

// upstreamToy reads a toy "Ankaios" file: TOML with version and name.
func upstreamToy(path string, data []byte, c *toy) ([]string, error) {
	f, err := ankconf.Parse(ankconf.Format{What: "Ankaios toy config", Keys: []ankconf.Key{
		{Name: "name", Kind: ankconf.String}, {Name: "gone", Kind: ankconf.Any, Unsupported: "no such thing"},
	}}, path, data)
	if err != nil {
		return nil, err
	}
	if v, ok := f.String("name"); ok {
		c.Name = v
	}
	return f.Warnings, nil
}

// The Ankaios file stands in for an absent default file, a named file
// may be either, and the Ankaios variable comes in below Grapnel's.
func TestUpstreamLayers(t *testing.T) {
	dir := t.TempDir()
	yml := writeFile(t, dir, "toy.yaml", "name: yaml\n")
	up := writeFile(t, dir, "toy.conf", "version = 'v1'\nname = 'upstream'\ngone = 1\n")
	upNoExt := writeFile(t, dir, "toyconf", "version = 'v1'\nname = 'sniffed'\n")
	absent := filepath.Join(dir, "absent")
	badUp := writeFile(t, dir, "bad.conf", "version = 'v1'\nnmae = 'x'\n")
	spec := func(def, upstream string) Spec[toy] {
		s := toySpec(def)
		s.UpstreamPath, s.Upstream = upstream, upstreamToy
		s.Options[0] = s.Options[0].Upstream("ANKTOY_NAME")
		return s
	}
	cases := []struct {
		name          string
		def, upstream string
		args          []string
		env           map[string]string
		want          string // the name
		warnings      int
		err           string
	}{
		{"default file", yml, up, nil, nil, "yaml", 0, ""},
		{"upstream when the default is absent", absent, up, nil, nil, "upstream", 1, ""},
		{"neither", absent, absent, nil, nil, "default", 0, ""},
		{"named TOML file", yml, absent, []string{"-x", up}, nil, "upstream", 1, ""},
		{"named TOML file without extension", yml, absent, []string{"-x", upNoExt}, nil, "sniffed", 0, ""},
		{"named YAML file", absent, up, []string{"-x", yml}, nil, "yaml", 0, ""},
		{"upstream variable over the file", yml, up, nil, map[string]string{"ANKTOY_NAME": "ank"}, "ank", 0, ""},
		{"empty upstream variable is not set", yml, up, nil, map[string]string{"ANKTOY_NAME": ""}, "yaml", 0, ""},
		{"Grapnel variable over the upstream one", yml, up, nil, map[string]string{"ANKTOY_NAME": "ank", "TOY_NAME": "toy"}, "toy", 0, ""},
		{"flag over both", yml, up, []string{"-n", "cli"}, map[string]string{"ANKTOY_NAME": "ank", "TOY_NAME": "toy"}, "cli", 0, ""},
		{"bad upstream default file", absent, badUp, nil, nil, "", 0, "Ankaios toy config " + badUp + ": key 'nmae': unknown key"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			s := spec(c.def, c.upstream)
			var warnings []string
			s.Warn = func(w string) { warnings = append(warnings, w) }
			got, err := Load(s, c.args, func(k string) (string, bool) { v, ok := c.env[k]; return v, ok })
			if c.err != "" {
				if err == nil || !strings.Contains(err.Error(), c.err) {
					t.Fatalf("got %v, want %q", err, c.err)
				}
				return
			}
			if err != nil || got.Name != c.want || len(warnings) != c.warnings {
				t.Fatalf("got %q, %v, warnings %q", got.Name, err, warnings)
			}
			if c.warnings > 0 && !strings.Contains(warnings[0], "key 'gone' has no Grapnel equivalent") {
				t.Fatalf("warning %q", warnings[0])
			}
		})
	}
}

func TestVersionFlag(t *testing.T) {
	s := toySpec("/nonexistent")
	s.Version = func() string { return "toy 1.0" }
	var out bytes.Buffer
	s.Out = &out
	for _, flag := range []string{"--version", "-V"} {
		out.Reset()
		if _, err := Load(s, []string{flag}, func(string) (string, bool) { return "", false }); !errors.Is(err, ErrVersion) || !errors.Is(err, pflag.ErrHelp) || out.String() != "toy 1.0\n" {
			t.Fatalf("%s: %v, %q", flag, err, out.String())
		}
	}
	if _, err := Load(toySpec("/nonexistent"), []string{"--version"}, func(string) (string, bool) { return "", false }); err == nil {
		t.Fatal("--version without a Version was accepted")
	}
}
