package cluster

import (
	"errors"
	"fmt"
	"log"
	"net"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/hashicorp/go-hclog"
	metrics "github.com/hashicorp/go-metrics/compat"
	"github.com/hashicorp/memberlist"

	"github.com/grapnel-io/grapnel/internal/clock"
	"github.com/grapnel-io/grapnel/internal/gossipmeta"
	"github.com/grapnel-io/grapnel/internal/gossipnet"
)

// Gossip status values of a member. memberlist v0.6.0 does not expose
// suspicion (its Node.State field is never filled in), so a member is
// alive until memberlist declares it dead or it leaves.
const (
	StatusAlive = "alive"
	StatusDead  = "dead"
	StatusLeft  = "left"
	// StatusNone: no gossip knows the member (no gossip, or only Raft).
	StatusNone = "none"
)

// gossip is this replica's memberlist member. Its delegate callbacks keep
// the peer table current; its loop re-announces the local metadata when
// the leader this node sees (or its has-state flag) changes.
type gossip struct {
	n       *Node
	ml      *memberlist.Memberlist
	logger  hclog.Logger
	address string
	// keyring is the replicas' pool's; nil when it is not encrypted.
	keyring *memberlist.Keyring
	// agents is the agents' pool (Config.AgentGossipAddress), nil
	// without one; agentKeyring its keys.
	agents       *memberlist.Memberlist
	agentKeyring *memberlist.Keyring
	// agentAddress is the agents' pool's address, announced in the
	// metadata; set before the loop starts, never changed.
	agentAddress string

	announceCh chan struct{}

	mu      sync.Mutex
	meta    gossipmeta.Meta
	encoded []byte
	badMeta map[string]string

	// annMu orders UpdateNode against Leave: memberlist would resurrect a
	// member that updates its metadata after leaving.
	annMu   sync.Mutex
	leaving atomic.Bool
	left    atomic.Bool
	stopped atomic.Bool
}

// startGossip binds GossipAddress, creates the memberlist and starts the
// announce loop.
func startGossip(n *Node, logger hclog.Logger) (*gossip, error) {
	cfg := n.cfg
	host, portStr, err := net.SplitHostPort(cfg.GossipAddress)
	if err != nil {
		return nil, fmt.Errorf("%w: field GossipAddress: %v", ErrConfig, err)
	}
	port, err := strconv.Atoi(portStr)
	if err != nil || port < 0 || port > 65535 {
		return nil, fmt.Errorf("%w: field GossipAddress: bad port %q", ErrConfig, portStr)
	}
	ip := net.ParseIP(host)
	if ip == nil {
		a, err := net.ResolveIPAddr("ip", host)
		if err != nil {
			return nil, fmt.Errorf("%w: field GossipAddress: %v", ErrConfig, err)
		}
		ip = a.IP
	}
	if ip.IsUnspecified() {
		ip = net.IPv4zero
	}
	g := &gossip{n: n, logger: logger, announceCh: make(chan struct{}, 1), badMeta: map[string]string{}}
	g.meta = n.localMeta()
	if g.encoded, err = g.meta.Encode(); err != nil {
		return nil, fmt.Errorf("%w: %v", ErrConfig, err)
	}
	stdlog := logger.StandardLogger(&hclog.StandardLoggerOptions{InferLevels: true})
	nt, err := gossipnet.Listen(gossipnet.Config{Host: ip.String(), Port: port, Logger: stdlog, Labels: poolLabels("replicas"), Clock: n.cfg.Clock})
	if err != nil {
		return nil, fmt.Errorf("cluster: field GossipAddress: %w", err)
	}
	var tr memberlist.Transport = nt
	if cfg.WrapGossipTransport != nil {
		tr = cfg.WrapGossipTransport(nt)
	}
	mc := g.memberlistConfig(tr, stdlog)
	mc.MetricLabels = poolLabels("replicas")
	if g.keyring, err = newKeyring(append([][]byte{cfg.GossipKey}, cfg.GossipSecondaryKeys...)); err != nil {
		_ = tr.Shutdown()
		return nil, fmt.Errorf("%w: field GossipKey: %v", ErrConfig, err)
	}
	mc.Keyring = g.keyring
	ml, err := memberlist.Create(mc)
	if err != nil {
		_ = tr.Shutdown()
		return nil, fmt.Errorf("cluster: start gossip: %w", err)
	}
	g.ml = ml
	g.address = ml.LocalNode().Address()
	if cfg.AgentGossipAddress != "" {
		if err := g.startAgentPool(stdlog); err != nil {
			_ = ml.Shutdown()
			return nil, err
		}
	}
	n.wg.Add(1)
	go g.loop()
	return g, nil
}

