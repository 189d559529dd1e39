package agentcmd

import (
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"os"
	"slices"
	"strings"
	"time"

	"github.com/grapnel-io/grapnel/agent"
	"github.com/grapnel-io/grapnel/agent/controlif"
	"github.com/grapnel-io/grapnel/agent/logs"
	"github.com/grapnel-io/grapnel/agent/runtime/containerd"
	"github.com/grapnel-io/grapnel/agent/runtime/process"
	"github.com/grapnel-io/grapnel/internal/ankconf"
	"github.com/grapnel-io/grapnel/internal/formats"
	"github.com/grapnel-io/grapnel/internal/gossipmeta"
	"github.com/grapnel-io/grapnel/internal/layered"
	"github.com/grapnel-io/grapnel/rpc"
	"github.com/grapnel-io/grapnel/state"
	"github.com/grapnel-io/grapnel/workloadpolicy"
)

// defaultConfigPath is where the agent looks for its config file.
var defaultConfigPath = "/etc/grapnel/agent.yaml"

// envPrefix prefixes every environment variable of the agent.
const envPrefix = "GRAPNEL_AGENT_"

// config is the agent's start-up configuration, assembled from the config
// file, then environment variables, then the command line; a later source
// wins, and replaces a list or the tags as a whole.
type config struct {
	Name          string            `yaml:"name"`
	ServerURL     layered.List      `yaml:"server_url"`
	RunFolder     string            `yaml:"run_folder"`
	Tags          map[string]string `yaml:"tags"`
	Runtimes      layered.List      `yaml:"runtimes"`
	Insecure      bool              `yaml:"insecure"`
	CAPem         string            `yaml:"ca_pem"`
	CrtPem        string            `yaml:"crt_pem"`
	KeyPem        string            `yaml:"key_pem"`
	GossipJoin    layered.List      `yaml:"gossip_join"`
	GossipAddress string            `yaml:"gossip_address"`
	GossipKeyFile string            `yaml:"gossip_key_file"`
	LogLevel      string            `yaml:"log_level"`
	// ContainerdAddress and ContainerdNamespace are where the containerd
	// runtime finds containerd and keeps the agent's containers.
	ContainerdAddress   string `yaml:"containerd_address"`
	ContainerdNamespace string `yaml:"containerd_namespace"`
	// ResyncInterval is the period of drift repair; 0 turns the periodic
	// rounds off (`grapnel agent resync` still asks for one).
	ResyncInterval time.Duration `yaml:"resync_interval"`
	// WorkloadUIDRange is FIRST-LAST, the uids process workloads run
	// under (one per workload), or off.
	WorkloadUIDRange string `yaml:"workload_uid_range"`
	// WorkloadPolicy is the level of the workload admission policy:
	// privileged, baseline or restricted (docs/security.md).
	WorkloadPolicy string `yaml:"workload_policy"`
	// AllowRootWorkloads is the former name of --workload-policy
	// privileged, kept as an alias.
	AllowRootWorkloads bool `yaml:"allow_root_workloads"`
	// WorkloadUsers are the users a process workload may name as its
	// user: at baseline.
	WorkloadUsers layered.List `yaml:"workload_users"`
	// The caps of log campaigns (docs/agent.md, "Logs and load").
	MaxLogCampaignsPerWorkload int `yaml:"max_log_campaigns_per_workload"`
	MaxLogCampaigns            int `yaml:"max_log_campaigns"`
	MaxLogSources              int `yaml:"max_log_sources"`
	// The PEM contents an Ankaios config file may give instead of the
	// paths (ca_pem_content, ...); a path, from any layer, wins.
	CAPemContent  string `yaml:"-"`
	CrtPemContent string `yaml:"-"`
	KeyPemContent string `yaml:"-"`
}

