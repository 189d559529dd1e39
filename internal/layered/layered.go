// Package layered loads a program's settings from layers, each
// overriding the one before: the defaults, a config file (Grapnel's YAML
// or, in its place, the Ankaios TOML file), the Ankaios environment
// variables, Grapnel's environment variables and the command line.
// grapnel-server and grapnel-agent describe their settings as Options and
// share this loader, so both programs treat files, variables and flags
// the same way.
//
// A setting is a field of the program's config struct: the file uses the
// field's yaml tag, the environment Prefix+Option.Env (and, for some,
// Option.UpstreamEnv, the Ankaios name), the command line Option.Flag. A
// list or a map given in a later layer replaces the earlier value as a
// whole.
package layered

import (
	"errors"
	"fmt"
	"io"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/spf13/pflag"
	"gopkg.in/yaml.v3"

	"github.com/grapnel-io/grapnel/internal/ankconf"
)

// ErrVersion is returned by Load after it printed the version for
// --version; it wraps pflag.ErrHelp, so a program that exits quietly on
// --help does so on --version too.
var ErrVersion = fmt.Errorf("version printed: %w", pflag.ErrHelp)

// Option ties one setting to its flag and environment variable. Value
// returns a pointer to the field in a config: *string, *bool, *int,
// *time.Duration, *List or *map[string]string.
type Option[T any] struct {
	Flag, Short, Env, Usage string
	// UpstreamEnv is the whole name of the Ankaios variable with the same
	// meaning ("ANKSERVER_CA_PEM"), or "". It is read below Prefix+Env,
	// and an empty value counts as not set.
	UpstreamEnv string
	// Aliases are other names of the flag (the Ankaios program's older
	// ones), each "name" or "name/x" with a one-letter form; hidden.
	Aliases []string
	Value   func(c *T) any
}

// Opt is an Option: the flag, its one-letter form (or ""), the variable
// after the prefix, the usage text and the field.
func Opt[T any](flag, short, env, usage string, value func(c *T) any) Option[T] {
	return Option[T]{Flag: flag, Short: short, Env: env, Usage: usage, Value: value}
}

// Upstream returns o with the Ankaios variable name that presets it too.
func (o Option[T]) Upstream(env string) Option[T] {
	o.UpstreamEnv = env
	return o
}

// Alias returns o with other names of its flag: "name" or "name/x".
func (o Option[T]) Alias(names ...string) Option[T] {
	o.Aliases = append(slices.Clip(o.Aliases), names...)
	return o
}

// Spec describes a program's settings.
type Spec[T any] struct {
	// Program names the flag set and the usage text.
	Program string
	// What names the config file in errors ("server config").
	What string
	// Prefix comes before every Option.Env and before CONFIG, the
	// variable naming the config file.
	Prefix string
	// ConfigFlag and ConfigShort name the flag that names the config
	// file; ConfigAliases are hidden flags with the same meaning.
	ConfigFlag, ConfigShort string
	ConfigAliases           []string
	// DefaultPath is read when no file is named; it may be absent.
	DefaultPath string
	// UpstreamPath is the Ankaios config file (TOML) read when no file is
	// named and DefaultPath is absent; it may be absent too. "": none.
	UpstreamPath string
	// Upstream applies an Ankaios config file, data read from path, to
	// cfg and returns its warnings. A file named by the flag or variable
	// goes to Upstream when ankconf.IsTOML says it is TOML. nil: the
	// program reads no Ankaios file.
	Upstream func(path string, data []byte, cfg *T) (warnings []string, err error)
	Defaults func() T
	Options  []Option[T]
	// Version, when set, returns the line --version (-V) prints; called
	// only then (reading the build info costs memory a server keeps).
	Version func() string
	// Out receives the version (os.Stdout when nil); Warn the warnings of
	// an Ankaios file (printed to os.Stderr after the program's name when
	// nil).
	Out  io.Writer
	Warn func(string)
}

