package main

import (
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"os"
	"slices"
	"strconv"
	"strings"

	"github.com/spf13/pflag"
	"gopkg.in/yaml.v3"

	"github.com/grapnel-io/grapnel/agent"
	"github.com/grapnel-io/grapnel/cluster/gossipmeta"
	"github.com/grapnel-io/grapnel/rpc"
	"github.com/grapnel-io/grapnel/state"
)

// defaultConfigPath is where the agent looks for its config file.
const defaultConfigPath = "/etc/grapnel/agent.yaml"

// envPrefix prefixes every environment variable of the agent.
const envPrefix = "GRAPNEL_AGENT_"

// config is the agent's start-up configuration, assembled from the config
// file, then environment variables, then the command line; a later source
// wins, and replaces a list or the tags as a whole.
type config struct {
	Name          string            `yaml:"name"`
	ServerURL     list              `yaml:"server_url"`
	RunFolder     string            `yaml:"run_folder"`
	Tags          map[string]string `yaml:"tags"`
	Runtimes      list              `yaml:"runtimes"`
	Insecure      bool              `yaml:"insecure"`
	CAPem         string            `yaml:"ca_pem"`
	CrtPem        string            `yaml:"crt_pem"`
	KeyPem        string            `yaml:"key_pem"`
	GossipJoin    list              `yaml:"gossip_join"`
	GossipAddress string            `yaml:"gossip_address"`
	GossipKeyFile string            `yaml:"gossip_key_file"`
	LogLevel      string            `yaml:"log_level"`
}

func defaults() config {
	return config{
		ServerURL:     list{"127.0.0.1:25551"},
		RunFolder:     agent.DefaultRunFolder(),
		GossipAddress: agent.DefaultGossipAddress,
		LogLevel:      "info",
	}
}

// option ties one setting to its flag and environment variable; the
// config file uses the yaml tag of the field.
type option struct {
	flag, short, env, usage string
	value                   func(c *config) any
}

func options() []option {
	return []option{
		{"name", "n", "NAME", "agent name ([a-zA-Z0-9_-]; required)", func(c *config) any { return &c.Name }},
		{"server-url", "s", "SERVER_URL", "replica gRPC addresses ADDR[,ADDR...]; any one is enough to find the leader", func(c *config) any { return &c.ServerURL }},
		{"run-folder", "r", "RUN_FOLDER", "workload files, control interfaces, process records and the incarnation counter", func(c *config) any { return &c.RunFolder }},
		{"tag", "t", "TAGS", "agent tag key=value (repeatable; env: comma-separated)", func(c *config) any { return &c.Tags }},
		{"runtimes", "", "RUNTIMES", "runtimes to offer, comma-separated: process, podman (default both, podman only when available)", func(c *config) any { return &c.Runtimes }},
		{"insecure", "k", "INSECURE", "connect without TLS (development only)", func(c *config) any { return &c.Insecure }},
		{"ca_pem", "", "CA_PEM", "CA certificate (PEM)", func(c *config) any { return &c.CAPem }},
		{"crt_pem", "", "CRT_PEM", "agent certificate (PEM)", func(c *config) any { return &c.CrtPem }},
		{"key_pem", "", "KEY_PEM", "agent key (PEM)", func(c *config) any { return &c.KeyPem }},
		{"gossip-join", "", "GOSSIP_JOIN", "gossip address of a replica: join the replicas' memberlist pool as an agent member (repeatable; env: comma-separated)", func(c *config) any { return &c.GossipJoin }},
		{"gossip-address", "", "GOSSIP_ADDRESS", "bind address of the agent's gossip member", func(c *config) any { return &c.GossipAddress }},
		{"gossip-key-file", "", "GOSSIP_KEY_FILE", "file holding the replicas' base64 gossip key", func(c *config) any { return &c.GossipKeyFile }},
		{"log-level", "", "LOG_LEVEL", "debug, info, warn or error", func(c *config) any { return &c.LogLevel }},
	}
}