func defaults() config {
	return config{
		ServerURL:     layered.List{"127.0.0.1:25551"},
		RunFolder:     agent.DefaultRunFolder(),
		GossipAddress: agent.DefaultGossipAddress,
		LogLevel:      "info",

		ResyncInterval: agent.DefaultResyncInterval,

		WorkloadUIDRange: process.DefaultUIDRange.String(),
		WorkloadPolicy:   workloadpolicy.Baseline.String(),

		MaxLogCampaignsPerWorkload: controlif.DefaultMaxLogCampaigns,
		MaxLogCampaigns:            logs.DefaultMaxCampaigns,
		MaxLogSources:              logs.DefaultMaxSources,
	}
}

func options() []layered.Option[config] {
	return []layered.Option[config]{
		layered.Opt("name", "n", "NAME", "agent name ([a-zA-Z0-9_-]; required)", func(c *config) any { return &c.Name }),
		layered.Opt("server-url", "s", "SERVER_URL", "replica gRPC addresses ADDR[,ADDR...]; any one is enough to find the leader", func(c *config) any { return &c.ServerURL }),
		layered.Opt("run-folder", "r", "RUN_FOLDER", "workload files, control interfaces, process records and the incarnation counter", func(c *config) any { return &c.RunFolder }),
		layered.Opt("tag", "t", "TAGS", "agent tag key=value (repeatable; env: comma-separated)", func(c *config) any { return &c.Tags }),
		layered.Opt("runtimes", "", "RUNTIMES", "runtimes to offer, comma-separated: process, podman, podman-kube, containerd (default all four, podman's only when podman is available, containerd only when containerd answers)", func(c *config) any { return &c.Runtimes }),
		layered.Opt("containerd-address", "", "CONTAINERD_ADDRESS", "containerd's socket for the containerd runtime (default "+containerd.DefaultAddress+")", func(c *config) any { return &c.ContainerdAddress }),
		layered.Opt("containerd-namespace", "", "CONTAINERD_NAMESPACE", "the containerd namespace of the agent's containerd workloads (default "+containerd.DefaultNamespace+", nerdctl's)", func(c *config) any { return &c.ContainerdNamespace }),
		// The Ankaios agent reads these four from ANKAGENT_* variables too.
		layered.Opt("insecure", "k", "INSECURE", "connect without TLS (development only)", func(c *config) any { return &c.Insecure }).Upstream("ANKAGENT_INSECURE"),
		layered.Opt("ca_pem", "", "CA_PEM", "CA certificate (PEM)", func(c *config) any { return &c.CAPem }).Upstream("ANKAGENT_CA_PEM"),
		layered.Opt("crt_pem", "", "CRT_PEM", "agent certificate (PEM)", func(c *config) any { return &c.CrtPem }).Upstream("ANKAGENT_CRT_PEM"),
		layered.Opt("key_pem", "", "KEY_PEM", "agent key (PEM)", func(c *config) any { return &c.KeyPem }).Upstream("ANKAGENT_KEY_PEM"),
		layered.Opt("gossip-join", "", "GOSSIP_JOIN", "gossip address of a replica: join the replicas' memberlist pool as an agent member (repeatable; env: comma-separated)", func(c *config) any { return &c.GossipJoin }),
		layered.Opt("gossip-address", "", "GOSSIP_ADDRESS", "bind address of the agent's gossip member", func(c *config) any { return &c.GossipAddress }),
		layered.Opt("gossip-key-file", "", "GOSSIP_KEY_FILE", "file holding the base64 key of the agents' gossip pool (the replicas' agent_gossip_key_file, never their gossip_key_file); several lines during a rotation, the first used to send; mode 0600 or 0400", func(c *config) any { return &c.GossipKeyFile }),
		layered.Opt("log-level", "", "LOG_LEVEL", "debug, info, warn or error", func(c *config) any { return &c.LogLevel }),
		layered.Opt("workload-uid-range", "", "WORKLOAD_UID_RANGE", "uids FIRST-LAST that process workloads run under, one of its own per workload (the agent must be root); off runs them as the agent's user", func(c *config) any { return &c.WorkloadUIDRange }),
		layered.Opt("workload-policy", "", "WORKLOAD_POLICY", "workload admission policy enforced before a workload starts: privileged (anything, root and --privileged containers included), baseline (no known way to the host) or restricted (hardened)", func(c *config) any { return &c.WorkloadPolicy }),
		layered.Opt("workload-users", "", "WORKLOAD_USERS", "users NAME|UID[,...] a process workload may name as its runtimeConfig user at --workload-policy baseline (never root, never another workload's uid of --workload-uid-range)", func(c *config) any { return &c.WorkloadUsers }),
		layered.Opt("allow-root-workloads", "", "ALLOW_ROOT_WORKLOADS", "former name of --workload-policy privileged", func(c *config) any { return &c.AllowRootWorkloads }),
		layered.Opt("resync-interval", "", "RESYNC_INTERVAL", "how often to compare what the runtimes run with what the agent was told and repair the drift; 0 turns it off", func(c *config) any { return &c.ResyncInterval }),
		layered.Opt("max-log-campaigns-per-workload", "", "MAX_LOG_CAMPAIGNS_PER_WORKLOAD", "log campaigns one workload may keep open through its control interface; a request past it is answered with an error", func(c *config) any { return &c.MaxLogCampaignsPerWorkload }),
		layered.Opt("max-log-campaigns", "", "MAX_LOG_CAMPAIGNS", "log campaigns the agent runs at once for the server; a request past it gets a line saying so and its stop", func(c *config) any { return &c.MaxLogCampaigns }),
		layered.Opt("max-log-sources", "", "MAX_LOG_SOURCES", "log readers (one descriptor and goroutine each) the agent's campaigns hold open at once; an instance past it gets a line saying so and its stop", func(c *config) any { return &c.MaxLogSources }),
	}
}

