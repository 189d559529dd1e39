package layered

import (
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/spf13/pflag"
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