// loadConfig resolves the configuration from args, the environment
// (lookup) and the config file, and checks it.
func loadConfig(args []string, lookup func(string) (string, bool)) (config, error) {
	fs := pflag.NewFlagSet("grapnel-agent", pflag.ContinueOnError)
	fs.SortFlags = false
	fs.SetOutput(io.Discard)
	configPath := fs.StringP("config", "x", "", "agent config file (YAML; default "+defaultConfigPath+" if present)")
	// The Ankaios agent calls it --agent-config.
	fs.StringVar(configPath, "agent-config", "", "same as --config")
	_ = fs.MarkHidden("agent-config")
	cli := defaults()
	for _, o := range options() {
		switch p := o.value(&cli).(type) {
		case *string:
			fs.StringVarP(p, o.flag, o.short, *p, o.usage)
		case *bool:
			fs.BoolVarP(p, o.flag, o.short, *p, o.usage)
		case *list:
			fs.VarP(&listFlag{dst: p}, o.flag, o.short, o.usage)
		case *map[string]string:
			fs.VarP(&tagsFlag{dst: p}, o.flag, o.short, o.usage)
		}
	}
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, pflag.ErrHelp) {
			fmt.Fprintf(os.Stderr, "Usage of grapnel-agent:\n%s", fs.FlagUsages())
		}
		return config{}, err
	}
	if fs.NArg() > 0 {
		return config{}, fmt.Errorf("unexpected argument %q", fs.Arg(0))
	}

	cfg := defaults()
	path, explicit := *configPath, fs.Changed("config") || fs.Changed("agent-config")
	if !explicit {
		if v, ok := lookup(envPrefix + "CONFIG"); ok {
			path, explicit = v, true
		} else {
			path = defaultConfigPath
		}
	}
	if err := readConfigFile(path, explicit, &cfg); err != nil {
		return config{}, err
	}
	for _, o := range options() {
		if v, ok := lookup(envPrefix + o.env); ok {
			if err := setFromText(o.value(&cfg), v); err != nil {
				return config{}, fmt.Errorf("%s%s: %w", envPrefix, o.env, err)
			}
		}
		if fs.Changed(o.flag) {
			copyValue(o.value(&cfg), o.value(&cli))
		}
	}
	cfg.ServerURL = trimSchemes(cfg.ServerURL)
	return cfg, cfg.validate()
}

// list is a list setting: a YAML sequence, or a comma-separated string
// as the environment gives it.
type list []string

// UnmarshalYAML accepts a sequence or a comma-separated scalar.
func (l *list) UnmarshalYAML(n *yaml.Node) error {
	if n.Kind == yaml.ScalarNode {
		*l = splitList(n.Value)
		return nil
	}
	var s []string
	if err := n.Decode(&s); err != nil {
		return err
	}
	*l = s
	return nil
}

func splitList(v string) list {
	var out list
	for _, s := range strings.Split(v, ",") {
		if s = strings.TrimSpace(s); s != "" {
			out = append(out, s)
		}
	}
	return out
}

// listFlag is a repeatable flag whose values may also be comma-separated;
// the first use replaces the default.
type listFlag struct {
	dst     *list
	changed bool
}

func (f *listFlag) String() string { return strings.Join(*f.dst, ",") }
func (f *listFlag) Type() string   { return "list" }
func (f *listFlag) Set(v string) error {
	if !f.changed {
		*f.dst, f.changed = nil, true
	}
	*f.dst = append(*f.dst, splitList(v)...)
	return nil
}

// tagsFlag is the repeatable key=value tag flag.
type tagsFlag struct {
	dst *map[string]string
}

func (f *tagsFlag) String() string { return "" }
func (f *tagsFlag) Type() string   { return "key=value" }
func (f *tagsFlag) Set(v string) error {
	if *f.dst == nil {
		*f.dst = map[string]string{}
	}
	return addTag(*f.dst, v)
}

// addTag adds one key=value tag; the key must be non-empty.
func addTag(m map[string]string, kv string) error {
	k, v, ok := strings.Cut(kv, "=")
	if k = strings.TrimSpace(k); !ok || k == "" {
		return fmt.Errorf("%q: expected key=value", kv)
	}
	m[k] = v
	return nil
}

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
	case *list:
		*p = splitList(v)
	case *map[string]string:
		m := map[string]string{}
		for _, kv := range splitList(v) {
			if err := addTag(m, kv); err != nil {
				return err
			}
		}
		*p = m
	}
	return nil
}

func copyValue(dst, src any) {
	switch p := dst.(type) {
	case *string:
		*p = *src.(*string)
	case *bool:
		*p = *src.(*bool)
	case *list:
		*p = slices.Clone(*src.(*list))
	case *map[string]string:
		m := map[string]string{}
		for k, v := range *src.(*map[string]string) {
			m[k] = v
		}
		*p = m
	}
}