// poolLabels tell the memberlist_* series of a replica's two pools apart
// (the replicas' and the agents'), which would otherwise add up in one.
func poolLabels(pool string) []metrics.Label { return []metrics.Label{{Name: "pool", Value: pool}} }

// memberlistConfig is DefaultLANConfig with the vehicle-LAN timing of
// GossipTiming (see its field comments for the reasons).
func (g *gossip) memberlistConfig(tr memberlist.Transport, stdlog *log.Logger) *memberlist.Config {
	t := g.n.timing.Gossip
	mc := memberlist.DefaultLANConfig()
	mc.Name = g.n.cfg.ID
	mc.Transport = tr
	mc.AdvertiseAddr, mc.AdvertisePort = "", 0
	mc.ProbeInterval = t.ProbeInterval
	mc.ProbeTimeout = t.ProbeTimeout
	mc.SuspicionMult = t.SuspicionMult
	mc.SuspicionMaxTimeoutMult = t.SuspicionMaxTimeoutMult
	mc.GossipInterval = t.GossipInterval
	mc.PushPullInterval = t.PushPullInterval
	mc.TCPTimeout = t.TCPTimeout
	mc.DeadNodeReclaimTime = t.DeadNodeReclaimTime
	// Tell the dead for as long as a push/pull period, as the LAN default.
	mc.GossipToTheDeadTime = t.PushPullInterval
	// The LAN default compresses every message, probes and acks of a few
	// dozen bytes included: a few percent of an idle replica's CPU for
	// nothing on a vehicle LAN. Members still read compressed messages, so
	// a pool may mix both.
	mc.EnableCompression = false
	mc.Delegate = g
	mc.Events = g
	mc.Logger = stdlog
	return mc
}

// localMeta is what this replica announces now.
func (n *Node) localMeta() gossipmeta.Meta {
	_, leader := n.raft.LeaderWithID()
	return gossipmeta.Meta{
		Role: gossipmeta.RoleServer, RaftAddress: n.RaftAddress(), GRPCAddress: n.cfg.GRPCAddress, UIAddress: n.cfg.UIAddress,
		Version: n.cfg.Version, Expect: n.cfg.BootstrapExpect, LeaderSeen: string(leader),
		HasState: n.hasState(), Incarnation: n.incarnation, ClusterVersion: n.cfg.supported(),
		StorageFailed: storageFailedMeta(n.storage.Fault()),
		VoteHold:      n.voteHoldMeta(),
	}
}

// storageFailedMeta is a fault as gossip announces it; empty for none.
func storageFailedMeta(f *StorageFault) string {
	if f == nil {
		return ""
	}
	return f.Short()
}

// announce asks the loop to re-check the local metadata; signals coalesce.
func (g *gossip) announce() {
	select {
	case g.announceCh <- struct{}{}:
	default:
	}
}

// loop re-announces changed metadata, on request and every probe
// interval (a request can be missed while a broadcast is in flight). It
// stops on Shutdown.
func (g *gossip) loop() {
	defer g.n.wg.Done()
	// On the probe interval's slots (clock.NextSlot), with the replica's
	// other periodic work.
	clk, every := g.n.cfg.Clock, g.n.timing.Gossip.ProbeInterval
	tick := clock.NewTimer(clk, clock.UntilSlot(clk.Now(), every))
	defer tick.Stop()
	for {
		select {
		case <-g.announceCh:
			g.refreshMeta()
			g.joinAgentPools()
		case <-tick.C:
			tick.Reset(clock.UntilSlot(clk.Now(), every))
			g.refreshMeta()
			g.joinAgentPools()
		case <-g.n.shutdownCh:
			return
		}
	}
}

// refreshMeta broadcasts the local metadata when it changed.
func (g *gossip) refreshMeta() {
	m := g.n.localMeta()
	m.AgentGossipAddress = g.agentAddress
	m.Leaving = g.leaving.Load()
	g.mu.Lock()
	if m == g.meta {
		g.mu.Unlock()
		return
	}
	enc, err := m.Encode()
	if err != nil {
		g.mu.Unlock()
		g.logger.Error("cannot announce metadata", "error", err)
		return
	}
	g.meta, g.encoded = m, enc
	g.mu.Unlock()
	g.n.peers.update(g.n.cfg.ID, func(p *peerInfo) {
		p.LeaderSeen, p.HasState = m.LeaderSeen, m.HasState
	})
	g.n.feed.Notify()

	g.annMu.Lock()
	defer g.annMu.Unlock()
	if g.left.Load() || g.stopped.Load() {
		return
	}
	if err := g.ml.UpdateNode(g.n.timing.Gossip.TCPTimeout); err != nil {
		g.logger.Debug("metadata broadcast not confirmed", "error", err)
	}
	if g.agents != nil {
		if err := g.agents.UpdateNode(g.n.timing.Gossip.TCPTimeout); err != nil {
			g.logger.Debug("metadata broadcast to the agents' pool not confirmed", "error", err)
		}
	}
}

