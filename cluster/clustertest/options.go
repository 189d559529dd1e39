package clustertest

import (
	"io"
	"time"

	"github.com/grapnel-io/grapnel/cluster"
	"github.com/grapnel-io/grapnel/internal/tlsreload"
)

// Option changes how New starts the cluster.
type Option func(*options)

type options struct {
	timing       cluster.Timing
	expect       int
	configure    func(*cluster.Config)
	logOutput    io.Writer
	logLevel     string
	keepLeaderCh bool
	onStart      func(*Replica)
	onStop       func(*Replica)
	raftTLS      func(id string) *tlsreload.Store
	logStore     string
	inMemory     bool
}

// FastTiming is the test timing: the production Raft timers (elections
// within a few hundred ms are already fast), gossip failure detection
// around a second, reconciliation every 100 ms and promotion after half a
// second healthy. Values leave room for -race on two busy cores, where
// tighter timers cause spurious elections and false gossip suspicions.
func FastTiming() cluster.Timing {
	return cluster.Timing{
		HeartbeatTimeout:   300 * time.Millisecond,
		ElectionTimeout:    300 * time.Millisecond,
		LeaderLeaseTimeout: 150 * time.Millisecond,
		CommitTimeout:      5 * time.Millisecond,
		HeartbeatInterval:  30 * time.Millisecond, // hashicorp/raft's own pace for 300 ms
		StorageProbeMin:    50 * time.Millisecond,
		StorageProbeMax:    200 * time.Millisecond,
		Gossip: cluster.GossipTiming{
			ProbeInterval:           150 * time.Millisecond,
			ProbeTimeout:            100 * time.Millisecond,
			SuspicionMult:           3,
			SuspicionMaxTimeoutMult: 3,
			GossipInterval:          30 * time.Millisecond,
			PushPullInterval:        time.Second,
			TCPTimeout:              time.Second,
			DeadNodeReclaimTime:     500 * time.Millisecond,
			JoinBackoffMin:          20 * time.Millisecond,
			JoinBackoffMax:          300 * time.Millisecond,
			ReconnectInterval:       300 * time.Millisecond,
		},
		Autopilot: cluster.Autopilot{
			ReconcileInterval:       100 * time.Millisecond,
			LastContactThreshold:    500 * time.Millisecond,
			MaxTrailingLogs:         250,
			ServerStabilizationTime: 500 * time.Millisecond,
			DeadServerTimeout:       1500 * time.Millisecond,
		},
	}
}

// WithTiming replaces FastTiming.
func WithTiming(t cluster.Timing) Option { return func(o *options) { o.timing = t } }

// WithBootstrapExpect sets the initial replicas' BootstrapExpect (default:
// the cluster size when above 1).
func WithBootstrapExpect(n int) Option { return func(o *options) { o.expect = n } }

// WithConfig edits every replica's configuration last, on every start.
func WithConfig(fn func(*cluster.Config)) Option { return func(o *options) { o.configure = fn } }

// WithLog sends the replicas' logs to w at level (e.g. "debug").
func WithLog(w io.Writer, level string) Option {
	return func(o *options) { o.logOutput, o.logLevel = w, level }
}

// WithLeaderChConsumer says the caller reads each node's LeaderCh (a
// server wrapping the node does). Otherwise the cluster drains it, since
// Raft blocks when nobody does.
func WithLeaderChConsumer() Option { return func(o *options) { o.keepLeaderCh = true } }

// WithHooks registers callbacks run after a replica's node starts
// (including restarts and added replicas) and before it stops; a server
// test cluster uses them to serve gRPC on Replica.GRPCAddress.
func WithHooks(onStart, onStop func(*Replica)) Option {
	return func(o *options) { o.onStart, o.onStop = onStart, onStop }
}

// TestGossipKey is the gossip key of the replicas of a cluster started
// WithRaftTLS, which requires one.
var TestGossipKey = []byte("grapnel-clustertest-gossip-key32")

// WithRaftTLS makes every replica's Raft port speak mutual TLS with the
// store certs returns for its id (called on every start, added replicas
// included), and encrypts gossip with TestGossipKey.
func WithRaftTLS(certs func(id string) *tlsreload.Store) Option {
	return func(o *options) { o.raftTLS = certs }
}

// WithLogStore makes every replica keep its Raft log in the store kind
// names (cluster.LogStoreWAL, the default, or cluster.LogStoreBolt);
// WithConfig may still change it.
func WithLogStore(kind string) Option { return func(o *options) { o.logStore = kind } }

// InMemory keeps every replica's Raft log, stable store and snapshots in
// memory (cluster.MemoryStore: no fsync), for tests of leadership,
// membership and reconciliation that do not test storage. A stopped
// replica restarts with what it stored, as after a clean shutdown; Wipe
// empties it. Tests of storage, durability, repair or power cuts keep
// the real stores (the default). The data directories still exist: they
// hold the vote hold and the storage probes.
func InMemory() Option { return func(o *options) { o.inMemory = true } }
