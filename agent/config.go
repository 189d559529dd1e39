package agent

import (
	"errors"
	"fmt"
	"log/slog"
	"net"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/grapnel-io/grapnel/agent/runtime/containerd"
	"github.com/grapnel-io/grapnel/agent/runtime/process"
	"github.com/grapnel-io/grapnel/agent/workload"
	"github.com/grapnel-io/grapnel/internal/clock"
	"github.com/grapnel-io/grapnel/internal/gossipmeta"
	"github.com/grapnel-io/grapnel/internal/sdnotify"
	"github.com/grapnel-io/grapnel/internal/tlsreload"
	"github.com/grapnel-io/grapnel/rpc"
	"github.com/grapnel-io/grapnel/state"
	"github.com/grapnel-io/grapnel/workloadpolicy"
)

// ErrConfig is wrapped by every configuration error; the message names the
// setting and the reason.
var ErrConfig = errors.New("invalid agent configuration")

// The runtimes an agent knows.
const (
	RuntimeProcess    = "process"
	RuntimePodman     = "podman"
	RuntimePodmanKube = "podman-kube"
	RuntimeContainerd = "containerd"
)

// KnownRuntimes are the runtimes an agent can offer, in the order error
// messages list them.
var KnownRuntimes = []string{RuntimeProcess, RuntimePodman, RuntimePodmanKube, RuntimeContainerd}

// DefaultRuntimes are used when Config.Runtimes is empty; podman,
// podman-kube and containerd are then optional and skipped with a warning
// when podman, or containerd, is not available.
var DefaultRuntimes = []string{RuntimeProcess, RuntimePodman, RuntimePodmanKube, RuntimeContainerd}

// IsKnownRuntime says whether name is one of KnownRuntimes.
func IsKnownRuntime(name string) bool { return slices.Contains(KnownRuntimes, name) }

// Defaults of Config.
const (
	DefaultLoadInterval  = 2 * time.Second
	DefaultGossipAddress = "127.0.0.1:0"
	// DefaultResyncInterval is grapnel-agent's default drift repair
	// period (see workload.DefaultResyncInterval for why).
	DefaultResyncInterval = workload.DefaultResyncInterval
)