// upstreamConfigPath is the Ankaios agent's config file, read when
// defaultConfigPath is absent.
var upstreamConfigPath = ankconf.AgentPath

// loadConfig resolves the configuration from args, the environment
// (lookup) and the config file, and checks it; --version goes to stdout
// and the warnings about an Ankaios config file to stderr.
func loadConfig(args []string, lookup func(string) (string, bool)) (config, error) {
	return loadConfigTo(args, lookup, os.Stdout, os.Stderr)
}

// loadConfigTo is loadConfig writing to stdout and stderr.
func loadConfigTo(args []string, lookup func(string) (string, bool), stdout, stderr io.Writer) (config, error) {
	cfg, err := layered.Load(layered.Spec[config]{
		Program: "grapnel-agent", What: "agent config", Prefix: envPrefix,
		// The Ankaios agent calls it --agent-config.
		ConfigFlag: "config", ConfigShort: "x", ConfigAliases: []string{"agent-config"},
		DefaultPath: defaultConfigPath, Defaults: defaults, Options: options(),
		UpstreamPath: upstreamConfigPath, Upstream: applyAnkaiosConfig,
		// --version: the version line, then the formats of the release
		// (internal/formats); Println adds the last newline.
		Version: func() string {
			return strings.TrimSuffix(formats.VersionText("grapnel-agent", rpc.ProtocolVersion), "\n")
		}, Out: stdout,
		Warn: func(w string) { fmt.Fprintf(stderr, "grapnel-agent: warning: %s\n", w) },
	}, args, lookup)
	if err != nil {
		return config{}, err
	}
	cfg.ServerURL = trimSchemes(cfg.ServerURL)
	// A relative run folder would be taken from each shim's and
	// workload's own working directory (issue 31 point 2).
	if err := layered.AbsPaths(map[string]*string{
		"run-folder": &cfg.RunFolder, "ca_pem": &cfg.CAPem, "crt_pem": &cfg.CrtPem, "key_pem": &cfg.KeyPem,
		"gossip-key-file": &cfg.GossipKeyFile,
	}); err != nil {
		return config{}, err
	}
	return cfg, cfg.validate()
}