// errGossipStopped: gossip has left or shut down.
var errGossipStopped = errors.New("gossip stopped")

// join contacts addrs to merge pools; not after leave or stop. It takes
// no lock: a Join racing Shutdown only fails.
func (g *gossip) join(addrs []string) (int, error) {
	if g.stopped.Load() || g.left.Load() {
		return 0, errGossipStopped
	}
	return g.ml.Join(addrs)
}

// leave announces that this replica is leaving, twice: in its metadata
// (gossiped to everyone) and in a direct message to every member; then it
// broadcasts memberlist's leave and stops gossip. memberlist reports a
// leave like a death (NotifyLeave carries no state), so the intent is
// what lets the leader remove a leaving replica at once.
func (g *gossip) leave(timeout time.Duration) error {
	g.leaving.Store(true)
	g.refreshMeta()
	g.annMu.Lock()
	defer g.annMu.Unlock()
	if g.stopped.Load() {
		return nil
	}
	g.left.Store(true)
	g.sendLeaveIntent()
	err := g.ml.Leave(timeout)
	if g.agents != nil {
		_ = g.agents.Leave(timeout)
		_ = g.agents.Shutdown()
	}
	g.stopped.Store(true)
	if serr := g.ml.Shutdown(); err == nil {
		err = serr
	}
	return err
}

// stop shuts memberlist down without a leave message (crash-like).
func (g *gossip) stop() {
	g.annMu.Lock()
	defer g.annMu.Unlock()
	g.stopped.Store(true)
	_ = g.ml.Shutdown()
	if g.agents != nil {
		_ = g.agents.Shutdown()
	}
}

// NodeMeta implements memberlist.Delegate.
func (g *gossip) NodeMeta(limit int) []byte {
	g.mu.Lock()
	defer g.mu.Unlock()
	if len(g.encoded) > limit {
		return nil
	}
	return append([]byte(nil), g.encoded...)
}

// msgLeaveIntent is the first byte of the user message a leaving replica
// sends every member; its name follows.
const msgLeaveIntent = 1

// sendLeaveIntent sends the leave intent to every other replica over TCP,
// all at once, waiting for the sends. The addresses come from the peer
// table, copied when memberlist reported each member: the *Node values
// Members returns are memberlist's own, which it rewrites under its lock
// while SendReliable would read them without (a data race -race caught).
// Agents ignore the intent, so they are not sent it.
func (g *gossip) sendLeaveIntent() {
	msg := append([]byte{msgLeaveIntent}, g.n.cfg.ID...)
	var wg sync.WaitGroup
	for id, p := range g.n.peers.all() {
		if id == g.n.cfg.ID || p.Role != gossipmeta.RoleServer || p.GossipStatus != StatusAlive || p.GossipAddress == "" {
			continue
		}
		host, port, err := net.SplitHostPort(p.GossipAddress)
		n, perr := strconv.ParseUint(port, 10, 16)
		if err != nil || perr != nil || net.ParseIP(host) == nil {
			continue
		}
		node := &memberlist.Node{Name: id, Addr: net.ParseIP(host), Port: uint16(n)}
		wg.Add(1)
		go func() {
			defer wg.Done()
			if err := g.ml.SendReliable(node, msg); err != nil {
				g.logger.Debug("leave intent not delivered", "to", id, "error", err)
			}
		}()
	}
	wg.Wait()
}

// NotifyMsg implements memberlist.Delegate: it receives leave intents. An
// intent marks the member leaving, or left when it is already gone (the
// intent and memberlist's leave may arrive in either order).
func (g *gossip) NotifyMsg(buf []byte) {
	if len(buf) >= 2 && buf[0] == msgRefused {
		g.n.refusedNotice(string(buf[1:]))
		return
	}
	if len(buf) < 2 || buf[0] != msgLeaveIntent {
		return
	}
	id := string(buf[1:])
	changed := false
	g.n.peers.update(id, func(p *peerInfo) {
		if p.Role != gossipmeta.RoleServer {
			return
		}
		p.Leaving = true
		if p.GossipStatus == StatusDead {
			p.GossipStatus, p.StatusSince = StatusLeft, g.n.now()
			changed = true
		}
	})
	g.logger.Info("member announced its leave", "id", id)
	if changed {
		g.n.feed.Notify()
		g.n.triggerReconcile()
	}
}

