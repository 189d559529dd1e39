package servercmd

import (
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"strings"
	"time"

	"github.com/grapnel-io/grapnel/cluster"
	"github.com/grapnel-io/grapnel/internal/ankconf"
	"github.com/grapnel-io/grapnel/internal/formats"
	"github.com/grapnel-io/grapnel/internal/gossipmeta"
	"github.com/grapnel-io/grapnel/internal/identity"
	"github.com/grapnel-io/grapnel/internal/layered"
	"github.com/grapnel-io/grapnel/rpc"
	"github.com/grapnel-io/grapnel/server"
	"github.com/grapnel-io/grapnel/state"
	"github.com/grapnel-io/grapnel/workloadpolicy"
)

// defaultConfigPath is where the server looks for its config file.
var defaultConfigPath = "/etc/grapnel/server.yaml"

// defaultGossipAddress is used when the replica forms or joins a cluster
// and no gossip address was given.
const defaultGossipAddress = "127.0.0.1:25571"

// config is the server's start-up configuration. It is assembled from the
// config file, then environment variables, then the command line; a later
// source wins (swdd~server-loads-config-file~1).
type config struct {
	StartupManifest string `yaml:"startup_manifest"`
	Address         string `yaml:"address"`
	Name            string `yaml:"name"`
	DataDir         string `yaml:"data_dir"`
	RaftAddress     string `yaml:"raft_address"`
	Insecure        bool   `yaml:"insecure"`
	CAPem           string `yaml:"ca_pem"`
	CrtPem          string `yaml:"crt_pem"`
	KeyPem          string `yaml:"key_pem"`
	LogLevel        string `yaml:"log_level"`
	// UntypedCertRole is the role of client certificates without a
	// grapnel:// identity (Ankaios-made ones): agent, commander, operator
	// or refuse (docs/security.md).
	UntypedCertRole string `yaml:"untyped_cert_role"`
	// WorkloadPolicy is the level of the workload admission policy
	// (privileged, baseline, restricted) every workload an update adds or
	// changes must pass (docs/security.md).
	WorkloadPolicy string `yaml:"workload_policy"`
	// The PEM contents an Ankaios config file may give instead of the
	// paths (ca_pem_content, ...); a path, from any layer, wins.
	CAPemContent  string `yaml:"-"`
	CrtPemContent string `yaml:"-"`
	KeyPemContent string `yaml:"-"`

	GossipAddress string `yaml:"gossip_address"`
	GossipKeyFile string `yaml:"gossip_key_file"`
	// AgentGossipAddress and AgentGossipKeyFile run the agents' gossip
	// pool, apart from the replicas' (issue 17).
	AgentGossipAddress string `yaml:"agent_gossip_address"`
	AgentGossipKeyFile string `yaml:"agent_gossip_key_file"`
	// SecretKeyFile is the keyring that seals secret config items
	// (docs/secrets.md).
	SecretKeyFile   string       `yaml:"secret_key_file"`
	BootstrapExpect int          `yaml:"bootstrap_expect"`
	Join            layered.List `yaml:"join"`
	MetricsAddress  string       `yaml:"metrics_address"`
	// UIAddress serves the dashboard (docs/operations.md, "Dashboard").
	UIAddress string `yaml:"ui_address"`
	// LeaveOnTerminate makes SIGTERM/SIGINT a graceful leave of the cluster.
	LeaveOnTerminate bool `yaml:"leave_on_terminate"`
	// EnableDebug serves Go's profiler next to the metrics.
	EnableDebug bool `yaml:"enable_debug"`

	// MetricsTLS serves the metrics over HTTPS with the replica's
	// certificates, to a client certificate of MetricsRoles.
	MetricsTLS   bool         `yaml:"metrics_tls"`
	MetricsRoles layered.List `yaml:"metrics_roles"`

	// The caps on connections each listener holds, per source IP and in
	// total, and the gRPC port's handshake deadline (issue 27;
	// docs/security.md, "Resource bounds"). The gRPC total is lowered to
	// what RLIMIT_NOFILE leaves (netbounds.go).
	GRPCMaxConns             int           `yaml:"grpc_max_conns"`
	GRPCMaxConnsPerSource    int           `yaml:"grpc_max_conns_per_source"`
	GRPCHandshakeTimeout     time.Duration `yaml:"grpc_handshake_timeout"`
	RaftMaxConns             int           `yaml:"raft_max_conns"`
	RaftMaxConnsPerSource    int           `yaml:"raft_max_conns_per_source"`
	MetricsMaxConns          int           `yaml:"metrics_max_conns"`
	MetricsMaxConnsPerSource int           `yaml:"metrics_max_conns_per_source"`
	UIMaxConns               int           `yaml:"ui_max_conns"`
	UIMaxConnsPerSource      int           `yaml:"ui_max_conns_per_source"`
	// The bounds on Ankaios streams: the hello deadline, and the streams
	// open at once per agent identity, per other identity and in all.
	HelloTimeout        time.Duration `yaml:"hello_timeout"`
	MaxStreamsPerAgent  int           `yaml:"max_streams_per_agent"`
	MaxStreamsPerClient int           `yaml:"max_streams_per_client"`
	MaxStreams          int           `yaml:"max_streams"`

	AgentReconnectGrace time.Duration `yaml:"agent_reconnect_grace"`
	AgentConnectGrace   time.Duration `yaml:"agent_connect_grace"`
	RPCHoldTimeout      time.Duration `yaml:"rpc_hold_timeout"`
	GroupCommitDelay    time.Duration `yaml:"group_commit_delay"`
	GroupCommitMaxBatch int           `yaml:"group_commit_max_batch"`

	RaftHeartbeatTimeout   time.Duration `yaml:"raft_heartbeat_timeout"`
	RaftElectionTimeout    time.Duration `yaml:"raft_election_timeout"`
	RaftLeaderLeaseTimeout time.Duration `yaml:"raft_leader_lease_timeout"`
	RaftCommitTimeout      time.Duration `yaml:"raft_commit_timeout"`
	RaftHeartbeatInterval  time.Duration `yaml:"raft_heartbeat_interval"`
	// RaftFastFailover lets the dead leader's successor stand for
	// election at once when the leader's Raft port refuses connections
	// (cluster.Config.DisableFastFailover).
	RaftFastFailover bool `yaml:"raft_fast_failover"`
	// ScrubInterval is how often the replica checks its whole Raft log
	// and newest snapshot at rest; negative: never.
	ScrubInterval time.Duration `yaml:"scrub_interval"`
	// RaftLogStore is the Raft log and stable store: wal (the default)
	// or bolt (raft-boltdb/v2 in raft.db).
	RaftLogStore string `yaml:"raft_log_store"`
	// RaftSegmentMiB is the size of one segment file of the Raft log.
	RaftSegmentMiB int `yaml:"raft_segment_mib"`
	// RaftSnapshotThreshold is how many entries since the last snapshot
	// make the replica take one.
	RaftSnapshotThreshold int `yaml:"raft_snapshot_threshold"`
	// UpgradeFinalizeAfter raises the cluster version by itself once
	// every voter has run a release that supports it this long; 0 waits
	// for `grapnel cluster upgrade finalize` (docs/upgrade.md).
	UpgradeFinalizeAfter time.Duration `yaml:"upgrade_finalize_after"`
	// GCPercent is Go's GC target (GOGC) while the replica allocates
	// fast, GCIdlePercent otherwise (see gcTuner); the GOGC variable,
	// when set, wins over both.
	GCPercent     int `yaml:"gc_percent"`
	GCIdlePercent int `yaml:"gc_idle_percent"`
	// IdleProcs is GOMAXPROCS while the replica is idle (0: unchanged;
	// see gcTuner).
	IdleProcs int `yaml:"idle_procs"`

	// The limits on what an update may put into the desired state (see
	// state.Limits and docs/operations.md).
	MaxConfigDepth       int `yaml:"max_config_depth"`
	MaxStringBytes       int `yaml:"max_string_bytes"`
	MaxConfigItemBytes   int `yaml:"max_config_item_bytes"`
	MaxWorkloads         int `yaml:"max_workloads"`
	MaxConfigItems       int `yaml:"max_config_items"`
	MaxWorkloadBytes     int `yaml:"max_workload_bytes"`
	MaxUpdateBytes       int `yaml:"max_update_bytes"`
	MaxDesiredStateBytes int `yaml:"max_desired_state_bytes"`
	MaxAgentBytes        int `yaml:"max_agent_bytes"`
	// MaxRenderStepsPerRequest is the render budget of one request.
	MaxRenderStepsPerRequest int `yaml:"max_render_steps_per_request"`
	// MaxConcurrentDryRuns bounds the dry-runs the leader plans at once.
	MaxConcurrentDryRuns int `yaml:"max_concurrent_dry_runs"`
	// MaxRestoreBytes caps a snapshot upload to `cluster snapshot restore`.
	MaxRestoreBytes int `yaml:"max_restore_bytes"`
	// MaxLogCampaignsPerRequester caps the live log campaigns of one
	// client connection or workload.
	MaxLogCampaignsPerRequester int `yaml:"max_log_campaigns_per_requester"`
	// MaxWorkloadStates caps the workload states the agents' reports can
	// make the cluster hold.
	MaxWorkloadStates int `yaml:"max_workload_states"`
	// MaxEventSubscriptionsPerRequester and MaxEventSubscriptions cap the
	// event subscriptions of one requester and of the leader.
	MaxEventSubscriptionsPerRequester int `yaml:"max_event_subscriptions_per_requester"`
	MaxEventSubscriptions             int `yaml:"max_event_subscriptions"`
	// MaxLocks caps the intent locks the cluster holds.
	MaxLocks int `yaml:"max_locks"`
	// The transaction history's bounds (docs/history.md).
	HistoryMaxEntries int           `yaml:"history_max_entries"`
	HistoryMaxAge     time.Duration `yaml:"history_max_age"`
	HistoryMaxBytes   int           `yaml:"history_max_bytes"`
}

