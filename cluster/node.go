package cluster

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"path/filepath"
	"sync"
	"sync/atomic"
	"time"

	"github.com/hashicorp/go-hclog"
	"github.com/hashicorp/raft"

	"github.com/grapnel-io/grapnel/internal/changefeed"
	"github.com/grapnel-io/grapnel/internal/clock"
	"github.com/grapnel-io/grapnel/internal/connlimit"
	"github.com/grapnel-io/grapnel/internal/durable"
	"github.com/grapnel-io/grapnel/internal/gossipmeta"
	"github.com/grapnel-io/grapnel/internal/logbridge"
)

// Node is one replica's Raft node, with its gossip member and, while it
// leads, its reconciler.
type Node struct {
	cfg    Config
	timing Timing
	now    func() time.Time
	logger hclog.Logger
	raft   *raft.Raft
	store  *guardedStore
	snaps  raft.SnapshotStore
	// storage watches the writes of store and snaps (storage.go);
	// healed is closed when a probe worked after it failed, and
	// faultFeed signals changes of StorageFaults.
	storage     *storageGuard
	healed      chan struct{}
	faultFeed   *changefeed.Feed
	segmentSize int
	transport   *raft.NetworkTransport
	layer       *closingLayer
	// tls is the TLS stream layer; nil in the insecure mode.
	tls *tlsLayer
	// raftConns caps the connections the Raft port holds.
	raftConns *connlimit.Listener
	// prover checks candidates' certificates before admission; nil
	// without TLS.
	prover   *prover
	leaderCh chan bool
	// existing says the Raft had state when the node started.
	existing bool

	peers    *peerTable
	health   *healthView
	contacts *contactTracker
	feed     *changefeed.Feed
	gossip   *gossip
	// reconcileCh wakes the leader's reconciler (coalesced).
	reconcileCh chan struct{}
	// ledger is the FSM's record of removed replica runs (removal.go).
	ledger RemovalLedger
	// fresh is set when this replica bootstrapped a new cluster whose
	// cluster version is not raised yet (upgrade.go); it ends once
	// another replica leads (noteLeader): only the cluster's first leader
	// raises it as for a new cluster.
	fresh atomic.Bool
	// agentSupport is what the connected agents support (SetAgentSupport).
	agentSupport atomic.Pointer[func() map[string]uint32]
	// incarnation tells this run from earlier ones under the same id
	// (announced in gossip).
	incarnation uint64
	// refused is the last reason a leader gave for keeping this replica
	// out (a string).
	refused atomic.Value

	obsCh      chan raft.Observation
	observer   *raft.Observer
	shutdownCh chan struct{}
	// followed is set once this node has seen another replica lead
	// (FollowedLeader).
	followed atomic.Bool
	// pacing is set while this node's heartbeat pacer runs (paceLoop).
	pacing atomic.Bool
	// entries is the check of incoming entries (entryCheck).
	entries *entryCheck
	// integrity checks what the stores read back (integrity.go); hold is
	// the vote hold of a replica that lost entries (votehold.go).
	integrity *integrity
	// reads keeps the entries the start read until Raft applied them
	// (startreads.go); nil on the memory store.
	reads *startReads
	hold  *holdState
	// fast elects the dead leader's successor at once (fastfail.go).
	fast     *fastFailover
	shutdown sync.Once
	shutErr  error
	wg       sync.WaitGroup
}

// DefaultSnapshotThreshold is how many entries since the last snapshot
// make a replica take one: 1024 (hashicorp/raft: 8192). After a power cut
// a start applies every entry since the newest snapshot again, 12–15 µs
// each on a 2-core machine, and with 8,192 a vehicle's power-on missed
// its targets (API p99 370 ms, every workload Running p99 448 ms; see
// docs/operations.md, "A start on a grown log"). A snapshot costs its
// bytes once per threshold: with a full history (256 KiB) that is under
// 1 % of the bytes a commit writes (grapnel-bench, mTLS: disk/op 14.3
// KiB with 8192 and 14.4 with 1024 for one client, 4.3 with both for 16).
const DefaultSnapshotThreshold = 1024