// Ankaios runtimes Grapnel has no counterpart for; an Ankaios agent
// config that names them gets a warning. There are none since Grapnel
// has containerd.
var ankaiosOnlyRuntimes = map[string]bool{}

// applyAnkaiosConfig applies an Ankaios agent config file (TOML) to c:
// every key it has maps to the Grapnel setting of the same name.
// server_url may list several replicas, comma-separated; runtimes the
// Ankaios agent has and Grapnel has not are left out with a warning.
func applyAnkaiosConfig(path string, data []byte, c *config) ([]string, error) {
	f, err := ankconf.Parse(ankconf.Agent, path, data)
	if err != nil {
		return nil, err
	}
	warnings := f.Warnings
	f.Set(map[string]any{
		"name": &c.Name, "run_folder": &c.RunFolder, "insecure": &c.Insecure,
		"ca_pem": &c.CAPem, "crt_pem": &c.CrtPem, "key_pem": &c.KeyPem,
		"ca_pem_content": &c.CAPemContent, "crt_pem_content": &c.CrtPemContent, "key_pem_content": &c.KeyPemContent,
	})
	if v, ok := f.String("server_url"); ok {
		c.ServerURL = layered.SplitList(v)
	}
	if v, ok := f.Table("tags"); ok {
		c.Tags = v
	}
	if names, ok := f.List("runtimes"); ok {
		var keep, dropped layered.List
		for _, r := range names {
			switch {
			case agent.IsKnownRuntime(r):
				keep = append(keep, r)
			case ankaiosOnlyRuntimes[r]:
				dropped = append(dropped, r)
			default:
				return nil, f.Fail(ankconf.Agent.What, "runtimes", "unknown runtime %q (Grapnel has %s)", r, strings.Join(agent.KnownRuntimes, ", "))
			}
		}
		if len(dropped) > 0 {
			warnings = append(warnings, fmt.Sprintf("%s %s: key 'runtimes': Grapnel has no %s runtime; left out",
				ankconf.Agent.What, path, strings.Join(dropped, ", ")))
		}
		if len(keep) == 0 {
			return nil, f.Fail(ankconf.Agent.What, "runtimes", "no runtime Grapnel has (%s) is listed, so the agent could run nothing", strings.Join(agent.KnownRuntimes, ", "))
		}
		c.Runtimes = keep
	}
	return warnings, nil
}