func defaults() config {
	t := cluster.DefaultTiming()
	lim := state.DefaultLimits()
	return config{
		MaxConfigDepth:           lim.MaxConfigDepth,
		MaxStringBytes:           lim.MaxStringBytes,
		MaxConfigItemBytes:       lim.MaxConfigItemBytes,
		MaxWorkloads:             lim.MaxWorkloads,
		MaxConfigItems:           lim.MaxConfigItems,
		MaxWorkloadBytes:         lim.MaxWorkloadBytes,
		MaxUpdateBytes:           lim.MaxUpdateBytes,
		MaxDesiredStateBytes:     lim.MaxDesiredStateBytes,
		MaxAgentBytes:            lim.MaxAgentBytes,
		MaxRenderStepsPerRequest: lim.MaxRenderStepsPerRequest,
		MaxConcurrentDryRuns:     server.DefaultMaxConcurrentDryRuns,
		MaxRestoreBytes:          int(server.DefaultMaxRestoreBytes),
		HistoryMaxEntries:        state.DefaultHistoryMaxEntries,
		HistoryMaxAge:            state.DefaultHistoryMaxAgeMs * time.Millisecond,
		HistoryMaxBytes:          state.DefaultHistoryMaxBytes,
		Address:                  "127.0.0.1:25551",
		Name:                     "server-1",
		DataDir:                  "/var/lib/grapnel",
		RaftAddress:              "127.0.0.1:25561",
		LogLevel:                 "info",
		UntypedCertRole:          "agent",
		WorkloadPolicy:           workloadpolicy.Baseline.String(),
		AgentReconnectGrace:      3 * time.Second,
		AgentConnectGrace:        server.DefaultAgentConnectGrace,
		RPCHoldTimeout:           5 * time.Second,
		GroupCommitDelay:         server.DefaultGroupCommitDelay,
		GroupCommitMaxBatch:      server.DefaultGroupCommitMaxBatch,
		RaftHeartbeatTimeout:     t.HeartbeatTimeout,
		RaftElectionTimeout:      t.ElectionTimeout,
		RaftLeaderLeaseTimeout:   t.LeaderLeaseTimeout,
		RaftCommitTimeout:        t.CommitTimeout,
		RaftFastFailover:         true,
		ScrubInterval:            t.ScrubInterval,
		RaftSegmentMiB:           cluster.DefaultSegmentSize >> 20,
		RaftLogStore:             cluster.LogStoreWAL,
		RaftSnapshotThreshold:    cluster.DefaultSnapshotThreshold,
		GCPercent:                defaultGCPercent,
		GCIdlePercent:            defaultGCIdlePercent,
		IdleProcs:                defaultIdleProcs,

		MaxLogCampaignsPerRequester: server.DefaultMaxLogCampaignsPerRequester,
		MetricsRoles:                layered.List{"operator"},
		GRPCMaxConns:                defaultGRPCConns.Total,
		GRPCMaxConnsPerSource:       defaultGRPCConns.PerSource,
		GRPCHandshakeTimeout:        rpc.DefaultHandshakeTimeout,
		RaftMaxConns:                defaultRaftConns.Total,
		RaftMaxConnsPerSource:       defaultRaftConns.PerSource,
		MetricsMaxConns:             defaultMetricsConns.Total,
		MetricsMaxConnsPerSource:    defaultMetricsConns.PerSource,
		UIMaxConns:                  defaultUIConns.Total,
		UIMaxConnsPerSource:         defaultUIConns.PerSource,
		HelloTimeout:                server.DefaultHelloTimeout,
		MaxStreamsPerAgent:          server.DefaultStreamLimits.PerAgent,
		MaxStreamsPerClient:         server.DefaultStreamLimits.PerClient,
		MaxStreams:                  server.DefaultStreamLimits.Total,

		MaxWorkloadStates:                 server.DefaultMaxWorkloadStates,
		MaxEventSubscriptionsPerRequester: server.DefaultMaxEventSubscriptionsPerRequester,
		MaxEventSubscriptions:             server.DefaultMaxEventSubscriptions,
		MaxLocks:                          server.DefaultMaxLocks,
	}
}

