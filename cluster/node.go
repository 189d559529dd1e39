package cluster

import (
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"path/filepath"
	"sync"
	"time"

	"github.com/hashicorp/go-hclog"
	"github.com/hashicorp/raft"
	raftboltdb "github.com/hashicorp/raft-boltdb/v2"
)

// Config configures a Node.
type Config struct {
	// ID is this replica's Raft server id.
	ID string
	// DataDir holds raft.db and the snapshots.
	DataDir string
	// RaftAddress is the address the Raft transport binds and advertises.
	RaftAddress string
	// GRPCAddress is the client address this replica serves on; gossip
	// tells other replicas and clients about it.
	GRPCAddress string
	// Version is the binary's version, carried in gossip metadata.
	Version string
	// FSM is the state machine.
	FSM raft.FSM
	// Timing are the Raft timers; zero fields take DefaultTiming.
	Timing Timing
	// BootstrapSelf makes a node with no Raft state bootstrap a
	// one-voter cluster of itself.
	BootstrapSelf bool
	// LogOutput receives Raft's log; nil discards it.
	LogOutput io.Writer
	// LogLevel for Raft's log ("warn" when empty).
	LogLevel string
	// SnapshotThreshold and TrailingLogs bound the disk footprint; zero
	// takes the defaults below.
	SnapshotThreshold uint64
	TrailingLogs      uint64
}

// Node is one replica's Raft node.
type Node struct {
	cfg       Config
	raft      *raft.Raft
	store     *raftboltdb.BoltStore
	snaps     raft.SnapshotStore
	transport *raft.NetworkTransport
	leaderCh  chan bool

	peers  *peerTable
	health *healthView
	feed   *changeFeed

	obsCh      chan raft.Observation
	observer   *raft.Observer
	shutdownCh chan struct{}
	shutdown   sync.Once
	wg         sync.WaitGroup
}

// ErrNotLeader is returned by leader-only operations on a follower.
var ErrNotLeader = errors.New("this replica is not the leader")

// NewNode opens the stores under DataDir, starts the transport and Raft.
func NewNode(cfg Config) (*Node, error) {
	if cfg.ID == "" || cfg.DataDir == "" || cfg.RaftAddress == "" || cfg.FSM == nil {
		return nil, errors.New("cluster: ID, DataDir, RaftAddress and FSM are required")
	}
	def := DefaultTiming()
	if cfg.Timing.HeartbeatTimeout == 0 {
		cfg.Timing.HeartbeatTimeout = def.HeartbeatTimeout
	}
	if cfg.Timing.ElectionTimeout == 0 {
		cfg.Timing.ElectionTimeout = def.ElectionTimeout
	}
	if cfg.Timing.LeaderLeaseTimeout == 0 {
		cfg.Timing.LeaderLeaseTimeout = def.LeaderLeaseTimeout
	}
	if cfg.Timing.CommitTimeout == 0 {
		cfg.Timing.CommitTimeout = def.CommitTimeout
	}
	if err := os.MkdirAll(cfg.DataDir, 0o700); err != nil {
		return nil, fmt.Errorf("cluster: data dir: %w", err)
	}
	out := cfg.LogOutput
	if out == nil {
		out = io.Discard
	}
	level := cfg.LogLevel
	if level == "" {
		level = "warn"
	}
	logger := hclog.New(&hclog.LoggerOptions{Name: "raft", Output: out, Level: hclog.LevelFromString(level)})

	rc := raft.DefaultConfig()
	rc.LocalID = raft.ServerID(cfg.ID)
	rc.HeartbeatTimeout = cfg.Timing.HeartbeatTimeout
	rc.ElectionTimeout = cfg.Timing.ElectionTimeout
	rc.LeaderLeaseTimeout = cfg.Timing.LeaderLeaseTimeout
	rc.CommitTimeout = cfg.Timing.CommitTimeout
	rc.Logger = logger
	rc.ShutdownOnRemove = false
	rc.SnapshotThreshold = 8192
	rc.TrailingLogs = 10240
	if cfg.SnapshotThreshold > 0 {
		rc.SnapshotThreshold = cfg.SnapshotThreshold
	}
	if cfg.TrailingLogs > 0 {
		rc.TrailingLogs = cfg.TrailingLogs
	}
	leaderCh := make(chan bool, 16)
	rc.NotifyCh = leaderCh

	store, err := raftboltdb.New(raftboltdb.Options{Path: filepath.Join(cfg.DataDir, "raft.db")})
	if err != nil {
		return nil, fmt.Errorf("cluster: open raft.db: %w", err)
	}
	logs, err := raft.NewLogCache(512, store)
	if err != nil {
		store.Close()
		return nil, err
	}
	snaps, err := raft.NewFileSnapshotStoreWithLogger(cfg.DataDir, 3, logger)
	if err != nil {
		store.Close()
		return nil, fmt.Errorf("cluster: snapshot store: %w", err)
	}
	addr, err := net.ResolveTCPAddr("tcp", cfg.RaftAddress)
	if err != nil {
		store.Close()
		return nil, fmt.Errorf("cluster: raft address %q: %w", cfg.RaftAddress, err)
	}
	trans, err := raft.NewTCPTransportWithLogger(cfg.RaftAddress, addr, 3, 10*time.Second, logger)
	if err != nil {
		store.Close()
		return nil, fmt.Errorf("cluster: raft transport on %s: %w", cfg.RaftAddress, err)
	}
	existing, err := raft.HasExistingState(logs, store, snaps)
	if err != nil {
		trans.Close()
		store.Close()
		return nil, err
	}
	r, err := raft.NewRaft(rc, cfg.FSM, logs, store, snaps, trans)
	if err != nil {
		trans.Close()
		store.Close()
		return nil, fmt.Errorf("cluster: start raft: %w", err)
	}
	n := &Node{
		cfg: cfg, raft: r, store: store, snaps: snaps, transport: trans, leaderCh: leaderCh,
		peers: newPeerTable(), health: &healthView{}, feed: newChangeFeed(),
		obsCh: make(chan raft.Observation, 64), shutdownCh: make(chan struct{}),
	}
	n.peers.put(peerInfo{
		ID: cfg.ID, RaftAddress: string(trans.LocalAddr()), GRPCAddress: cfg.GRPCAddress,
		Version: cfg.Version, GossipStatus: "none",
	})
	n.observer = raft.NewObserver(n.obsCh, false, nil)
	r.RegisterObserver(n.observer)
	n.wg.Add(1)
	go n.observeRaft()
	if cfg.BootstrapSelf && !existing {
		f := r.BootstrapCluster(raft.Configuration{Servers: []raft.Server{{
			Suffrage: raft.Voter, ID: raft.ServerID(cfg.ID), Address: trans.LocalAddr(),
		}}})
		if err := f.Error(); err != nil && !errors.Is(err, raft.ErrCantBootstrap) {
			n.Shutdown()
			return nil, fmt.Errorf("cluster: bootstrap: %w", err)
		}
	}
	return n, nil
}