// trimSchemes drops the https:// an Ankaios server URL carries: the
// agent takes host:port.
func trimSchemes(l layered.List) layered.List {
	out := make(layered.List, 0, len(l))
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
		if c.CAPem == "" && c.CAPemContent == "" || c.CrtPem == "" && c.CrtPemContent == "" || c.KeyPem == "" && c.KeyPemContent == "" {
			return errNoSecurityMode
		}
		if err := rpc.CheckPEMPermissions(c.tlsFiles()); err != nil {
			return err
		}
	}
	for _, r := range c.Runtimes {
		if !agent.IsKnownRuntime(r) {
			return fmt.Errorf("--runtimes: unknown runtime %q (known: %s)", r, strings.Join(agent.KnownRuntimes, ", "))
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
	if c.ResyncInterval < 0 {
		return fmt.Errorf("--resync-interval %v: must not be negative (0 turns drift repair rounds off)", c.ResyncInterval)
	}
	uids, err := process.ParseUIDRange(c.WorkloadUIDRange)
	if err != nil {
		return fmt.Errorf("--workload-uid-range %v", err)
	}
	for _, o := range []struct {
		flag string
		v    int
	}{
		{"--max-log-campaigns-per-workload", c.MaxLogCampaignsPerWorkload},
		{"--max-log-campaigns", c.MaxLogCampaigns},
		{"--max-log-sources", c.MaxLogSources},
	} {
		if o.v < 1 {
			return fmt.Errorf("%s %d: must be at least 1", o.flag, o.v)
		}
	}
	level, err := c.workloadPolicy()
	if err != nil {
		return err
	}
	if uids.IsZero() && geteuid() == 0 && level != workloadpolicy.Privileged && c.offersProcess() {
		return fmt.Errorf("--workload-uid-range off: the agent runs as root, so every process workload would run as root, which needs --workload-policy privileged (it is %s); give a range, or run the agent as another user", level)
	}
	if _, err := parseLevel(c.LogLevel); err != nil {
		return err
	}
	return nil
}

// geteuid is the agent's uid; a variable so that tests can pose as root
// or not.
var geteuid = os.Geteuid

// offersProcess reports whether the agent offers the process runtime.
func (c config) offersProcess() bool {
	return len(c.Runtimes) == 0 || slices.Contains(c.Runtimes, agent.RuntimeProcess)
}

// workloadPolicy is the level the agent enforces: --workload-policy, or
// privileged with its former name --allow-root-workloads.
func (c config) workloadPolicy() (workloadpolicy.Level, error) {
	level, err := workloadpolicy.ParseLevel(c.WorkloadPolicy)
	switch {
	case err != nil:
		return level, fmt.Errorf("--workload-policy %v", err)
	case c.AllowRootWorkloads && level == workloadpolicy.Restricted:
		return level, errors.New("--allow-root-workloads (the former name of --workload-policy privileged) contradicts --workload-policy restricted")
	case c.AllowRootWorkloads:
		return workloadpolicy.Privileged, nil
	}
	return level, nil
}

func (c config) tlsFiles() rpc.TLSFiles {
	return rpc.TLSFiles{CA: c.CAPem, Cert: c.CrtPem, Key: c.KeyPem,
		CAPEM: c.CAPemContent, CertPEM: c.CrtPemContent, KeyPEM: c.KeyPemContent}
}

// agentConfig turns the checked configuration into agent.Config, reading
// the gossip key.
func (c config) agentConfig(log *slog.Logger) (agent.Config, error) {
	key, err := gossipmeta.ReadKeyFile(c.GossipKeyFile)
	if err != nil {
		return agent.Config{}, err
	}
	uids, err := process.ParseUIDRange(c.WorkloadUIDRange)
	if err != nil {
		return agent.Config{}, fmt.Errorf("--workload-uid-range %v", err)
	}
	level, err := c.workloadPolicy()
	if err != nil {
		return agent.Config{}, err
	}
	return agent.Config{
		Name: c.Name, Servers: c.ServerURL, Insecure: c.Insecure, TLS: c.tlsFiles(), Tags: c.Tags,
		RunFolder: c.RunFolder, Runtimes: c.Runtimes,
		Containerd: containerd.Config{Address: c.ContainerdAddress, Namespace: c.ContainerdNamespace},
		GossipJoin: c.GossipJoin, GossipAddress: c.GossipAddress, GossipKey: key.Primary(),
		ResyncInterval: c.ResyncInterval,
		WorkloadUIDs:   uids, WorkloadPolicy: level, WorkloadUsers: c.WorkloadUsers,
		MaxLogCampaignsPerWorkload: c.MaxLogCampaignsPerWorkload,
		MaxLogCampaigns:            c.MaxLogCampaigns,
		MaxLogSources:              c.MaxLogSources,
		Logger:                     log,
		GossipSecondaryKeys:        secondary(key),
	}, nil
}

func parseLevel(s string) (slog.Level, error) {
	var l slog.Level
	if err := l.UnmarshalText([]byte(s)); err != nil {
		return 0, fmt.Errorf("--log-level %q: use debug, info, warn or error", s)
	}
	return l, nil
}

// secondary are the keys after the primary: those a rotation adds.
func secondary(k gossipmeta.Keys) [][]byte {
	if len(k) < 2 {
		return nil
	}
	return k[1:]
}