// envPrefix prefixes every environment variable of the server.
const envPrefix = "GRAPNEL_SERVER_"

func options() []layered.Option[config] {
	return []layered.Option[config]{
		// -c and --startup-config are the Ankaios server's older names.
		layered.Opt("startup-manifest", "m", "STARTUP_MANIFEST", "manifest loaded into a fresh cluster", func(c *config) any { return &c.StartupManifest }).Alias("startup-config/c"),
		layered.Opt("address", "a", "ADDRESS", "gRPC address for agents and CLIs", func(c *config) any { return &c.Address }).Upstream("ANKSERVER_SERVER_URL"),
		layered.Opt("name", "", "NAME", "replica id, unique in the cluster", func(c *config) any { return &c.Name }),
		layered.Opt("data-dir", "", "DATA_DIR", "Raft log, stable store and snapshots", func(c *config) any { return &c.DataDir }),
		layered.Opt("raft-address", "", "RAFT_ADDRESS", "Raft transport address", func(c *config) any { return &c.RaftAddress }),
		layered.Opt("gossip-address", "", "GOSSIP_ADDRESS", "memberlist address (default "+defaultGossipAddress+" when forming or joining a cluster)", func(c *config) any { return &c.GossipAddress }),
		layered.Opt("gossip-key-file", "", "GOSSIP_KEY_FILE", "file holding the base64 AES key (16, 24 or 32 bytes) that encrypts the replicas' gossip, mode 0600 or 0400; required with TLS; several lines during a rotation, the first used to send (re-read on SIGHUP)", func(c *config) any { return &c.GossipKeyFile }),
		layered.Opt("agent-gossip-address", "", "AGENT_GOSSIP_ADDRESS", "address of the agents' gossip pool, apart from the replicas' (off when empty)", func(c *config) any { return &c.AgentGossipAddress }),
		layered.Opt("agent-gossip-key-file", "", "AGENT_GOSSIP_KEY_FILE", "key file of the agents' gossip pool (as --gossip-key-file, a different key); required with TLS when --agent-gossip-address is set", func(c *config) any { return &c.AgentGossipKeyFile }),
		layered.Opt("secret-key-file", "", "SECRET_KEY_FILE", "keyring that seals secret config items: one `ID BASE64KEY` a line (32-byte keys), the first one seals; mode 0600 (docs/secrets.md)", func(c *config) any { return &c.SecretKeyFile }),
		layered.Opt("bootstrap-expect", "", "BOOTSTRAP_EXPECT", "form a new cluster once this many replicas see each other (0 or 1: a single replica)", func(c *config) any { return &c.BootstrapExpect }),
		layered.Opt("join", "", "JOIN", "gossip address of a replica to join (repeatable; env: comma-separated)", func(c *config) any { return &c.Join }),
		layered.Opt("metrics-address", "", "METRICS_ADDRESS", "serve Prometheus metrics on ADDR/metrics, conventionally port 25581; an address without a host (:9100) is 127.0.0.1 (off when empty)", func(c *config) any { return &c.MetricsAddress }),
		layered.Opt("metrics-tls", "", "METRICS_TLS", "serve the metrics over https with the replica's certificates, to a client certificate of the CA with a role of --metrics-roles", func(c *config) any { return &c.MetricsTLS }),
		layered.Opt("metrics-roles", "", "METRICS_ROLES", "roles whose client certificate may read the metrics with --metrics-tls (repeatable; env: comma-separated)", func(c *config) any { return &c.MetricsRoles }),
		layered.Opt("grpc-max-conns", "", "GRPC_MAX_CONNS", "connections the gRPC port holds at once; lowered at start to what RLIMIT_NOFILE leaves after the other listeners and a reserve for files and gossip", func(c *config) any { return &c.GRPCMaxConns }),
		layered.Opt("grpc-max-conns-per-source", "", "GRPC_MAX_CONNS_PER_SOURCE", "connections the gRPC port holds at once from one IP address", func(c *config) any { return &c.GRPCMaxConnsPerSource }),
		layered.Opt("grpc-handshake-timeout", "", "GRPC_HANDSHAKE_TIMEOUT", "time a new gRPC connection has to finish its TLS handshake and HTTP/2 preface before it is closed", func(c *config) any { return &c.GRPCHandshakeTimeout }),
		layered.Opt("raft-max-conns", "", "RAFT_MAX_CONNS", "connections the Raft port holds at once", func(c *config) any { return &c.RaftMaxConns }),
		layered.Opt("raft-max-conns-per-source", "", "RAFT_MAX_CONNS_PER_SOURCE", "connections the Raft port holds at once from one IP address", func(c *config) any { return &c.RaftMaxConnsPerSource }),
		layered.Opt("metrics-max-conns", "", "METRICS_MAX_CONNS", "connections the metrics address holds at once", func(c *config) any { return &c.MetricsMaxConns }),
		layered.Opt("metrics-max-conns-per-source", "", "METRICS_MAX_CONNS_PER_SOURCE", "connections the metrics address holds at once from one IP address", func(c *config) any { return &c.MetricsMaxConnsPerSource }),
		layered.Opt("ui-max-conns", "", "UI_MAX_CONNS", "connections the dashboard holds at once", func(c *config) any { return &c.UIMaxConns }),
		layered.Opt("ui-max-conns-per-source", "", "UI_MAX_CONNS_PER_SOURCE", "connections the dashboard holds at once from one IP address", func(c *config) any { return &c.UIMaxConnsPerSource }),
		layered.Opt("hello-timeout", "", "HELLO_TIMEOUT", "time an Ankaios stream has to send its hello (AgentHello, CommanderHello) before it is ended", func(c *config) any { return &c.HelloTimeout }),
		layered.Opt("max-streams-per-agent", "", "MAX_STREAMS_PER_AGENT", "Ankaios streams open at once per agent identity (a replacing hello needs two for a moment)", func(c *config) any { return &c.MaxStreamsPerAgent }),
		layered.Opt("max-streams-per-client", "", "MAX_STREAMS_PER_CLIENT", "Ankaios streams open at once per commander or operator identity", func(c *config) any { return &c.MaxStreamsPerClient }),
		layered.Opt("max-streams", "", "MAX_STREAMS", "Ankaios streams open at once on this replica, all identities together", func(c *config) any { return &c.MaxStreams }),
		layered.Opt("ui-address", "", "UI_ADDRESS", "serve the dashboard on ADDR, conventionally port 25582 (https with the replica's certificates and a client certificate of role operator or commander; http with --insecure; off when empty)", func(c *config) any { return &c.UIAddress }),
		layered.Opt("agent-reconnect-grace", "", "AGENT_RECONNECT_GRACE", "after a failover, time agents get to reconnect before their workloads turn AgentDisconnected", func(c *config) any { return &c.AgentReconnectGrace }),
		layered.Opt("agent-connect-grace", "", "AGENT_CONNECT_GRACE", "time an agent with workloads assigned may take to connect for the first time before the problems view reports it", func(c *config) any { return &c.AgentConnectGrace }),
		layered.Opt("rpc-hold-timeout", "", "RPC_HOLD_TIMEOUT", "how long a request waits for a leader before it fails with 'no leader'", func(c *config) any { return &c.RPCHoldTimeout }),
		layered.Opt("group-commit-delay", "", "GROUP_COMMIT_DELAY", "how long an update that arrives while another batch commits may wait for more to join it (0: none)", func(c *config) any { return &c.GroupCommitDelay }),
		layered.Opt("group-commit-max-batch", "", "GROUP_COMMIT_MAX_BATCH", "the most updates the leader puts in one Raft entry (1: each its own entry, batched by Raft alone)", func(c *config) any { return &c.GroupCommitMaxBatch }),
		layered.Opt("raft-heartbeat-timeout", "", "RAFT_HEARTBEAT_TIMEOUT", "follower: time without leader contact before an election", func(c *config) any { return &c.RaftHeartbeatTimeout }),
		layered.Opt("raft-election-timeout", "", "RAFT_ELECTION_TIMEOUT", "candidate: time before a new election round", func(c *config) any { return &c.RaftElectionTimeout }),
		layered.Opt("raft-leader-lease-timeout", "", "RAFT_LEADER_LEASE_TIMEOUT", "leader: time without quorum contact before it steps down", func(c *config) any { return &c.RaftLeaderLeaseTimeout }),
		layered.Opt("raft-commit-timeout", "", "RAFT_COMMIT_TIMEOUT", "leader: longest wait before an idle AppendEntries tells followers the commit index", func(c *config) any { return &c.RaftCommitTimeout }),
		layered.Opt("raft-fast-failover", "", "RAFT_FAST_FAILOVER", "when a follower's connection from the leader ends and the leader's Raft port refuses a new one (its process is gone), the next voter after it in id order stands for election at once instead of after the heartbeat timeout; false: the timeouts alone (docs/replication.md)", func(c *config) any { return &c.RaftFastFailover }),
		layered.Opt("raft-heartbeat-interval", "", "RAFT_HEARTBEAT_INTERVAL", "leader: time between its heartbeats to the followers, all sent at once; Raft's own follow one to two intervals after the last if they are late (0: five twelfths of the shorter of the heartbeat and lease timeouts, 125 ms by default)", func(c *config) any { return &c.RaftHeartbeatInterval }),
		layered.Opt("upgrade-finalize-after", "", "UPGRADE_FINALIZE_AFTER", "finalize a rolling upgrade by itself once every voter has supported the new cluster version this long; 0 (the default) waits for `grapnel cluster upgrade finalize`, which the OTA manager runs once it has confirmed the update (docs/upgrade.md)", func(c *config) any { return &c.UpgradeFinalizeAfter }),
		layered.Opt("scrub-interval", "", "SCRUB_INTERVAL", "how often the replica reads back and checks its whole Raft log and newest snapshot, so that data corrupted at rest is found and repaired from the peers (negative: never)", func(c *config) any { return &c.ScrubInterval }),
		layered.Opt("raft-snapshot-threshold", "", "RAFT_SNAPSHOT_THRESHOLD", "entries since the last snapshot that make the replica take one (checked every 5 to 10 s); the log keeps 10,240 entries behind it", func(c *config) any { return &c.RaftSnapshotThreshold }),
		layered.Opt("raft-log-store", "", "RAFT_LOG_STORE", "where the replica keeps its Raft log: wal (segment files under DATA_DIR/wal, one fdatasync per commit) or bolt (raft-boltdb/v2 in DATA_DIR/raft.db, two per commit); a raft.db is moved into the WAL on a start with wal, a WAL is never moved back (docs/replication.md)", func(c *config) any { return &c.RaftLogStore }),
		layered.Opt("raft-segment-mib", "", "RAFT_SEGMENT_MIB", "MiB of one Raft log segment file, allocated when it is opened and deleted once a snapshot covers it", func(c *config) any { return &c.RaftSegmentMiB }),
		layered.Opt("gc-percent", "", "GC_PERCENT", "Go GC target while the replica allocates fast (2 MiB/s or more) and at the start: the heap may grow this many percent over live data between collections (the GOGC variable wins)", func(c *config) any { return &c.GCPercent }),
		layered.Opt("gc-idle-percent", "", "GC_IDLE_PERCENT", "Go GC target while the replica allocates little (under 1 MiB/s), which keeps an idle replica's heap small (at least --gc-percent: that target always; the GOGC variable wins)", func(c *config) any { return &c.GCIdlePercent }),
		layered.Opt("idle-procs", "", "IDLE_PROCS", "Ps (GOMAXPROCS) the replica runs on while it allocates little, as for --gc-idle-percent; all of them again within about a second of load (0: all always; the GOMAXPROCS variable wins)", func(c *config) any { return &c.IdleProcs }),
		layered.Opt("max-config-depth", "", "MAX_CONFIG_DEPTH", "deepest nesting of lists and maps in one config item", func(c *config) any { return &c.MaxConfigDepth }),
		layered.Opt("max-string-bytes", "", "MAX_STRING_BYTES", "longest string of a workload or config item (runtimeConfig, file content, value)", func(c *config) any { return &c.MaxStringBytes }),
		layered.Opt("max-config-item-bytes", "", "MAX_CONFIG_ITEM_BYTES", "largest config item", func(c *config) any { return &c.MaxConfigItemBytes }),
		layered.Opt("max-workloads", "", "MAX_WORKLOADS", "most workloads in the desired state", func(c *config) any { return &c.MaxWorkloads }),
		layered.Opt("max-config-items", "", "MAX_CONFIG_ITEMS", "most config items in the desired state", func(c *config) any { return &c.MaxConfigItems }),
		layered.Opt("max-workload-bytes", "", "MAX_WORKLOAD_BYTES", "largest workload, as written and as rendered", func(c *config) any { return &c.MaxWorkloadBytes }),
		layered.Opt("max-update-bytes", "", "MAX_UPDATE_BYTES", "largest update: what it renders and its Raft entry", func(c *config) any { return &c.MaxUpdateBytes }),
		layered.Opt("max-desired-state-bytes", "", "MAX_DESIRED_STATE_BYTES", "largest desired state (workloads as written and config items)", func(c *config) any { return &c.MaxDesiredStateBytes }),
		layered.Opt("max-agent-bytes", "", "MAX_AGENT_BYTES", "largest set of rendered workloads one agent runs (its ServerHello)", func(c *config) any { return &c.MaxAgentBytes }),
		layered.Opt("max-render-steps-per-request", "", "MAX_RENDER_STEPS_PER_REQUEST", "render budget of one update or dry-run, all its templates together: parsing, every element visited, every #each iteration (nested loops multiply), every name looked up; about 1 µs each, so it bounds how long one update holds the leader", func(c *config) any { return &c.MaxRenderStepsPerRequest }),
		layered.Opt("max-concurrent-dry-runs", "", "MAX_CONCURRENT_DRY_RUNS", "dry-runs the leader plans at once, off its loop; 4 times as many more wait, the rest are refused (ResourceExhausted)", func(c *config) any { return &c.MaxConcurrentDryRuns }),
		layered.Opt("max-restore-bytes", "", "MAX_RESTORE_BYTES", "largest snapshot upload that cluster snapshot restore accepts (it is spooled under the data dir)", func(c *config) any { return &c.MaxRestoreBytes }),
		layered.Opt("max-workload-states", "", "MAX_WORKLOAD_STATES", "workload states the agents' reports may make the cluster hold: a reported state of an instance the cluster has no state for is dropped while it holds this many (the states of the desired state's instances always count)", func(c *config) any { return &c.MaxWorkloadStates }),
		layered.Opt("max-event-subscriptions-per-requester", "", "MAX_EVENT_SUBSCRIPTIONS_PER_REQUESTER", "event subscriptions one client connection or workload may hold; a subscribing request past it is answered with an error", func(c *config) any { return &c.MaxEventSubscriptionsPerRequester }),
		layered.Opt("max-event-subscriptions", "", "MAX_EVENT_SUBSCRIPTIONS", "event subscriptions the leader holds in all; a subscribing request past it is answered with an error (every commit costs the leader loop an event per matching subscription)", func(c *config) any { return &c.MaxEventSubscriptions }),
		layered.Opt("max-locks", "", "MAX_LOCKS", "intent locks the cluster holds; a lock call that would take more is refused (renewals add none)", func(c *config) any { return &c.MaxLocks }),
		layered.Opt("max-log-campaigns-per-requester", "", "MAX_LOG_CAMPAIGNS_PER_REQUESTER", "live log campaigns one client connection or workload may have; a logs request past it is answered with an error and no agent is asked", func(c *config) any { return &c.MaxLogCampaignsPerRequester }),
		layered.Opt("history-max-entries", "", "HISTORY_MAX_ENTRIES", "transactions the replicated history keeps (and, apart, execution-state transitions)", func(c *config) any { return &c.HistoryMaxEntries }),
		layered.Opt("history-max-age", "", "HISTORY_MAX_AGE", "history records older than this before the newest are dropped", func(c *config) any { return &c.HistoryMaxAge }),
		layered.Opt("history-max-bytes", "", "HISTORY_MAX_BYTES", "the history's estimated size in a snapshot, transactions and transitions together", func(c *config) any { return &c.HistoryMaxBytes }),
		layered.Opt("enable-debug", "", "ENABLE_DEBUG", "serve Go's profiler under /debug/pprof/ on the metrics address", func(c *config) any { return &c.EnableDebug }),
		layered.Opt("leave-on-terminate", "", "LEAVE_ON_TERMINATE", "on SIGTERM/SIGINT leave the cluster for good instead of stopping as a member that will come back", func(c *config) any { return &c.LeaveOnTerminate }),
		// The Ankaios server reads these four from ANKSERVER_* variables too.
		layered.Opt("insecure", "k", "INSECURE", "serve without TLS (development only)", func(c *config) any { return &c.Insecure }).Upstream("ANKSERVER_INSECURE"),
		layered.Opt("ca_pem", "", "CA_PEM", "CA certificate (PEM)", func(c *config) any { return &c.CAPem }).Upstream("ANKSERVER_CA_PEM"),
		layered.Opt("crt_pem", "", "CRT_PEM", "server certificate (PEM)", func(c *config) any { return &c.CrtPem }).Upstream("ANKSERVER_CRT_PEM"),
		layered.Opt("key_pem", "", "KEY_PEM", "server key (PEM)", func(c *config) any { return &c.KeyPem }).Upstream("ANKSERVER_KEY_PEM"),
		layered.Opt("workload-policy", "", "WORKLOAD_POLICY", "workload admission policy every workload an update adds or changes must pass: privileged, baseline or restricted (each agent enforces its own too)", func(c *config) any { return &c.WorkloadPolicy }),
		layered.Opt("untyped-cert-role", "", "UNTYPED_CERT_ROLE", "role of a client certificate without a grapnel:// identity, e.g. one made for Ankaios (its DNS names are agent names): agent, commander, operator or refuse", func(c *config) any { return &c.UntypedCertRole }),
		layered.Opt("log-level", "", "LOG_LEVEL", "debug, info, warn or error", func(c *config) any { return &c.LogLevel }),
	}
}