// snapshotInterval is how often Raft checks whether SnapshotThreshold
// entries have accumulated since the last snapshot (randomized up to
// twice that).
const snapshotInterval = 5 * time.Second

// NewNode opens the stores under DataDir, starts the transport, Raft and
// gossip, and begins forming or joining the cluster.
func NewNode(cfg Config) (*Node, error) {
	if err := cfg.validate(); err != nil {
		return nil, err
	}
	cfg.Timing = cfg.Timing.withDefaults()
	if err := cfg.Timing.check(); err != nil {
		return nil, err
	}
	if cfg.Clock == nil {
		cfg.Clock = clock.Real()
	}
	if cfg.Now == nil {
		cfg.Now = cfg.Clock.Now
	}
	// The data directory and the snapshot store's directory are made
	// durable here: raft-wal and hashicorp/raft sync the files they
	// write and the directories those are in, not these names.
	// One durable.Dirs for the start syncs each parent once (wal/ too,
	// in openStore).
	dirs := durable.NewDirs()
	for _, d := range []string{cfg.DataDir, filepath.Join(cfg.DataDir, "snapshots")} {
		if err := dirs.MkdirAll(d, 0o700); err != nil {
			return nil, fmt.Errorf("cluster: data dir: %w", err)
		}
	}
	base := logbridge.New(cfg.logHandler(), logbridge.Options{Level: cfg.LogLevel, Clock: cfg.Clock,
		// This package's own lines say what they mean once per event and
		// name the peer in their own words; the libraries' are limited.
		Unlimited: []string{"", "cluster"}})
	logger := base.Named("raft")

	rc := raft.DefaultConfig()
	rc.LocalID = raft.ServerID(cfg.ID)
	rc.HeartbeatTimeout = cfg.Timing.HeartbeatTimeout
	rc.ElectionTimeout = cfg.Timing.ElectionTimeout
	rc.LeaderLeaseTimeout = cfg.Timing.LeaderLeaseTimeout
	rc.CommitTimeout = cfg.Timing.CommitTimeout
	rc.Logger = logger
	rc.ShutdownOnRemove = false
	// Raft's legacy telemetry repeats its per-peer series under a name
	// with the peer's id in it (raft.replication.heartbeat.n2); the same
	// series come with a peer_id label (server/metrics, ExportGoMetrics).
	rc.NoLegacyTelemetry = true
	rc.SnapshotThreshold = DefaultSnapshotThreshold
	rc.TrailingLogs = 10240
	// hashicorp/raft checks the threshold every 120–240 s by default. A
	// replica restarted more often than that (every ignition cycle; in
	// the chaos campaign every minute or so) never took a snapshot, its
	// log grew without bound, and each start replayed all of it: a
	// whole-cluster restart went from 1.4 s to 12 s to the next
	// acknowledged write over 30 minutes. The check itself is cheap.
	rc.SnapshotInterval = snapshotInterval
	// A buffered apply channel lets the leader loop hand over many
	// pipelined proposals at once, so one fsync commits a whole group.
	rc.BatchApplyCh = true
	if cfg.SnapshotThreshold > 0 {
		rc.SnapshotThreshold = cfg.SnapshotThreshold
	}
	if cfg.TrailingLogs > 0 {
		rc.TrailingLogs = cfg.TrailingLogs
	}
	leaderCh := make(chan bool, 16)
	rc.NotifyCh = leaderCh

	segmentSize := cfg.SegmentSize
	if segmentSize == 0 {
		segmentSize = DefaultSegmentSize
	}
	// The vote hold is read first: the checks below may hold the vote
	// before they move or cut anything (votehold.go).
	hold := newHoldState(cfg.DataDir, cfg.Now)
	if err := hold.load(); err != nil {
		return nil, err
	}
	bolt := cfg.LogStore == LogStoreBolt
	mem := cfg.MemoryStore
	var tail *tailLoss
	if !bolt && mem == nil {
		if _, err := quarantineLog(cfg.DataDir, hold, cfg.Now, base.Named("cluster")); err != nil {
			return nil, err
		}
		// Before raft-wal opens the log: segment headers it would refuse,
		// and what it will drop of the open segment's tail although it was
		// synced (segcheck.go).
		if _, err := repairHeaders(filepath.Join(cfg.DataDir, walDir), base.Named("cluster")); err != nil {
			return nil, err
		}
		var err error
		if tail, err = checkTail(filepath.Join(cfg.DataDir, walDir)); err != nil {
			return nil, err
		}
	}
	var rawLog rawStore
	var err error
	if mem != nil {
		rawLog = memLog{mem.log}
	} else if rawLog, err = openStore(cfg.DataDir, cfg.LogStore, segmentSize, dirs, base.Named("cluster")); err != nil {
		return nil, err
	}
	// The entries a start reads are kept for its later passes
	// (startreads.go); the memory store needs no such thing.
	var reads *startReads
	if mem == nil {
		reads = &startReads{rawStore: rawLog}
		rawLog = reads
	}
	// One cleanup for every failure below, undone in reverse: the stores,
	// the transport, the entry check. Once the node exists, its Shutdown
	// takes over (started).
	var cleanup []func()
	started := false
	defer func() {
		if !started {
			for i := len(cleanup) - 1; i >= 0; i-- {
				cleanup[i]()
			}
		}
	}()
	cleanup = append(cleanup, func() { rawLog.Close() })
	guard := newStorageGuard(cfg.DataDir, cfg.Now, cfg.StorageFault)
	guard.bolt = bolt
	integ := newIntegrity(rawLog, base.Named("cluster"))
	store, err := newGuardedStore(rawLog, guard, integ, 512)
	if err != nil {
		return nil, err
	}
	logs := store
	// listSnaps is the snapshot store without the wrapper that makes
	// them private and durable.
	var snaps, listSnaps raft.SnapshotStore
	var fileSnaps *raft.FileSnapshotStore
	if mem != nil {
		snaps, listSnaps = mem.snaps, mem.snaps
	} else {
		if fileSnaps, err = raft.NewFileSnapshotStoreWithLogger(cfg.DataDir, 3, logger); err != nil {
			return nil, fmt.Errorf("cluster: snapshot store: %w", err)
		}
		if err := secureDataDir(cfg.DataDir, base.Named("cluster")); err != nil {
			return nil, fmt.Errorf("cluster: data dir: %w", err)
		}
		snaps = privateSnapshots{SnapshotStore: fileSnaps, dir: cfg.DataDir, syncDir: durable.SyncDir, guard: guard}
		listSnaps = fileSnaps
	}
	currentTerm := func() uint64 { t, _ := rawLog.GetUint64(stableKeys.currentTerm); return t }
	hold.currentTerm.Store(&currentTerm)
	if reads != nil {
		if w, ok := reads.raw().(*logStore); ok {
			if err := repairTail(cfg.DataDir, tail, w, hold, integ, base.Named("cluster"), currentTerm); err != nil {
				return nil, err
			}
		}
		if last, err := reads.LastIndex(); err == nil {
			reads.begin(last)
		}
	}
	if fileSnaps != nil {
		if err := startupRepair(cfg.DataDir, rawLog, fileSnaps, hold, integ, base.Named("cluster"), currentTerm); err != nil {
			return nil, err
		}
	}
	integ.snapIndex = func() uint64 {
		if l, err := listSnaps.List(); err == nil && len(l) > 0 {
			return l[0].Index
		}
		return 0
	}
	if err := checkDataFormat(cfg.DataDir, cfg.supported(), snaps, store); err != nil {
		return nil, err
	}
	rn, err := newRaftTransport(cfg, logger)
	if err != nil {
		return nil, err
	}
	nt, layer, tl := rn.nt, rn.layer, rn.tls
	cleanup = append(cleanup, func() { nt.Close() })
	contacts := newContactTracker(cfg.Now)
	trans := &contactTransport{NetworkTransport: nt, contacts: contacts, stallLimit: 5 * cfg.Timing.HeartbeatTimeout, clock: cfg.Clock, storage: guard, hold: hold}
	shutdownCh := make(chan struct{})
	cleanup = append(cleanup, func() { close(shutdownCh) }) // stops the entry check
	trans.checked = newEntryCheck(nt.Consumer(), cfg.CheckEntry, guard, base.Named("cluster"), cfg.Now, shutdownCh)
	trans.checked.hold, trans.checked.self, trans.checked.addr = hold, raft.ServerID(cfg.ID), nt.LocalAddr()
	go trans.checked.run()
	recovered, err := recoverFromPeersFile(cfg, rc, logs, store, snaps, trans)
	if err != nil {
		return nil, err
	}
	if recovered {
		base.Warn("recovered the Raft configuration from " + PeersFile + "; the file is renamed to " + PeersFile + ".applied")
	}
	existing, err := raft.HasExistingState(logs, store, snaps)
	if err != nil {
		return nil, err
	}
	if !existing && !cfg.bootstrapsSelf() {
		// New flash under a known name looks like a new replica: neither
		// may vote before it has caught up (votehold.go).
		if err := hold.hold(voteHold{Reason: "started with no Raft state", Empty: true, Since: cfg.Now()}); err != nil {
			return nil, err
		}
	}
	hold.since = cfg.Now()
	if hold.active() {
		// It must not stand for election before Raft runs (votehold.go);
		// paceHeartbeats keeps it so until the hold ends.
		rc.HeartbeatTimeout, rc.ElectionTimeout = storageFailedTimeout, storageFailedTimeout
		base.Named("cluster").Warn("holding this replica's vote until its log has caught up", "reason", hold.Held().Reason)
	}
	r, err := raft.NewRaft(rc, cfg.FSM, logs, store, snaps, trans)
	if err != nil {
		return nil, fmt.Errorf("cluster: start raft: %w", err)
	}
	n := &Node{
		cfg: cfg, timing: cfg.Timing, now: cfg.Now, logger: base.Named("cluster"),
		raft: r, store: store, snaps: snaps, storage: guard, healed: make(chan struct{}), faultFeed: changefeed.New(), segmentSize: segmentSize,
		transport: nt, layer: layer, tls: tl, raftConns: rn.conns, leaderCh: leaderCh, existing: existing,
		peers: newPeerTable(), health: newHealthView(), contacts: contacts, feed: changefeed.New(),
		reconcileCh: make(chan struct{}, 1), ledger: cfg.FSM.(RemovalLedger), incarnation: rand.Uint64() | 1,
		obsCh: make(chan raft.Observation, 64), shutdownCh: shutdownCh, entries: trans.checked,
		integrity: integ, hold: hold, fast: newFastFailover(cfg.DisableFastFailover, cfg.Clock), reads: reads,
	}
	lastIndex := r.LastIndex
	hold.lastIndex.Store(&lastIndex)
	integ.raft.Store(r)
	trans.checked.checkHold = n.checkHold
	hold.onEnd = n.onHoldEnd
	if tl != nil {
		tl.raft.Store(r)
		n.prover = newProver(n)
		tl.mu.Lock()
		tl.onSeen = n.triggerReconcile
		tl.mu.Unlock()
	}
	started = true // from here on Shutdown closes shutdownCh
	n.peers.put(peerInfo{
		ID: cfg.ID, RaftAddress: string(nt.LocalAddr()), GRPCAddress: cfg.GRPCAddress, UIAddress: cfg.UIAddress,
		Version: cfg.Version, Role: gossipmeta.RoleServer, GossipStatus: "none", ClusterVersion: cfg.supported(),
	})
	// Gossip first: the goroutines started below read n.gossip unlocked.
	if cfg.GossipAddress != "" {
		g, err := startGossip(n, base.Named("memberlist"))
		if err != nil {
			n.Shutdown()
			return nil, err
		}
		n.gossip = g
	}
	n.wg.Add(1)
	go n.scrubLoop()
	if !cfg.DisableFastFailover {
		ended, heard := n.connEnded, n.heard
		layer.ended.Store(&ended)
		layer.heard.Store(&heard)
		n.wg.Add(1)
		go n.fastFailoverLoop()
	}
	n.observer = raft.NewObserver(n.obsCh, false, nil)
	r.RegisterObserver(n.observer)
	n.wg.Add(1)
	go n.observeRaft()
	if err := n.startFormation(); err != nil {
		n.Shutdown()
		return nil, err
	}
	return n, nil
}