// Config configures an agent.
type Config struct {
	// Name is the agent name: non-empty, [a-zA-Z0-9_-].
	Name string
	// Servers are replica gRPC addresses (host:port); any one is enough
	// to find the leader.
	Servers []string
	// Insecure connects without TLS; otherwise TLS holds the PEM files
	// for mutual TLS.
	Insecure bool
	TLS      rpc.TLSFiles
	// Certs, when set, replaces TLS with certificates that rotate (the
	// agent's main watches the files and reloads on SIGHUP).
	Certs *tlsreload.Store
	// Tags are announced in AgentHello.
	Tags map[string]string
	// RunFolder holds the workloads' files, control interfaces and
	// process records, and the incarnation counter. Default
	// DefaultRunFolder(): $TMPDIR/ankaios, else /tmp/ankaios, as Ankaios.
	RunFolder string
	// Runtimes to offer, by name. Empty means DefaultRuntimes, with
	// podman skipped when it is not available; podman listed explicitly
	// but not available is an error.
	Runtimes []string
	// WorkloadUIDs is the range of uids process workloads run under, one
	// per workload name (process.UIDRange); zero runs them as the
	// agent's user. grapnel-agent's command line defaults to
	// process.DefaultUIDRange.
	WorkloadUIDs process.UIDRange
	// WorkloadPolicy is the level of the workload admission policy
	// (workloadpolicy) the agent enforces before it starts a workload;
	// the zero value is baseline. A workload it refuses is not started:
	// its state is Pending(StartingFailed) naming the field and the
	// level.
	WorkloadPolicy workloadpolicy.Level
	// AllowRootWorkloads is the former name of WorkloadPolicy
	// privileged (--allow-root-workloads), kept as an alias.
	AllowRootWorkloads bool
	// WorkloadUsers are the users a process workload's runtimeConfig may
	// name at baseline (--workload-users); none by default.
	WorkloadUsers []string
	// PodmanBinary is the podman executable; "" is podman from PATH.
	PodmanBinary string
	// Containerd configures the containerd runtime: its socket and
	// namespace ("" for containerd's and nerdctl's defaults). Binary,
	// StopGrace, Logger and Clock are the agent's own.
	Containerd containerd.Config
	// GossipJoin are replica gossip addresses; when given, the agent
	// joins their memberlist pool as a member of role agent.
	GossipJoin []string
	// GossipAddress is the bind address of the agent's memberlist member
	// (DefaultGossipAddress: loopback, any port).
	GossipAddress string
	// GossipKey is the agents' gossip pool's encryption key (16, 24 or
	// 32 bytes; the replicas serve that pool with a key of its own, never
	// their own pool's); nil when gossip is not encrypted.
	GossipKey []byte
	// GossipSecondaryKeys are further keys accepted during a rotation.
	GossipSecondaryKeys [][]byte
	// GossipHangup, with GossipLoadKeys, re-reads the gossip keys on each
	// signal (the agent's main sends one per SIGHUP).
	GossipHangup   <-chan struct{}
	GossipLoadKeys func() (gossipmeta.Keys, error)
	Logger         *slog.Logger
	// LoadInterval is how often CPU usage and free memory are reported
	// (DefaultLoadInterval).
	LoadInterval time.Duration
	// HeartbeatTimeout and HeartbeatInterval tune the stream heartbeat
	// (rpc/client.Options; zero means its defaults).
	HeartbeatTimeout  time.Duration
	HeartbeatInterval time.Duration
	// ResyncInterval is the period of drift repair rounds
	// (workload.Config.ResyncInterval); 0 runs none but those the server
	// asks for (`grapnel agent resync`). grapnel-agent's command line
	// defaults to workload.DefaultResyncInterval.
	ResyncInterval time.Duration
	// Clock drives every timer of the agent: the load reports, the
	// gossip rejoin, the stream's timers (rpc/client.Options Clock and
	// Timers), the runtimes' polls and timeouts, the workload restarts
	// and the control interfaces' waits. Nil is the system clock.
	Clock clock.Clock
	// MaxLogCampaignsPerWorkload caps the log campaigns one workload
	// keeps open through its control interface; MaxLogCampaigns and
	// MaxLogSources cap the campaigns the agent runs for the server and
	// the log readers they hold (docs/agent.md, "Logs and load"). Zero
	// is the default of each.
	MaxLogCampaignsPerWorkload int
	MaxLogCampaigns            int
	MaxLogSources              int
	// Notify tells systemd when the agent is ready, whom it is connected
	// to, and pets the watchdog while the workload Manager answers
	// (docs/operations.md, "systemd"); nil tells nothing.
	Notify *sdnotify.Notifier
	// StorageProbeMin and StorageProbeMax pace the probes of a run folder
	// whose storage failed (agent/storage); zero is the default of each
	// (1 s and 30 s).
	StorageProbeMin, StorageProbeMax time.Duration
}

// policy is the workload policy the agent enforces: its level (privileged
// with the alias AllowRootWorkloads) and its uid range, which no
// container may run as.
func (c Config) policy() workloadpolicy.Policy {
	level := c.WorkloadPolicy
	if c.AllowRootWorkloads {
		level = workloadpolicy.Privileged
	}
	return workloadpolicy.Policy{Level: level, UIDs: workloadpolicy.UIDRange{First: c.WorkloadUIDs.First, Last: c.WorkloadUIDs.Last},
		Owner: fmt.Sprintf("the --workload-policy of agent '%s'", c.Name)}
}

// DefaultRunFolder is $TMPDIR/ankaios, or /tmp/ankaios without TMPDIR.
func DefaultRunFolder() string { return filepath.Join(os.TempDir(), "ankaios") }