// upstreamConfigPath is the Ankaios server's config file, read when
// defaultConfigPath is absent.
var upstreamConfigPath = ankconf.ServerPath

// loadConfig resolves the configuration from args, the environment
// (lookup) and the config file; --version goes to stdout and the warnings
// about an Ankaios config file to stderr.
func loadConfig(args []string, lookup func(string) (string, bool)) (config, error) {
	return loadConfigTo(args, lookup, os.Stdout, os.Stderr)
}

// loadConfigTo is loadConfig writing to stdout and stderr.
func loadConfigTo(args []string, lookup func(string) (string, bool), stdout, stderr io.Writer) (config, error) {
	cfg, err := layered.Load(layered.Spec[config]{
		Program: "grapnel-server", What: "server config", Prefix: envPrefix,
		// The Ankaios server's flag has the same name.
		ConfigFlag: "server-config", ConfigShort: "x",
		DefaultPath: defaultConfigPath, Defaults: defaults, Options: options(),
		UpstreamPath: upstreamConfigPath, Upstream: applyAnkaiosConfig,
		// --version: the version line, then the formats of the release
		// (internal/formats); Println adds the last newline.
		Version: func() string {
			return strings.TrimSuffix(formats.VersionText("grapnel-server", rpc.ProtocolVersion), "\n")
		}, Out: stdout,
		Warn: func(w string) { fmt.Fprintf(stderr, "grapnel-server: warning: %s\n", w) },
	}, args, lookup)
	if err != nil {
		return config{}, err
	}
	if cfg.GossipAddress == "" && (cfg.BootstrapExpect > 1 || len(cfg.Join) > 0) {
		cfg.GossipAddress = defaultGossipAddress
	}
	if err := layered.AbsPaths(map[string]*string{
		"startup-manifest": &cfg.StartupManifest, "data-dir": &cfg.DataDir,
		"ca_pem": &cfg.CAPem, "crt_pem": &cfg.CrtPem, "key_pem": &cfg.KeyPem,
		"gossip-key-file": &cfg.GossipKeyFile, "agent-gossip-key-file": &cfg.AgentGossipKeyFile,
		"secret-key-file": &cfg.SecretKeyFile,
	}); err != nil {
		return config{}, err
	}
	return cfg, cfg.validate()
}

