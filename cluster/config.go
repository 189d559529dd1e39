package cluster

import (
	"fmt"
	"io"
	"log/slog"
	"net"
	"time"

	"github.com/hashicorp/memberlist"
	"github.com/hashicorp/raft"

	"github.com/grapnel-io/grapnel/internal/clock"
	"github.com/grapnel-io/grapnel/internal/connlimit"
	"github.com/grapnel-io/grapnel/internal/gossipmeta"
	"github.com/grapnel-io/grapnel/internal/tlsreload"
)

// Config configures a Node.
type Config struct {
	// ID is this replica's Raft server id and gossip node name.
	ID string
	// DataDir holds the Raft log (wal/, or raft.db) and the snapshots.
	DataDir string
	// RaftAddress is the address the Raft transport binds and advertises.
	RaftAddress string
	// GRPCAddress is the client address this replica serves on; gossip
	// tells other replicas and clients about it.
	GRPCAddress string
	// UIAddress is the dashboard address this replica serves on (empty:
	// none); gossip tells the other replicas, whose dashboards list it.
	UIAddress string
	// Version is the binary's version, carried in gossip metadata.
	Version string
	// SupportedClusterVersion, when set, is the newest cluster version
	// this replica announces and lets the cluster reach; nil is its
	// build's (state.MaxClusterVersion). A replica given less behaves, for
	// the cluster version, as a release that supports only that: the
	// tests of a rolling upgrade pose as an older release with it.
	SupportedClusterVersion *uint32
	// UpgradeFinalizeAfter raises the cluster version by itself once
	// every voter has supported a newer one for this long; zero leaves it
	// to an operator's finalize (docs/upgrade.md).
	UpgradeFinalizeAfter time.Duration
	// FSM is the state machine.
	FSM raft.FSM
	// Timing are the timers; zero fields take DefaultTiming.
	Timing Timing
	// BootstrapSelf makes a node with no Raft state bootstrap a
	// one-voter cluster of itself (the same as BootstrapExpect 1).
	BootstrapSelf bool
	// DeferSoloElection leaves the immediate election of a replica that
	// is the only voter of its configuration to the caller, who calls
	// ElectAloneNow once it watches LeaderCh; otherwise NewNode starts it.
	// A watcher that starts by asking IsLeader would otherwise, when the
	// election was quicker than the watcher's start, see the leadership
	// twice: in IsLeader and again on LeaderCh.
	DeferSoloElection bool
	// DisableFastFailover turns off the election at once when the
	// leader's process is gone (fastfail.go); the normal timeouts then
	// decide alone. For comparison: it is on by default.
	DisableFastFailover bool
	// BootstrapExpect is the number of replicas that form a new cluster.
	// 0 with no Join: a single replica that bootstraps itself. 0 with Join:
	// never bootstrap, wait to be added by a leader. 1: bootstrap itself.
	// N > 1: bootstrap once N server replicas announcing the same N are
	// alive in gossip and none of them has Raft state. A replica whose Raft
	// already has state never bootstraps.
	BootstrapExpect int
	// GossipAddress is the host:port memberlist binds and advertises;
	// empty runs without gossip (single replica, or peers set by hand with
	// SetPeerAddresses).
	GossipAddress string
	// GossipKey encrypts gossip (AES-128/192/256: 16, 24 or 32 bytes);
	// empty gossips in the clear.
	GossipKey []byte
	// GossipSecondaryKeys are further keys gossip accepts (a rotation in
	// progress); SetGossipKeys changes them at run time.
	GossipSecondaryKeys [][]byte
	// AgentGossipAddress, when set, runs a second memberlist pool there
	// for the agents: the replicas announce their metadata in it as in
	// their own pool, and ignore what agents announce. Agents thus never
	// hold the replicas' key. Needs GossipAddress.
	AgentGossipAddress string
	// AgentGossipKeys encrypt the agents' pool, the first the primary;
	// they must differ from the replicas' keys.
	AgentGossipKeys [][]byte
	// Join lists gossip addresses of replicas to join; retried with backoff
	// until one answers or the node shuts down.
	Join []string
	// Now is the clock for health and timeouts; nil is Clock.Now.
	Now func() time.Time
	// Clock drives the node's own tickers and timers (reconcile,
	// bootstrap, gossip probes, early election, leave, join backoff and
	// the pipeline watchdog); nil is the system clock. Raft's and
	// memberlist's timers are their own.
	Clock clock.Clock
	// RaftTLS, when set, makes the Raft port speak mutual TLS 1.3 with
	// the store's certificate, accepting only replica certificates (see
	// tlsLayer); it also makes admission need proof of a replica
	// certificate (see admission). Nil is plain TCP: the insecure mode.
	RaftTLS *tlsreload.Store
	// RaftConnLimits caps the connections the Raft port holds open, per
	// source address and in total (internal/connlimit); zero fields are
	// no cap. A peer's connections are a few (one pooled, the pipeline,
	// one per concurrent RPC beyond them, admission probes).
	RaftConnLimits connlimit.Limits
	// RaftStreamLayer, when set, builds Raft's stream layer over the bound
	// listener (tests put a fault network in between); nil is plain TCP.
	RaftStreamLayer func(ln net.Listener, advertise net.Addr) raft.StreamLayer
	// WrapGossipTransport, when set, wraps memberlist's TCP/UDP transport.
	WrapGossipTransport func(memberlist.Transport) memberlist.Transport
	// Logger receives Raft's, raft-wal's, memberlist's and this
	// package's log, each line with its component (internal/logbridge).
	// When nil, LogOutput gets them in slog's text format, each with the
	// replica's ID; when both are nil, the log is discarded.
	Logger    *slog.Logger
	LogOutput io.Writer
	// LogLevel is the least level of those lines ("warn" when empty):
	// Raft says much at info.
	LogLevel string
	// SnapshotThreshold and TrailingLogs bound the disk footprint; zero
	// takes the defaults below.
	SnapshotThreshold uint64
	TrailingLogs      uint64
	// LogStore is the Raft log and stable store: LogStoreWAL (empty is
	// the same) or LogStoreBolt (logstore.go). A data directory holding
	// a WAL is refused with LogStoreBolt (ErrLogStoreSwitch); one holding
	// a raft.db is migrated into the WAL with LogStoreWAL.
	LogStore string
	// SegmentSize is the size of one segment file of the Raft log
	// (DefaultSegmentSize when zero; the WAL only).
	SegmentSize int
	// CheckEntry, when set, checks every command entry a leader sends
	// before Raft stores it; an entry it refuses fails the AppendEntries
	// and is never stored (see entryCheck).
	CheckEntry func(data []byte) error
	// StorageFault, when set, is asked before every write to the Raft
	// log, the stable store and the snapshot store, and before every
	// probe of a failed storage, with what is written (storage.go); an
	// error it returns stands for the write's, as if the disk had failed
	// it. Tests inject failed storage with it.
	StorageFault func(op string) error
	// MemoryStore, when set, keeps the Raft log, the stable store and the
	// snapshots in memory instead of under DataDir, which still holds the
	// vote hold and the storage probes (tests that do not test storage;
	// see MemoryStore).
	MemoryStore *MemoryStore
}