// Load resolves the settings from args, the environment (lookup) and the
// config file. With -h/--help it prints the usage to stderr and returns
// pflag.ErrHelp.
func Load[T any](s Spec[T], args []string, lookup func(string) (string, bool)) (T, error) {
	var zero T
	fs := pflag.NewFlagSet(s.Program, pflag.ContinueOnError)
	fs.SortFlags = false
	fs.SetOutput(io.Discard)
	configUsage := s.What + " file (YAML; default " + s.DefaultPath + " if present)"
	if s.Upstream != nil {
		configUsage = s.What + " file: Grapnel YAML or Ankaios TOML (.conf, .toml); default " + s.DefaultPath +
			", else " + s.UpstreamPath + ", if present"
	}
	configPath := fs.StringP(s.ConfigFlag, s.ConfigShort, "", configUsage)
	for _, alias := range s.ConfigAliases {
		fs.StringVar(configPath, alias, "", "same as --"+s.ConfigFlag)
		_ = fs.MarkHidden(alias)
	}
	var version *bool
	if s.Version != nil {
		version = fs.BoolP("version", "V", false, "print the version and exit")
	}
	cli := s.Defaults()
	for _, o := range s.Options {
		switch p := o.Value(&cli).(type) {
		case *string:
			fs.StringVarP(p, o.Flag, o.Short, *p, o.Usage)
		case *bool:
			fs.BoolVarP(p, o.Flag, o.Short, *p, o.Usage)
		case *int:
			fs.IntVarP(p, o.Flag, o.Short, *p, o.Usage)
		case *time.Duration:
			fs.DurationVarP(p, o.Flag, o.Short, *p, o.Usage)
		case *List:
			fs.VarP(&listFlag{dst: p}, o.Flag, o.Short, o.Usage)
		case *map[string]string:
			fs.VarP(&tagsFlag{dst: p}, o.Flag, o.Short, o.Usage)
		default:
			panic(fmt.Sprintf("layered: option %s: unsupported type %T", o.Flag, p))
		}
		main := fs.Lookup(o.Flag)
		for _, a := range o.Aliases {
			name, short, _ := strings.Cut(a, "/")
			fs.AddFlag(&pflag.Flag{Name: name, Shorthand: short, Usage: "same as --" + o.Flag, Value: main.Value,
				DefValue: main.DefValue, NoOptDefVal: main.NoOptDefVal, Hidden: true})
		}
	}
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, pflag.ErrHelp) {
			fmt.Fprintf(os.Stderr, "Usage of %s:\n%s", s.Program, fs.FlagUsages())
		}
		return zero, err
	}
	if version != nil && *version {
		out := s.Out
		if out == nil {
			out = os.Stdout
		}
		fmt.Fprintln(out, s.Version())
		return zero, ErrVersion
	}
	if fs.NArg() > 0 {
		return zero, fmt.Errorf("unexpected argument %q", fs.Arg(0))
	}

	cfg := s.Defaults()
	path, explicit := *configPath, fs.Changed(s.ConfigFlag)
	for _, alias := range s.ConfigAliases {
		explicit = explicit || fs.Changed(alias)
	}
	if !explicit {
		if v, ok := lookup(s.Prefix + "CONFIG"); ok {
			path, explicit = v, true
		} else {
			path = s.DefaultPath
		}
	}
	if err := s.readConfig(path, explicit, &cfg); err != nil {
		return zero, err
	}
	for _, o := range s.Options {
		if o.UpstreamEnv != "" {
			if v, ok := lookup(o.UpstreamEnv); ok && v != "" {
				if err := setFromText(o.Value(&cfg), v); err != nil {
					return zero, fmt.Errorf("%s: %w", o.UpstreamEnv, err)
				}
			}
		}
		if v, ok := lookup(s.Prefix + o.Env); ok {
			if err := setFromText(o.Value(&cfg), v); err != nil {
				return zero, fmt.Errorf("%s%s: %w", s.Prefix, o.Env, err)
			}
		}
		changed := fs.Changed(o.Flag)
		for _, a := range o.Aliases {
			name, _, _ := strings.Cut(a, "/")
			changed = changed || fs.Changed(name)
		}
		if changed {
			copyValue(o.Value(&cfg), o.Value(&cli))
		}
	}
	return cfg, nil
}

// readConfig applies the config file to cfg: the one at path when it was
// named (explicit), in whichever format it is; otherwise DefaultPath, or
// UpstreamPath when DefaultPath is absent, or none when both are.
func (s Spec[T]) readConfig(path string, explicit bool, cfg *T) error {
	data, err := os.ReadFile(path)
	if !explicit && errors.Is(err, os.ErrNotExist) && s.Upstream != nil && s.UpstreamPath != "" {
		path = s.UpstreamPath
		if data, err = os.ReadFile(path); err == nil {
			return s.readUpstream(path, data, cfg)
		}
	}
	if err != nil {
		if !explicit && errors.Is(err, os.ErrNotExist) {
			return nil
		}
		return fmt.Errorf("%s %s: %w", s.What, path, err)
	}
	if explicit && s.Upstream != nil && ankconf.IsTOML(path, data) {
		return s.readUpstream(path, data, cfg)
	}
	return decodeYAML(s.What, path, data, cfg)
}

// readUpstream applies an Ankaios config file and passes on its warnings.
func (s Spec[T]) readUpstream(path string, data []byte, cfg *T) error {
	warnings, err := s.Upstream(path, data, cfg)
	if err != nil {
		return err
	}
	for _, w := range warnings {
		if s.Warn != nil {
			s.Warn(w)
		} else {
			fmt.Fprintf(os.Stderr, "%s: warning: %s\n", s.Program, w)
		}
	}
	return nil
}