// applyAnkaiosConfig applies an Ankaios server config file (TOML) to c:
// every key it has maps to the Grapnel setting of the same name.
func applyAnkaiosConfig(path string, data []byte, c *config) ([]string, error) {
	f, err := ankconf.Parse(ankconf.Server, path, data)
	if err != nil {
		return nil, err
	}
	f.Set(map[string]any{
		"startup_manifest": &c.StartupManifest, "address": &c.Address, "insecure": &c.Insecure,
		"ca_pem": &c.CAPem, "crt_pem": &c.CrtPem, "key_pem": &c.KeyPem,
		"ca_pem_content": &c.CAPemContent, "crt_pem_content": &c.CrtPemContent, "key_pem_content": &c.KeyPemContent,
	})
	return f.Warnings, nil
}

// errNoSecurityMode is the refusal to start without an explicit choice of
// mTLS or insecure mode.
var errNoSecurityMode = errors.New("missing certificate files: give --ca_pem, --crt_pem and --key_pem " +
	"(or GRAPNEL_SERVER_CA_PEM, ...), or choose insecure mode explicitly with --insecure/-k")

// validate checks the combination of options.
//
// swdd~server-fails-on-missing-file-paths-and-insecure-cli-arguments~1
func (c config) validate() error {
	files := c.tlsFiles()
	if !c.Insecure {
		if c.CAPem == "" && c.CAPemContent == "" || c.CrtPem == "" && c.CrtPemContent == "" || c.KeyPem == "" && c.KeyPemContent == "" {
			return errNoSecurityMode
		}
		if err := rpc.CheckPEMPermissions(files); err != nil {
			return err
		}
	}
	if _, err := c.untypedRole(); err != nil {
		return err
	}
	if _, err := c.workloadPolicy(); err != nil {
		return err
	}
	if c.Name == "" || !validID(c.Name) {
		return fmt.Errorf("--name %q: a replica id uses only [a-zA-Z0-9_-]", c.Name)
	}
	if c.BootstrapExpect < 0 {
		return fmt.Errorf("--bootstrap-expect %d: must be 0 or more", c.BootstrapExpect)
	}
	if c.BootstrapExpect == 2 {
		return errors.New("--bootstrap-expect 2: two voters have no fault tolerance (losing either stops the cluster); use 1, 3 or 5")
	}
	for name, d := range map[string]time.Duration{
		"--raft-heartbeat-timeout": c.RaftHeartbeatTimeout, "--raft-election-timeout": c.RaftElectionTimeout,
		"--raft-leader-lease-timeout": c.RaftLeaderLeaseTimeout, "--raft-commit-timeout": c.RaftCommitTimeout,
		"--rpc-hold-timeout": c.RPCHoldTimeout,
	} {
		if d <= 0 {
			return fmt.Errorf("%s %v: must be positive", name, d)
		}
	}
	if c.GossipAddress != "" {
		// In a cluster the gRPC address is advertised to the other
		// replicas (the follower proxy dials it) and to clients.
		if host, _, err := net.SplitHostPort(c.Address); err == nil {
			if ip := net.ParseIP(host); host == "" || ip != nil && ip.IsUnspecified() {
				return fmt.Errorf("--address %q: in a cluster give the address peers and clients reach this replica on, not a wildcard", c.Address)
			}
		}
	}
	// One port cannot serve both: the second listener would fail at
	// start with "address already in use" (the docs once gave 25581 to
	// both; the examples use 25581 and 25582).
	if c.MetricsAddress != "" && c.MetricsAddress == c.UIAddress {
		return fmt.Errorf("--ui-address %q: the same address as --metrics-address; give the dashboard a port of its own (the examples use 25581 for metrics, 25582 for the dashboard)", c.UIAddress)
	}
	if err := c.validateGossipKeys(); err != nil {
		return err
	}
	if c.UpgradeFinalizeAfter < 0 {
		return fmt.Errorf("--upgrade-finalize-after %v: must not be negative (0 waits for grapnel cluster upgrade finalize)", c.UpgradeFinalizeAfter)
	}
	if c.RaftSnapshotThreshold < 16 || c.RaftSnapshotThreshold > 1<<20 {
		return fmt.Errorf("--raft-snapshot-threshold %d: must be 16 to 1048576", c.RaftSnapshotThreshold)
	}
	if c.RaftLogStore != cluster.LogStoreWAL && c.RaftLogStore != cluster.LogStoreBolt {
		return fmt.Errorf("--raft-log-store %q: must be %s or %s", c.RaftLogStore, cluster.LogStoreWAL, cluster.LogStoreBolt)
	}
	if c.RaftSegmentMiB < 1 || c.RaftSegmentMiB > 1024 {
		return fmt.Errorf("--raft-segment-mib %d: must be 1 to 1024", c.RaftSegmentMiB)
	}
	if c.GCPercent < 25 {
		return fmt.Errorf("--gc-percent %d: must be at least 25 (lower spends most of the CPU collecting)", c.GCPercent)
	}
	if c.IdleProcs < 0 {
		return fmt.Errorf("--idle-procs %d: must be 0 (all) or more", c.IdleProcs)
	}
	if c.GCIdlePercent < 25 {
		return fmt.Errorf("--gc-idle-percent %d: must be at least 25 (lower spends most of the CPU collecting)", c.GCIdlePercent)
	}
	if c.GroupCommitDelay < 0 || c.GroupCommitDelay > 100*time.Millisecond {
		return fmt.Errorf("--group-commit-delay %v: must be 0 to 100ms", c.GroupCommitDelay)
	}
	if c.GroupCommitMaxBatch < 1 || c.GroupCommitMaxBatch > 1024 {
		return fmt.Errorf("--group-commit-max-batch %d: must be 1 to 1024", c.GroupCommitMaxBatch)
	}
	if err := c.validateLimits(); err != nil {
		return err
	}
	if c.MaxRestoreBytes <= 0 {
		return fmt.Errorf("--max-restore-bytes %d: must be positive", c.MaxRestoreBytes)
	}
	if c.MaxEventSubscriptionsPerRequester <= 0 {
		return fmt.Errorf("--max-event-subscriptions-per-requester %d: must be positive", c.MaxEventSubscriptionsPerRequester)
	}
	if c.MaxEventSubscriptions <= 0 {
		return fmt.Errorf("--max-event-subscriptions %d: must be positive", c.MaxEventSubscriptions)
	}
	if c.MaxLocks <= 0 {
		return fmt.Errorf("--max-locks %d: must be positive", c.MaxLocks)
	}
	if c.MaxWorkloadStates <= 0 {
		return fmt.Errorf("--max-workload-states %d: must be positive", c.MaxWorkloadStates)
	}
	if c.MaxLogCampaignsPerRequester <= 0 {
		return fmt.Errorf("--max-log-campaigns-per-requester %d: must be positive", c.MaxLogCampaignsPerRequester)
	}
	if c.HistoryMaxEntries <= 0 || c.HistoryMaxEntries > 1<<20 {
		return fmt.Errorf("--history-max-entries %d: must be between 1 and %d", c.HistoryMaxEntries, 1<<20)
	}
	if c.HistoryMaxAge < time.Second {
		return fmt.Errorf("--history-max-age %v: must be at least 1s", c.HistoryMaxAge)
	}
	if err := c.validateBounds(); err != nil {
		return err
	}
	if c.HistoryMaxBytes < 4096 {
		return fmt.Errorf("--history-max-bytes %d: must be at least 4096", c.HistoryMaxBytes)
	}
	if c.AgentConnectGrace < 0 {
		return fmt.Errorf("--agent-connect-grace %v: must not be negative", c.AgentConnectGrace)
	}
	if c.AgentReconnectGrace < 0 {
		return fmt.Errorf("--agent-reconnect-grace %v: must not be negative", c.AgentReconnectGrace)
	}
	if c.RaftLeaderLeaseTimeout > c.RaftHeartbeatTimeout {
		return fmt.Errorf("--raft-leader-lease-timeout %v: must not exceed --raft-heartbeat-timeout %v (Raft refuses it)", c.RaftLeaderLeaseTimeout, c.RaftHeartbeatTimeout)
	}
	if c.RaftHeartbeatInterval < 0 || 2*c.RaftHeartbeatInterval >= c.RaftLeaderLeaseTimeout {
		return fmt.Errorf("--raft-heartbeat-interval %v: must be 0 or shorter than half of --raft-leader-lease-timeout %v (a leader would step down after one late heartbeat)", c.RaftHeartbeatInterval, c.RaftLeaderLeaseTimeout)
	}
	return nil
}