// GetBroadcasts implements memberlist.Delegate.
func (g *gossip) GetBroadcasts(overhead, limit int) [][]byte { return nil }

// LocalState implements memberlist.Delegate; all state is in metadata.
func (g *gossip) LocalState(join bool) []byte { return nil }

// MergeRemoteState implements memberlist.Delegate.
func (g *gossip) MergeRemoteState(buf []byte, join bool) {}

// NotifyJoin implements memberlist.EventDelegate: a new member, or one
// back after dying or leaving. It runs under memberlist's lock: it must
// not call back into memberlist.
func (g *gossip) NotifyJoin(node *memberlist.Node) { g.memberUp(node, true) }

// NotifyUpdate implements memberlist.EventDelegate: new metadata.
func (g *gossip) NotifyUpdate(node *memberlist.Node) { g.memberUp(node, false) }

// NotifyLeave implements memberlist.EventDelegate: the member died, or
// left when it announced its leave first.
func (g *gossip) NotifyLeave(node *memberlist.Node) {
	known, st, faulty := false, StatusDead, false
	g.n.peers.update(node.Name, func(p *peerInfo) {
		if p.Role != gossipmeta.RoleServer {
			return
		}
		known, faulty = true, p.StorageFailed != "" || p.VoteHold != ""
		if p.Leaving {
			st = StatusLeft
		}
		p.GossipStatus, p.StatusSince = st, g.n.now()
	})
	if !known {
		return
	}
	g.logger.Info("member gone", "id", node.Name, "status", st)
	if faulty {
		g.n.faultFeed.Notify()
	}
	g.n.feed.Notify()
	g.n.triggerReconcile()
}

// memberUp records an alive or updated member from its metadata; a
// (re)joined member is no longer leaving.
func (g *gossip) memberUp(node *memberlist.Node, joined bool) {
	meta, err := gossipmeta.Decode(node.Meta)
	if err != nil {
		g.mu.Lock()
		first := g.badMeta[node.Name] != err.Error()
		g.badMeta[node.Name] = err.Error()
		g.mu.Unlock()
		if first {
			g.logger.Warn("ignoring member with bad metadata", "id", node.Name, "address", node.Address(), "error", err)
		}
		return
	}
	if meta.Role != gossipmeta.RoleServer {
		return
	}
	now := g.n.now()
	faultChanged := false
	g.n.peers.update(node.Name, func(p *peerInfo) {
		if p.GossipStatus != StatusAlive {
			p.StatusSince = now
			faultChanged = meta.StorageFailed != ""
		}
		if p.StorageFailed != meta.StorageFailed {
			faultChanged = true
			g.logStorageFault(node.Name, p.StorageFailed, meta.StorageFailed)
		}
		p.StorageFailed = meta.StorageFailed
		if p.VoteHold != meta.VoteHold {
			faultChanged = true
			if meta.VoteHold != "" {
				g.logger.Warn("member holds its vote until it has caught up", "id", node.Name, "why", meta.VoteHold)
			} else if p.VoteHold != "" {
				g.logger.Info("member votes again", "id", node.Name)
			}
		}
		p.VoteHold = meta.VoteHold
		if joined || meta.Leaving {
			p.Leaving = meta.Leaving
		}
		p.ID, p.Role, p.GossipStatus = node.Name, meta.Role, StatusAlive
		p.RaftAddress, p.GRPCAddress, p.GossipAddress, p.UIAddress = meta.RaftAddress, meta.GRPCAddress, node.Address(), meta.UIAddress
		p.Version, p.LeaderSeen, p.Expect, p.HasState = meta.Version, meta.LeaderSeen, meta.Expect, meta.HasState
		p.AgentGossipAddress = meta.AgentGossipAddress
		p.Incarnation = meta.Incarnation
		p.ClusterVersion = meta.ClusterVersion
	})
	if faultChanged {
		g.n.faultFeed.Notify()
	}
	g.n.feed.Notify()
	g.n.triggerReconcile()
}

// logStorageFault tells this replica's log that another one announced a
// storage fault, or its end.
func (g *gossip) logStorageFault(id, was, now string) {
	if now != "" {
		g.logger.Warn("replica announces that its storage failed", "id", id, "fault", now)
	} else {
		g.logger.Info("replica no longer announces a storage fault", "id", id, "was", was)
	}
}