// RaftListener is the Raft port's connection limiter: its open and
// refused counts are metrics.
func (n *Node) RaftListener() *connlimit.Listener { return n.raftConns }

// Raft exposes the underlying raft instance.
func (n *Node) Raft() *raft.Raft { return n.raft }

// ID is this replica's id.
func (n *Node) ID() string { return n.cfg.ID }

// DataDir is the directory holding this replica's Raft log and snapshots.
func (n *Node) DataDir() string { return n.cfg.DataDir }

// RaftAddress is the Raft address this replica advertises.
func (n *Node) RaftAddress() string { return string(n.transport.LocalAddr()) }

// GossipAddress is the gossip address this replica advertises; empty
// without gossip.
func (n *Node) GossipAddress() string {
	if n.gossip == nil {
		return ""
	}
	return n.gossip.address
}

// Timing is the node's effective timing, defaults filled in.
func (n *Node) Timing() Timing { return n.timing }

// LeaderCh delivers leadership changes of this node (true: became leader).
// Raft blocks on it when its buffer is full: someone must read it.
func (n *Node) LeaderCh() <-chan bool { return n.leaderCh }

// IsLeader reports whether this node currently leads.
func (n *Node) IsLeader() bool { return n.raft.State() == raft.Leader }

// Leader returns the current leader's Raft address and id, if known.
func (n *Node) Leader() (addr, id string) {
	a, i := n.raft.LeaderWithID()
	return string(a), string(i)
}