func (c config) tlsFiles() rpc.TLSFiles {
	return rpc.TLSFiles{CA: c.CAPem, Cert: c.CrtPem, Key: c.KeyPem,
		CAPEM: c.CAPemContent, CertPEM: c.CrtPemContent, KeyPEM: c.KeyPemContent}
}

func (c config) timing() cluster.Timing {
	return cluster.Timing{
		HeartbeatTimeout:   c.RaftHeartbeatTimeout,
		ElectionTimeout:    c.RaftElectionTimeout,
		LeaderLeaseTimeout: c.RaftLeaderLeaseTimeout,
		CommitTimeout:      c.RaftCommitTimeout,
		HeartbeatInterval:  c.RaftHeartbeatInterval,
		ScrubInterval:      c.ScrubInterval,
	}
}

func validID(s string) bool {
	for _, r := range s {
		if !(r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || r == '_' || r == '-') {
			return false
		}
	}
	return s != ""
}

// limits are the configured limits on the desired state.
func (c config) limits() state.Limits {
	return state.Limits{
		MaxConfigDepth: c.MaxConfigDepth, MaxStringBytes: c.MaxStringBytes, MaxConfigItemBytes: c.MaxConfigItemBytes,
		MaxWorkloads: c.MaxWorkloads, MaxConfigItems: c.MaxConfigItems, MaxWorkloadBytes: c.MaxWorkloadBytes,
		MaxUpdateBytes: c.MaxUpdateBytes, MaxDesiredStateBytes: c.MaxDesiredStateBytes, MaxAgentBytes: c.MaxAgentBytes,
		MaxRenderStepsPerRequest: c.MaxRenderStepsPerRequest,
	}
}