// logHandler is where the node's log goes: Logger, else LogOutput.
func (cfg Config) logHandler() slog.Handler {
	switch {
	case cfg.Logger != nil:
		return cfg.Logger.Handler()
	case cfg.LogOutput != nil && cfg.LogOutput != io.Discard:
		return slog.NewTextHandler(cfg.LogOutput, &slog.HandlerOptions{Level: slog.LevelDebug - 4}).
			WithAttrs([]slog.Attr{slog.String("replica", cfg.ID)})
	}
	return slog.DiscardHandler
}

func (cfg *Config) validate() error {
	bad := func(field, why string) error { return fmt.Errorf("%w: field %s: %s", ErrConfig, field, why) }
	switch {
	case cfg.ID == "":
		return bad("ID", "required")
	case cfg.DataDir == "":
		return bad("DataDir", "required")
	case cfg.RaftAddress == "":
		return bad("RaftAddress", "required")
	case cfg.FSM == nil:
		return bad("FSM", "required")
	case !implementsLedger(cfg.FSM):
		return bad("FSM", "must keep the replicas operators removed (implement cluster.RemovalLedger)")
	case cfg.BootstrapExpect < 0:
		return bad("BootstrapExpect", "must not be negative")
	case cfg.SegmentSize < 0:
		return bad("SegmentSize", "must not be negative")
	case cfg.MemoryStore != nil && cfg.LogStore != "":
		return bad("LogStore", fmt.Sprintf("%q contradicts MemoryStore", cfg.LogStore))
	case cfg.LogStore != "" && cfg.LogStore != LogStoreWAL && cfg.LogStore != LogStoreBolt:
		return bad("LogStore", fmt.Sprintf("%q: must be %s or %s", cfg.LogStore, LogStoreWAL, LogStoreBolt))
	case cfg.BootstrapExpect > 1 && cfg.GossipAddress == "":
		return bad("BootstrapExpect", "more than 1 needs GossipAddress to find the other replicas")
	case cfg.BootstrapSelf && cfg.BootstrapExpect > 1:
		return bad("BootstrapSelf", "contradicts BootstrapExpect > 1")
	case len(cfg.Join) > 0 && cfg.GossipAddress == "":
		return bad("Join", "needs GossipAddress")
	case cfg.RaftTLS != nil && cfg.GossipAddress != "" && len(cfg.GossipKey) == 0:
		return bad("GossipKey", "required with RaftTLS: unencrypted gossip lets anyone on the network read and forge the replicas' metadata")
	}
	replicaKeys := append([][]byte{cfg.GossipKey}, cfg.GossipSecondaryKeys...)
	for i, k := range replicaKeys {
		field := "GossipKey"
		if i > 0 {
			field = fmt.Sprintf("GossipSecondaryKeys[%d]", i-1)
		}
		switch len(k) {
		case 0, 16, 24, 32:
			if len(k) == 0 && i > 0 {
				return bad(field, "empty")
			}
		default:
			return bad(field, fmt.Sprintf("%d bytes; an AES key is 16, 24 or 32 bytes", len(k)))
		}
	}
	if len(cfg.GossipKey) == 0 && len(cfg.GossipSecondaryKeys) > 0 {
		return bad("GossipSecondaryKeys", "given without GossipKey")
	}
	if cfg.AgentGossipAddress != "" {
		switch {
		case cfg.GossipAddress == "":
			return bad("AgentGossipAddress", "needs GossipAddress")
		case cfg.RaftTLS != nil && len(cfg.AgentGossipKeys) == 0:
			return bad("AgentGossipKeys", "required with RaftTLS")
		case gossipmeta.Keys(cfg.AgentGossipKeys).Shares(replicaKeys):
			return bad("AgentGossipKeys", "shares a key with the replicas' gossip; agents must not hold the replicas' key")
		}
		for i, k := range cfg.AgentGossipKeys {
			switch len(k) {
			case 16, 24, 32:
			default:
				return bad(fmt.Sprintf("AgentGossipKeys[%d]", i), fmt.Sprintf("%d bytes; an AES key is 16, 24 or 32 bytes", len(k)))
			}
		}
	}
	return nil
}

// bootstrapsSelf says the node forms a one-voter cluster of itself when it
// has no state: BootstrapSelf, BootstrapExpect 1, or a lone replica (no
// BootstrapExpect and nothing to join).
func (cfg *Config) bootstrapsSelf() bool {
	return cfg.BootstrapSelf || cfg.BootstrapExpect == 1 || (cfg.BootstrapExpect == 0 && len(cfg.Join) == 0)
}