// Raft exposes the underlying raft instance.
func (n *Node) Raft() *raft.Raft { return n.raft }

// ID is this replica's id.
func (n *Node) ID() string { return n.cfg.ID }

// LeaderCh delivers leadership changes of this node (true: became leader).
func (n *Node) LeaderCh() <-chan bool { return n.leaderCh }

// IsLeader reports whether this node currently leads.
func (n *Node) IsLeader() bool { return n.raft.State() == raft.Leader }

// Leader returns the current leader's Raft address and id, if known.
func (n *Node) Leader() (addr, id string) {
	a, i := n.raft.LeaderWithID()
	return string(a), string(i)
}

// Apply proposes a command and waits until it is committed and applied.
func (n *Node) Apply(cmd []byte, timeout time.Duration) (any, uint64, error) {
	f := n.raft.Apply(cmd, timeout)
	if err := f.Error(); err != nil {
		if errors.Is(err, raft.ErrNotLeader) || errors.Is(err, raft.ErrLeadershipLost) {
			return nil, 0, fmt.Errorf("%w: %v", ErrNotLeader, err)
		}
		return nil, 0, err
	}
	resp := f.Response()
	if err, ok := resp.(error); ok {
		return nil, f.Index(), err
	}
	return resp, f.Index(), nil
}

// ApplyAsync proposes a command without waiting; the future reports the
// outcome.
func (n *Node) ApplyAsync(cmd []byte, timeout time.Duration) raft.ApplyFuture {
	return n.raft.Apply(cmd, timeout)
}

// Barrier waits until every entry committed before it is applied locally.
func (n *Node) Barrier(timeout time.Duration) error { return n.raft.Barrier(timeout).Error() }

// Stats returns Raft's statistics (term, indexes, state).
func (n *Node) Stats() map[string]string { return n.raft.Stats() }

// Shutdown stops Raft and closes the transport and stores.
func (n *Node) Shutdown() error {
	n.shutdown.Do(func() { close(n.shutdownCh) })
	n.raft.DeregisterObserver(n.observer)
	n.wg.Wait()
	err := n.raft.Shutdown().Error()
	n.transport.Close()
	if cerr := n.store.Close(); err == nil {
		err = cerr
	}
	return err
}