// maxMessageBytes is the gRPC message limit the byte limits must stay
// under, with room for the message around what they bound.
const maxMessageBytes = 4 << 20

// validateLimits checks that every limit is set and that the ones a
// message carries whole fit the gRPC message limit: a larger desired
// state could be accepted and then never be read back.
func (c config) validateLimits() error {
	for _, l := range []struct {
		flag      string
		v, lo, hi int
	}{
		{"--max-config-depth", c.MaxConfigDepth, 1, 1000},
		{"--max-string-bytes", c.MaxStringBytes, 1, maxMessageBytes * 7 / 8},
		{"--max-config-item-bytes", c.MaxConfigItemBytes, 1, maxMessageBytes * 7 / 8},
		{"--max-workloads", c.MaxWorkloads, 1, 100000},
		{"--max-config-items", c.MaxConfigItems, 1, 100000},
		{"--max-workload-bytes", c.MaxWorkloadBytes, 1, maxMessageBytes * 7 / 8},
		{"--max-update-bytes", c.MaxUpdateBytes, 1, maxMessageBytes * 7 / 8},
		{"--max-desired-state-bytes", c.MaxDesiredStateBytes, 1, maxMessageBytes * 7 / 8},
		{"--max-agent-bytes", c.MaxAgentBytes, 1, maxMessageBytes * 7 / 8},
		// At most about a minute of rendering.
		{"--max-render-steps-per-request", c.MaxRenderStepsPerRequest, 1, 1 << 26},
		{"--max-concurrent-dry-runs", c.MaxConcurrentDryRuns, 1, 64},
	} {
		if l.v < l.lo || l.v > l.hi {
			return fmt.Errorf("%s %d: must be %d to %d", l.flag, l.v, l.lo, l.hi)
		}
	}
	return nil
}