// await waits for a future of this node's Raft, or for the node to shut
// down. hashicorp/raft answers a future that reached its apply queue only
// from the leader loop: one queued just before Raft stopped is never
// answered, and a goroutine of the node waiting on it would hold Shutdown
// (which waits for them) forever. The waiter left behind on such a future
// is one parked goroutine until the process exits.
func (n *Node) await(f raft.Future) error {
	done := make(chan error, 1)
	go func() { done <- f.Error() }()
	select {
	case err := <-done:
		return err
	case <-n.shutdownCh:
		return raft.ErrRaftShutdown
	}
}

// Apply proposes a command and waits until it is committed and applied;
// its answer reads as Outcome's.
func (n *Node) Apply(cmd []byte, timeout time.Duration) (any, uint64, error) {
	return fold(n.propose(cmd, timeout))
}

// Outcome waits for a proposal made through ApplyAsync and says what it
// came to: the FSM's response and the entry's index; Raft's error folded
// into the leadership errors (FoldRaftError); or the FSM's refusal of the
// committed entry, as the FSM gave it. Apply and the server's write
// pipeline both read their proposals through it.
func Outcome(f raft.ApplyFuture) (any, uint64, error) {
	return fold(settled(f, f.Error()))
}

// fold turns propose's answer into Outcome's.
func fold(resp any, index uint64, err error) (any, uint64, error) {
	var fe fsmError
	if errors.As(err, &fe) {
		return nil, index, fe.err
	}
	return resp, index, FoldRaftError(err)
}