func readConfigFile(path string, explicit bool, cfg *config) error {
	data, err := os.ReadFile(path)
	if err != nil {
		if !explicit && errors.Is(err, os.ErrNotExist) {
			return nil
		}
		return fmt.Errorf("agent config %s: %w", path, err)
	}
	dec := yaml.NewDecoder(strings.NewReader(string(data)))
	dec.KnownFields(true)
	if err := dec.Decode(cfg); err != nil && !errors.Is(err, io.EOF) {
		return fmt.Errorf("agent config %s: %w", path, err)
	}
	return nil
}

// trimSchemes drops the https:// an Ankaios server URL carries: the
// agent takes host:port.
func trimSchemes(l list) list {
	out := make(list, 0, len(l))
	for _, s := range l {
		s = strings.TrimPrefix(strings.TrimPrefix(strings.TrimSpace(s), "https://"), "http://")
		if s = strings.TrimSuffix(s, "/"); s != "" {
			out = append(out, s)
		}
	}
	return out
}

// errNoSecurityMode is the refusal to start without an explicit choice of
// mTLS or insecure mode.
var errNoSecurityMode = errors.New("missing certificate files: give --ca_pem, --crt_pem and --key_pem " +
	"(or GRAPNEL_AGENT_CA_PEM, ...), or choose insecure mode explicitly with --insecure/-k")

// validate checks the combination of options; every message names the
// option.
func (c config) validate() error {
	switch {
	case c.Name == "":
		return errors.New("--name: required: give the agent's name with --name/-n")
	case !state.ValidName(c.Name):
		return fmt.Errorf("--name %q: an agent name uses only [a-zA-Z0-9_-]", c.Name)
	case len(c.ServerURL) == 0:
		return errors.New("--server-url: no server address")
	}
	if !c.Insecure {
		if c.CAPem == "" || c.CrtPem == "" || c.KeyPem == "" {
			return errNoSecurityMode
		}
		if err := rpc.CheckPEMPermissions(c.tlsFiles()); err != nil {
			return err
		}
	}
	for _, r := range c.Runtimes {
		if r != agent.RuntimeProcess && r != agent.RuntimePodman {
			return fmt.Errorf("--runtimes: unknown runtime %q (known: %s, %s)", r, agent.RuntimeProcess, agent.RuntimePodman)
		}
	}
	for _, a := range c.ServerURL {
		if _, _, err := net.SplitHostPort(a); err != nil {
			return fmt.Errorf("--server-url %q: not host:port", a)
		}
	}
	for _, a := range c.GossipJoin {
		if _, _, err := net.SplitHostPort(a); err != nil {
			return fmt.Errorf("--gossip-join %q: not host:port (a replica's gossip address)", a)
		}
	}
	if _, _, err := net.SplitHostPort(c.GossipAddress); err != nil && len(c.GossipJoin) > 0 {
		return fmt.Errorf("--gossip-address %q: not host:port", c.GossipAddress)
	}
	if c.RunFolder == "" {
		return errors.New("--run-folder: must not be empty")
	}
	if _, err := parseLevel(c.LogLevel); err != nil {
		return err
	}
	return nil
}

func (c config) tlsFiles() rpc.TLSFiles {
	return rpc.TLSFiles{CA: c.CAPem, Cert: c.CrtPem, Key: c.KeyPem}
}

// agentConfig turns the checked configuration into agent.Config, reading
// the gossip key.
func (c config) agentConfig(log *slog.Logger) (agent.Config, error) {
	key, err := gossipmeta.ReadKeyFile(c.GossipKeyFile)
	if err != nil {
		return agent.Config{}, err
	}
	return agent.Config{
		Name: c.Name, Servers: c.ServerURL, Insecure: c.Insecure, TLS: c.tlsFiles(), Tags: c.Tags,
		RunFolder: c.RunFolder, Runtimes: c.Runtimes,
		GossipJoin: c.GossipJoin, GossipAddress: c.GossipAddress, GossipKey: key,
		Logger: log,
	}, nil
}

func parseLevel(s string) (slog.Level, error) {
	var l slog.Level
	if err := l.UnmarshalText([]byte(s)); err != nil {
		return 0, fmt.Errorf("--log-level %q: use debug, info, warn or error", s)
	}
	return l, nil
}