// workloadPolicy is WorkloadPolicy as the server takes it.
func (c config) workloadPolicy() (workloadpolicy.Level, error) {
	l, err := workloadpolicy.ParseLevel(c.WorkloadPolicy)
	if err != nil {
		return l, fmt.Errorf("--workload-policy %v", err)
	}
	return l, nil
}

// untypedRole is UntypedCertRole as the server takes it; "refuse" is
// identity.None, which refuses untyped certificates.
func (c config) untypedRole() (identity.Role, error) {
	if c.UntypedCertRole == "refuse" {
		return identity.None, nil
	}
	r, err := identity.ParseRole(c.UntypedCertRole)
	if err != nil || r == identity.Replica {
		return identity.None, fmt.Errorf("--untyped-cert-role %q: must be agent, commander, operator or refuse (a replica's certificate always names it)", c.UntypedCertRole)
	}
	return r, nil
}

// validateGossipKeys: with TLS, gossip is encrypted, and the agents' pool
// has a key of its own (issue 17). The files themselves are read, and
// their modes checked, by readGossipKeys.
func (c config) validateGossipKeys() error {
	if c.AgentGossipAddress != "" {
		if c.GossipAddress == "" {
			return fmt.Errorf("--agent-gossip-address %q: needs --gossip-address (or --join / --bootstrap-expect)", c.AgentGossipAddress)
		}
		if _, _, err := net.SplitHostPort(c.AgentGossipAddress); err != nil {
			return fmt.Errorf("--agent-gossip-address %q: not host:port", c.AgentGossipAddress)
		}
	}
	if c.Insecure {
		return nil
	}
	if c.GossipAddress != "" && c.GossipKeyFile == "" {
		return errors.New("--gossip-key-file (config gossip_key_file) is required with TLS: unencrypted gossip lets anyone on the network read and forge the replicas' announcements; " +
			"create one with `head -c32 /dev/urandom | base64 > FILE; chmod 600 FILE`, or run with --insecure")
	}
	if c.AgentGossipAddress != "" && c.AgentGossipKeyFile == "" {
		return errors.New("--agent-gossip-key-file (config agent_gossip_key_file) is required with TLS when --agent-gossip-address is set; it must be a different key from --gossip-key-file")
	}
	if c.AgentGossipKeyFile != "" && c.AgentGossipKeyFile == c.GossipKeyFile {
		return fmt.Errorf("--agent-gossip-key-file %s: the same file as --gossip-key-file; agents must not hold the replicas' key", c.AgentGossipKeyFile)
	}
	return nil
}

// readGossipKeys reads both key files (modes checked), refusing an agents'
// key that is also a replicas' key.
func (c config) readGossipKeys() (replicas, agents gossipmeta.Keys, err error) {
	if replicas, err = gossipmeta.ReadKeyFile(c.GossipKeyFile); err != nil {
		return nil, nil, err
	}
	if agents, err = gossipmeta.ReadKeys("--agent-gossip-key-file", c.AgentGossipKeyFile); err != nil {
		return nil, nil, err
	}
	if agents.Shares(replicas) {
		return nil, nil, fmt.Errorf("--agent-gossip-key-file %s: holds a key of --gossip-key-file %s; agents must not hold the replicas' key", c.AgentGossipKeyFile, c.GossipKeyFile)
	}
	return replicas, agents, nil
}