// ApplyAsync proposes a command without waiting; the future reports the
// outcome. The server's write pipeline proposes through it.
func (n *Node) ApplyAsync(cmd []byte, timeout time.Duration) raft.ApplyFuture {
	return n.proposeAsync(cmd, timeout)
}

// proposeAsync is the one place that hands an entry to Raft: the server's
// write pipeline (ApplyAsync, Apply) and this package's own entries (the
// removal ledger, the cluster version, replica certificates: propose) all
// come through it, and scripts/check-raft-apply.sh fails the build if
// raft.Apply appears anywhere else (docs/architecture.md, "The write
// path").
func (n *Node) proposeAsync(cmd []byte, timeout time.Duration) raft.ApplyFuture {
	return n.raft.Apply(cmd, timeout)
}

// fsmError is an FSM's refusal of a committed entry, as propose returns
// it: the entry is in the log, and every replica refused it the same way.
type fsmError struct{ err error }

func (e fsmError) Error() string { return e.err.Error() }
func (e fsmError) Unwrap() error { return e.err }

// propose proposes an entry and waits until it is committed and applied:
// a Raft error as Raft gave it (the caller folds it), or the FSM's
// refusal as an fsmError.
func (n *Node) propose(cmd []byte, timeout time.Duration) (any, uint64, error) {
	f := n.proposeAsync(cmd, timeout)
	return settled(f, n.await(f))
}