// ReadFile decodes the config file at path into cfg; unknown keys are an
// error. A file nobody named (explicit false) may be absent. what names
// the file in errors.
func ReadFile(what, path string, explicit bool, cfg any) error {
	data, err := os.ReadFile(path)
	if err != nil {
		if !explicit && errors.Is(err, os.ErrNotExist) {
			return nil
		}
		return fmt.Errorf("%s %s: %w", what, path, err)
	}
	return decodeYAML(what, path, data, cfg)
}

// decodeYAML decodes a YAML config file; unknown keys are an error.
func decodeYAML(what, path string, data []byte, cfg any) error {
	dec := yaml.NewDecoder(strings.NewReader(string(data)))
	dec.KnownFields(true)
	if err := dec.Decode(cfg); err != nil && !errors.Is(err, io.EOF) {
		return fmt.Errorf("%s %s: %w", what, path, err)
	}
	return nil
}

// List is a list setting: a YAML sequence or a comma-separated scalar in
// the file, comma-separated in the environment, and a repeatable flag
// whose values may also be comma-separated.
type List []string

// UnmarshalYAML accepts a sequence or a comma-separated scalar.
func (l *List) UnmarshalYAML(n *yaml.Node) error {
	if n.Kind == yaml.ScalarNode {
		*l = SplitList(n.Value)
		return nil
	}
	var s []string
	if err := n.Decode(&s); err != nil {
		return err
	}
	*l = s
	return nil
}

// SplitList splits a comma-separated list, dropping empty items.
func SplitList(v string) List {
	var out List
	for _, s := range strings.Split(v, ",") {
		if s = strings.TrimSpace(s); s != "" {
			out = append(out, s)
		}
	}
	return out
}

// listFlag is a repeatable list flag; its first use replaces the default.
type listFlag struct {
	dst     *List
	changed bool
}

func (f *listFlag) String() string { return strings.Join(*f.dst, ",") }
func (f *listFlag) Type() string   { return "list" }
func (f *listFlag) Set(v string) error {
	if !f.changed {
		*f.dst, f.changed = nil, true
	}
	*f.dst = append(*f.dst, SplitList(v)...)
	return nil
}

// tagsFlag is a repeatable key=value flag.
type tagsFlag struct {
	dst *map[string]string
}

func (f *tagsFlag) String() string { return "" }
func (f *tagsFlag) Type() string   { return "key=value" }
func (f *tagsFlag) Set(v string) error {
	if *f.dst == nil {
		*f.dst = map[string]string{}
	}
	return addPair(*f.dst, v)
}

// addPair adds one key=value; the key must not be empty.
func addPair(m map[string]string, kv string) error {
	k, v, ok := strings.Cut(kv, "=")
	if k = strings.TrimSpace(k); !ok || k == "" {
		return fmt.Errorf("%q: expected key=value", kv)
	}
	m[k] = v
	return nil
}

// setFromText sets a setting from its environment variable's text.
func setFromText(dst any, v string) error {
	switch p := dst.(type) {
	case *string:
		*p = v
	case *bool:
		b, err := strconv.ParseBool(v)
		if err != nil {
			return fmt.Errorf("%q is not a boolean", v)
		}
		*p = b
	case *int:
		n, err := strconv.Atoi(v)
		if err != nil {
			return fmt.Errorf("%q is not a whole number", v)
		}
		*p = n
	case *time.Duration:
		d, err := time.ParseDuration(v)
		if err != nil {
			return fmt.Errorf("%q is not a duration such as 500ms or 3s", v)
		}
		*p = d
	case *List:
		*p = SplitList(v)
	case *map[string]string:
		m := map[string]string{}
		for _, kv := range SplitList(v) {
			if err := addPair(m, kv); err != nil {
				return err
			}
		}
		*p = m
	}
	return nil
}

// copyValue copies a setting the command line gave over the lower layers.
func copyValue(dst, src any) {
	switch p := dst.(type) {
	case *string:
		*p = *src.(*string)
	case *bool:
		*p = *src.(*bool)
	case *int:
		*p = *src.(*int)
	case *time.Duration:
		*p = *src.(*time.Duration)
	case *List:
		*p = slices.Clone(*src.(*List))
	case *map[string]string:
		*p = maps.Clone(*src.(*map[string]string))
		if *p == nil {
			*p = map[string]string{}
		}
	}
}

// AbsPaths makes every relative path among paths (flag name → field)
// absolute, from the working directory the program started in. A path
// the program hands on (a run folder a workload's shim changes into, a
// data directory a replica executes itself again on) or reads again
// later (certificates on SIGHUP) must not depend on where a later step
// runs; systemd starts programs in "/". An empty path stays empty.
func AbsPaths(paths map[string]*string) error {
	for name, p := range paths {
		if *p == "" || filepath.IsAbs(*p) {
			continue
		}
		abs, err := filepath.Abs(*p)
		if err != nil {
			return fmt.Errorf("--%s %s: %w", name, *p, err)
		}
		*p = abs
	}
	return nil
}