// withDefaults fills in what was left empty.
func (c Config) withDefaults() Config {
	if c.RunFolder == "" {
		c.RunFolder = DefaultRunFolder()
	}
	if c.Clock == nil {
		c.Clock = clock.Real()
	}
	if c.Logger == nil {
		c.Logger = slog.Default()
	}
	if c.LoadInterval == 0 {
		c.LoadInterval = DefaultLoadInterval
	}
	if c.GossipAddress == "" {
		c.GossipAddress = DefaultGossipAddress
	}
	return c
}

// validate checks a configuration after withDefaults.
func (c Config) validate() error {
	switch {
	case c.Name == "":
		return fmt.Errorf("%w: name: required", ErrConfig)
	case !state.ValidName(c.Name):
		return fmt.Errorf("%w: name %q: use only [a-zA-Z0-9_-]", ErrConfig, c.Name)
	case len(c.Servers) == 0:
		return fmt.Errorf("%w: servers: no server address", ErrConfig)
	case !c.Insecure && (c.TLS.CA == "" || c.TLS.Cert == "" || c.TLS.Key == ""):
		return fmt.Errorf("%w: tls: give the CA, certificate and key files, or choose insecure mode", ErrConfig)
	case c.LoadInterval < 0:
		return fmt.Errorf("%w: loadInterval %v: must not be negative", ErrConfig, c.LoadInterval)
	case c.ResyncInterval < 0:
		return fmt.Errorf("%w: resyncInterval %v: must not be negative (0 turns the rounds off)", ErrConfig, c.ResyncInterval)
	case c.MaxLogCampaignsPerWorkload < 0:
		return fmt.Errorf("%w: maxLogCampaignsPerWorkload %d: must not be negative (0 is the default)", ErrConfig, c.MaxLogCampaignsPerWorkload)
	case c.MaxLogCampaigns < 0:
		return fmt.Errorf("%w: maxLogCampaigns %d: must not be negative (0 is the default)", ErrConfig, c.MaxLogCampaigns)
	case c.MaxLogSources < 0:
		return fmt.Errorf("%w: maxLogSources %d: must not be negative (0 is the default)", ErrConfig, c.MaxLogSources)
	case c.AllowRootWorkloads && c.WorkloadPolicy == workloadpolicy.Restricted:
		return fmt.Errorf("%w: allowRootWorkloads (workload policy privileged) contradicts workloadPolicy restricted", ErrConfig)
	}
	for i, s := range c.Servers {
		if _, _, err := net.SplitHostPort(s); err != nil {
			return fmt.Errorf("%w: servers[%d] %q: not host:port", ErrConfig, i, s)
		}
	}
	for i, r := range c.Runtimes {
		if !IsKnownRuntime(r) {
			return fmt.Errorf("%w: runtimes[%d] %q: unknown runtime (known: %s)", ErrConfig, i, r, strings.Join(KnownRuntimes, ", "))
		}
		if slices.Index(c.Runtimes, r) != i {
			return fmt.Errorf("%w: runtimes[%d] %q: listed twice", ErrConfig, i, r)
		}
	}
	for i, a := range c.GossipJoin {
		if _, _, err := net.SplitHostPort(a); err != nil {
			return fmt.Errorf("%w: gossipJoin[%d] %q: not host:port (a replica's gossip_address)", ErrConfig, i, a)
		}
	}
	if len(c.GossipJoin) > 0 {
		if _, _, err := net.SplitHostPort(c.GossipAddress); err != nil {
			return fmt.Errorf("%w: gossipAddress %q: not host:port", ErrConfig, c.GossipAddress)
		}
	}
	switch len(c.GossipKey) {
	case 0, 16, 24, 32:
	default:
		return fmt.Errorf("%w: gossipKey: %d bytes; AES needs 16, 24 or 32", ErrConfig, len(c.GossipKey))
	}
	return nil
}