// settled reads a proposal whose wait ended with err (Raft's, as Raft
// gave it).
func settled(f raft.ApplyFuture, err error) (any, uint64, error) {
	if err != nil {
		return nil, 0, err
	}
	resp := f.Response()
	if err, ok := resp.(error); ok {
		return nil, f.Index(), fsmError{err}
	}
	return resp, f.Index(), nil
}

// Barrier waits until every entry committed before it is applied locally.
func (n *Node) Barrier(timeout time.Duration) error { return n.raft.Barrier(timeout).Error() }

// Stats returns Raft's statistics (term, indexes, state).
func (n *Node) Stats() map[string]string { return n.raft.Stats() }

// hasState says the local Raft has a log, a snapshot or a leader: such a
// replica never bootstraps and keeps peers from bootstrapping.
func (n *Node) hasState() bool {
	if n.existing || n.raft.LastIndex() > 0 {
		return true
	}
	_, id := n.raft.LeaderWithID()
	return id != ""
}

// Shutdown stops gossip (without a leave message: use Leave for that),
// every goroutine the node started, Raft, and closes the transport and
// stores. It is safe to call more than once.
func (n *Node) Shutdown() error {
	n.shutdown.Do(func() {
		close(n.shutdownCh)
		if n.observer != nil {
			n.raft.DeregisterObserver(n.observer)
		}
		if n.gossip != nil {
			n.gossip.stop()
		}
		// Close the transport first: a peer's RPC that reaches a replica
		// whose Raft has stopped waits for an answer until the transport
		// closes, and a peer shutting down waits for its RPCs. When the
		// whole cluster stopped at once, replicas waited on each other
		// until the 10 s I/O timeout (the chaos campaign's cluster
		// restart). Closing leaves pooled outgoing connections open, and
		// with them the peers' goroutines reading them, hence
		// CloseStreams.
		n.transport.Close()
		n.transport.CloseStreams()
		err := n.raft.Shutdown().Error()
		n.wg.Wait()
		n.transport.CloseStreams()
		// The goroutines serving accepted connections may still be inside
		// a heartbeat that writes the stable store.
		n.layer.wait()
		if cerr := n.store.Close(); err == nil {
			err = cerr
		}
		n.shutErr = err
	})
	return n.shutErr
}

// stopping says Shutdown has begun.
func (n *Node) stopping() bool {
	select {
	case <-n.shutdownCh:
		return true
	default:
		return false
	}
}

// RefusedHandshakes counts the TLS handshakes on the Raft port that
// failed, on connections this replica accepted (a peer without a replica
// certificate of this CA, or of a replica not in the configuration) and
// on those it dialled (Raft's and admission probes'); 0 without TLS.
func (n *Node) RefusedHandshakes() (accepted, dialled uint64) {
	if n.tls == nil {
		return 0, 0
	}
	return n.tls.refused[0].Load(), n.tls.refused[1].Load()
}

// RefusedEntries counts the AppendEntries this replica refused because
// an entry failed Config.CheckEntry.
func (n *Node) RefusedEntries() uint64 {
	if n.entries == nil {
		return 0
	}
	return n.entries.Refused()
}
