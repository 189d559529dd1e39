// Package layered loads a program's settings from four layers, each
// overriding the one before: the defaults, a YAML config file, the
// environment and the command line. grapnel-server and grapnel-agent
// describe their settings as Options and share this loader, so both
// programs treat files, variables and flags the same way.
//
// A setting is a field of the program's config struct: the file uses the
// field's yaml tag, the environment Prefix+Option.Env, the command line
// Option.Flag. A list or a map given in a later layer replaces the
// earlier value as a whole.
package layered

import (
	"errors"
	"fmt"
	"io"
	"maps"
	"os"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/spf13/pflag"
	"gopkg.in/yaml.v3"
)

// Option ties one setting to its flag and environment variable. Value
// returns a pointer to the field in a config: *string, *bool, *int,
// *time.Duration, *List or *map[string]string.
type Option[T any] struct {
	Flag, Short, Env, Usage string
	Value                   func(c *T) any
}

// Opt is an Option: the flag, its one-letter form (or ""), the variable
// after the prefix, the usage text and the field.
func Opt[T any](flag, short, env, usage string, value func(c *T) any) Option[T] {
	return Option[T]{Flag: flag, Short: short, Env: env, Usage: usage, Value: value}
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
	Defaults    func() T
	Options     []Option[T]
}

// Load resolves the settings from args, the environment (lookup) and the
// config file. With -h/--help it prints the usage to stderr and returns
// pflag.ErrHelp.
func Load[T any](s Spec[T], args []string, lookup func(string) (string, bool)) (T, error) {
	var zero T
	fs := pflag.NewFlagSet(s.Program, pflag.ContinueOnError)
	fs.SortFlags = false
	fs.SetOutput(io.Discard)
	configPath := fs.StringP(s.ConfigFlag, s.ConfigShort, "", s.What+" file (YAML; default "+s.DefaultPath+" if present)")
	for _, alias := range s.ConfigAliases {
		fs.StringVar(configPath, alias, "", "same as --"+s.ConfigFlag)
		_ = fs.MarkHidden(alias)
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
	}
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, pflag.ErrHelp) {
			fmt.Fprintf(os.Stderr, "Usage of %s:\n%s", s.Program, fs.FlagUsages())
		}
		return zero, err
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
	if err := ReadFile(s.What, path, explicit, &cfg); err != nil {
		return zero, err
	}
	for _, o := range s.Options {
		if v, ok := lookup(s.Prefix + o.Env); ok {
			if err := setFromText(o.Value(&cfg), v); err != nil {
				return zero, fmt.Errorf("%s%s: %w", s.Prefix, o.Env, err)
			}
		}
		if fs.Changed(o.Flag) {
			copyValue(o.Value(&cfg), o.Value(&cli))
		}
	}
	return cfg, nil
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
