package workloadpolicy

import (
	"errors"
	"slices"
	"strings"
	"testing"

	"github.com/spf13/pflag"
)

// recorder is a pflag value that logs every value pflag sets.
type recorder struct {
	name string
	log  *[]string
}

func (r recorder) String() string { return "" }
func (r recorder) Type() string   { return "string" }
func (r recorder) Set(v string) error {
	*r.log = append(*r.log, r.name+"="+v)
	return nil
}

// pflagRead parses items with spf13/pflag itself, set up with the
// table's options as podman sets up its own.
func pflagRead(t optionTable, items []string) (log, args []string, err error) {
	fs := pflag.NewFlagSet("podman", pflag.ContinueOnError)
	fs.SetInterspersed(false)
	fs.SetOutput(discard{})
	fs.SetNormalizeFunc(func(_ *pflag.FlagSet, name string) pflag.NormalizedName {
		if a, ok := t.aliases[name]; ok {
			name = a
		}
		return pflag.NormalizedName(name)
	})
	for _, o := range t.long {
		short := ""
		if o.short != 0 {
			short = string(o.short)
		}
		f := fs.VarPF(recorder{name: o.long, log: &log}, o.long, short, "")
		if o.kind == boolOpt {
			f.NoOptDefVal = "true"
		}
	}
	err = fs.Parse(items)
	return log, fs.Args(), err
}

type discard struct{}

func (discard) Write(p []byte) (int, error) { return len(p), nil }

// FuzzReadFlags compares the policy's reading of podman options with
// pflag's, which podman uses: the same options with the same values,
// and a stop exactly where pflag stops or fails.
func FuzzReadFlags(f *testing.F) {
	for _, s := range []string{
		"--env\x00--privileged", "-itv\x00/:/h", "-itv/:/h", "-v=/x:/y", "-t=false", "-t=",
		"--privileged\x00false", "--net=host", "--rm\x00--\x00--privileged", "-", "--volume", "-e",
		"--=x", "-ep\x00x", "---x", "--no-such\x00x", "-Z", "-u0:0", "--user=1000", "-tie--privileged",
		"--cap-add\x00SYS_ADMIN\x00-p\x0080:80", "--healthcheck-command\x00x", "-h\x00host", "--help",
		"--dns-opt=x\x00--privileged=1\x00alpine\x00sh",
	} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, in string) {
		items := strings.Split(in, "\x00")
		for _, table := range []optionTable{runOptions, globalOptions, playOptions} {
			occs, st := readFlags(table, "f", items)
			var mine []string
			for _, o := range occs {
				mine = append(mine, o.opt.long+"="+o.value)
				if o.index < 0 || o.index >= len(items) {
					t.Fatalf("%q: occurrence index %d out of range", items, o.index)
				}
			}
			theirs, args, err := pflagRead(table, items)
			switch {
			case st == nil:
				if err != nil || len(args) != 0 {
					t.Fatalf("%q: the policy read every item, pflag: %v, args %q", items, err, args)
				}
			case st.positional:
				rest := items[st.index:]
				if rest[0] == "--" {
					rest = rest[1:]
				}
				if err != nil || !slices.Equal(args, rest) {
					t.Fatalf("%q: the policy stopped at item %d, pflag: %v, args %q", items, st.index, err, args)
				}
			default:
				if err == nil {
					t.Fatalf("%q: the policy stopped at item %d (%s), pflag read it all: %q", items, st.index, st.reason, theirs)
				}
				// pflag sets the options before the one it fails on.
				theirs = theirs[:min(len(theirs), len(mine))]
			}
			if !slices.Equal(mine, theirs) {
				t.Fatalf("%q: the policy read %q, pflag %q", items, mine, theirs)
			}
		}
	})
}

// FuzzInspect: any runtimeConfig is read or refused with a field, never
// a panic, and the levels nest: what restricted admits baseline does,
// and what baseline admits privileged does.
func FuzzInspect(f *testing.F) {
	for _, s := range []string{
		podman(`"--privileged"`), podman(`"-v", "/:/host"`), podman(restrictedOpts), podman(`"--mount=type=volume,src=x,dst=/y"`),
		podmanGeneral(`"--root=/x"`), "image: docker-archive:/x", "command: sleep\nuser: root", "command: sleep\nuser: [x]",
		kube(restrictedPod), kube("kind: Pod\nspec:\n  hostNetwork: yes\n  volumes: [{name: r, hostPath: {path: /}}]"),
		"playOptions: [--configmap, x]\nmanifest: \"kind: Deployment\\nspec: {template: {spec: {hostPID: true}}}\"",
		"a: &x [1]\nb: *x", "[", "",
	} {
		for _, rt := range []string{"process", "podman", "podman-kube"} {
			f.Add(rt, s)
		}
	}
	f.Fuzz(func(t *testing.T, runtime, config string) {
		prof, err := Inspect(runtime, config)
		if err != nil {
			var pe *ParseError
			if !errors.As(err, &pe) || !strings.HasPrefix(pe.Field, "runtimeConfig") {
				t.Fatalf("Inspect error %v names no field", err)
			}
		} else {
			for _, s := range prof.Settings {
				if !strings.HasPrefix(s.Field, "runtimeConfig") || s.Key == "" || !s.Narrows && s.Reason == "" {
					t.Fatalf("setting %+v lacks a field, a key or a reason", s)
				}
			}
		}
		admitted := map[Level]bool{}
		for _, l := range Levels {
			err := Policy{Level: l}.Check("w", runtime, config)
			admitted[l] = err == nil
			var r *Refusal
			if err != nil && (!errors.As(err, &r) || !strings.HasPrefix(r.Path, "w.runtimeConfig")) {
				t.Fatalf("%s: refusal %v names no field", l, err)
			}
		}
		if admitted[Restricted] && !admitted[Baseline] || admitted[Baseline] && !admitted[Privileged] {
			t.Fatalf("the levels do not nest: %v", admitted)
		}
	})
}
