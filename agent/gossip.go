package agent

import (
	"fmt"
	"io"
	"log"
	"log/slog"
	"maps"
	"net"
	"slices"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/hashicorp/memberlist"

	"github.com/grapnel-io/grapnel/internal/clock"
	"github.com/grapnel-io/grapnel/internal/gossipmeta"
	"github.com/grapnel-io/grapnel/internal/gossipnet"
	"github.com/grapnel-io/grapnel/internal/logbridge"
	"github.com/grapnel-io/grapnel/rpc"
)

// gossipView is what the agent learns from the replicas' metadata.
type gossipView struct {
	// Addrs are the gRPC addresses of the alive replicas, sorted.
	Addrs []string
	// LeaderID and LeaderAddr name the leader the replicas agree on; ""
	// while they do not.
	LeaderID, LeaderAddr string
}

// gossipTiming is memberlist's timing for the agent: the replicas'
// vehicle-LAN defaults (cluster.DefaultGossipTiming), so the agent probes
// and gossips at the pace of the pool it joins.
type gossipTiming struct {
	ProbeInterval, ProbeTimeout      time.Duration
	SuspicionMult, SuspicionMaxMult  int
	GossipInterval, PushPullInterval time.Duration
	TCPTimeout                       time.Duration
	// Rejoin is how often the agent joins again while it knows no alive
	// replica (all of them were restarted, or it started first).
	Rejoin time.Duration
}

var defaultGossipTiming = gossipTiming{
	ProbeInterval: time.Second, ProbeTimeout: 200 * time.Millisecond,
	SuspicionMult: 4, SuspicionMaxMult: 3,
	GossipInterval: 500 * time.Millisecond, PushPullInterval: 15 * time.Second,
	TCPTimeout: 2 * time.Second, Rejoin: 2 * time.Second,
}

// gossipMemberPrefix starts the agent's memberlist name. Replica ids use
// only [a-zA-Z0-9_-], so an agent never takes a replica's name.
const gossipMemberPrefix = "agent:"

// gossipConfig configures the agent's memberlist member.
type gossipConfig struct {
	Agent string
	Bind  string
	Join  []string
	Key   []byte
	// MoreKeys are further keys accepted (a key rotation in progress).
	MoreKeys [][]byte
	// Hangup, when set with LoadKeys, asks for the keys to be read again
	// (SIGHUP): the keyring then holds what LoadKeys returns, the first
	// the primary.
	Hangup   <-chan struct{}
	LoadKeys func() (gossipmeta.Keys, error)
	Timing   gossipTiming
	Logger   *slog.Logger
	// OnChange gets every new view, from one goroutine, in order.
	OnChange func(gossipView)
	// Clock paces the rejoins; nil is the system clock.
	Clock clock.Clock
}

// gossipMember is the agent's member of the replicas' memberlist pool. It
// announces role agent (the replicas ignore it for Raft) and keeps the
// metadata of the alive server members.
type gossipMember struct {
	cfg  gossipConfig
	ml   *memberlist.Memberlist
	meta []byte
	logw *levelWriter
	// keyring is nil when gossip is not encrypted.
	keyring *memberlist.Keyring

	mu      sync.Mutex
	servers map[string]gossipmeta.Meta // alive server members by replica id
	known   map[string]string          // gossip address of every replica ever seen
	badMeta map[string]string          // last decoding error per member, logged once

	changed chan struct{} // signalled (coalescing) on every change
	stop    chan struct{}
	wg      sync.WaitGroup
}

// startGossip binds, starts memberlist and the member's two goroutines:
// the join loop and the view loop.
func startGossip(cfg gossipConfig) (*gossipMember, error) {
	meta, err := gossipmeta.Meta{Role: gossipmeta.RoleAgent, Version: rpc.ProtocolVersion}.Encode()
	if err != nil {
		return nil, err
	}
	host, portText, err := net.SplitHostPort(cfg.Bind)
	if err != nil {
		return nil, fmt.Errorf("%w: gossipAddress %q: %v", ErrConfig, cfg.Bind, err)
	}
	port, err := strconv.Atoi(portText)
	if err != nil || port < 0 || port > 65535 {
		return nil, fmt.Errorf("%w: gossipAddress %q: bad port", ErrConfig, cfg.Bind)
	}
	if host == "" {
		host = "0.0.0.0"
	}
	g := &gossipMember{
		cfg: cfg, meta: meta, servers: map[string]gossipmeta.Meta{}, known: map[string]string{}, badMeta: map[string]string{},
		changed: make(chan struct{}, 1), stop: make(chan struct{}),
	}
	g.logw = newLevelWriter(cfg.Logger, cfg.Clock)
	stdlog := log.New(g.logw, "", 0)
	tr, err := gossipnet.Listen(gossipnet.Config{Host: host, Port: port, Logger: stdlog, Clock: g.clk()})
	if err != nil {
		return nil, fmt.Errorf("gossipAddress %s: %w", cfg.Bind, err)
	}
	t := cfg.Timing
	mc := memberlist.DefaultLANConfig()
	mc.Name = gossipMemberPrefix + cfg.Agent
	mc.Transport = tr
	mc.ProbeInterval, mc.ProbeTimeout = t.ProbeInterval, t.ProbeTimeout
	mc.SuspicionMult, mc.SuspicionMaxTimeoutMult = t.SuspicionMult, t.SuspicionMaxMult
	mc.GossipInterval, mc.PushPullInterval = t.GossipInterval, t.PushPullInterval
	mc.GossipToTheDeadTime = t.PushPullInterval
	mc.TCPTimeout = t.TCPTimeout
	if len(cfg.Key) > 0 {
		kr, err := memberlist.NewKeyring(append([][]byte{cfg.Key}, cfg.MoreKeys...), cfg.Key)
		if err != nil {
			_ = tr.Shutdown()
			return nil, fmt.Errorf("gossipKey: %w", err)
		}
		mc.Keyring = kr
		g.keyring = kr
	}
	// As the replicas: no compression of the tiny probe messages.
	mc.EnableCompression = false
	mc.Delegate = g
	mc.Events = g
	mc.Logger = stdlog
	ml, err := memberlist.Create(mc)
	if err != nil {
		_ = tr.Shutdown()
		return nil, fmt.Errorf("start gossip: %w", err)
	}
	g.ml = ml
	g.wg.Add(2)
	go g.joinLoop()
	go g.viewLoop()
	if cfg.Hangup != nil && cfg.LoadKeys != nil {
		g.wg.Add(1)
		go g.keyLoop()
	}
	return g, nil
}

// keyLoop re-reads the gossip keys on each Hangup until Stop; a reload
// that fails keeps the keys in use.
func (g *gossipMember) keyLoop() {
	defer g.wg.Done()
	for {
		select {
		case <-g.stop:
			return
		case <-g.cfg.Hangup:
		}
		keys, err := g.cfg.LoadKeys()
		if err == nil {
			err = gossipmeta.Rotate(g.keyring, keys)
		}
		if err != nil {
			g.cfg.Logger.Error("gossip key reload failed; keeping the previous keys", "error", err)
			continue
		}
		g.cfg.Logger.Info("gossip keys reloaded", "keys", len(keys))
	}
}

// Address is the member's own gossip address.
func (g *gossipMember) Address() string { return g.ml.LocalNode().Address() }

// Stop leaves the pool, shuts memberlist down and waits for the member's
// goroutines.
func (g *gossipMember) Stop() {
	close(g.stop)
	g.wg.Wait()
	// memberlist's schedulers complain about the transport they lose
	// while shutting down: expected, so no longer worth a warning.
	g.logw.stopping.Store(true)
	if err := g.ml.Leave(g.cfg.Timing.TCPTimeout); err != nil {
		g.cfg.Logger.Debug("gossip leave not confirmed", "error", err)
	}
	_ = g.ml.Shutdown()
}

// clk is the configured clock, or the system clock.
func (g *gossipMember) clk() clock.Clock {
	if g.cfg.Clock == nil {
		return clock.Real()
	}
	return g.cfg.Clock
}

// joinLoop joins the given addresses, and joins again (those and every
// server member last known) whenever no server member is alive, every
// Rejoin period.
func (g *gossipMember) joinLoop() {
	defer g.wg.Done()
	t := clock.NewTimer(g.clk(), 0)
	defer t.Stop()
	failing := false // warn once per run of failures
	for {
		select {
		case <-g.stop:
			return
		case <-t.C:
		}
		if addrs := g.rejoinAddrs(); len(addrs) > 0 {
			n, err := g.ml.Join(addrs)
			switch {
			case n > 0:
				failing = false
				g.cfg.Logger.Info("joined the replicas' gossip", "contacted", n)
			case !failing:
				failing = true
				g.cfg.Logger.Warn("cannot join the replicas' gossip; retrying", "addresses", addrs, "every", g.cfg.Timing.Rejoin, "error", err)
			default:
				g.cfg.Logger.Debug("gossip join failed; retrying", "addresses", addrs, "error", err)
			}
		}
		t.Reset(g.cfg.Timing.Rejoin)
	}
}

// rejoinAddrs are the addresses to join now: none while a server member
// is alive.
func (g *gossipMember) rejoinAddrs() []string {
	g.mu.Lock()
	defer g.mu.Unlock()
	if len(g.servers) > 0 {
		return nil
	}
	out := slices.Clone(g.cfg.Join)
	for _, id := range slices.Sorted(maps.Keys(g.known)) {
		if a := g.known[id]; !slices.Contains(out, a) {
			out = append(out, a)
		}
	}
	return out
}

// viewLoop hands every changed view to OnChange.
func (g *gossipMember) viewLoop() {
	defer g.wg.Done()
	var last gossipView
	for {
		select {
		case <-g.stop:
			return
		case <-g.changed:
		}
		v := g.view()
		if slices.Equal(v.Addrs, last.Addrs) && v.LeaderID == last.LeaderID && v.LeaderAddr == last.LeaderAddr {
			continue
		}
		last = v
		g.cfg.OnChange(v)
	}
}

// view computes the current view from the server members' metadata.
func (g *gossipMember) view() gossipView {
	g.mu.Lock()
	metas := maps.Clone(g.servers)
	g.mu.Unlock()
	return viewOf(metas)
}

// viewOf picks the replicas' gRPC addresses and the leader: the replica
// that announces itself as leader and that more than half of the alive
// replicas see as leader. A replica that died but is not declared dead yet
// still announces itself; the majority rule lets the new leader win as
// soon as the others follow it.
func viewOf(servers map[string]gossipmeta.Meta) gossipView {
	var v gossipView
	votes := map[string]int{}
	for _, id := range slices.Sorted(maps.Keys(servers)) {
		m := servers[id]
		if m.GRPCAddress != "" {
			v.Addrs = append(v.Addrs, m.GRPCAddress)
		}
		if m.LeaderSeen != "" {
			votes[m.LeaderSeen]++
		}
	}
	slices.Sort(v.Addrs)
	for id, n := range votes {
		m, ok := servers[id]
		if ok && m.LeaderSeen == id && m.GRPCAddress != "" && 2*n > len(servers) {
			v.LeaderID, v.LeaderAddr = id, m.GRPCAddress
		}
	}
	return v
}

func (g *gossipMember) signal() {
	select {
	case g.changed <- struct{}{}:
	default:
	}
}

// NodeMeta implements memberlist.Delegate.
func (g *gossipMember) NodeMeta(limit int) []byte {
	if len(g.meta) > limit {
		return nil
	}
	return g.meta
}

// NotifyMsg implements memberlist.Delegate; the agent takes no messages
// (a leaving replica's intent is for the replicas).
func (g *gossipMember) NotifyMsg([]byte) {}

// GetBroadcasts implements memberlist.Delegate.
func (g *gossipMember) GetBroadcasts(overhead, limit int) [][]byte { return nil }

// LocalState implements memberlist.Delegate; all state is in metadata.
func (g *gossipMember) LocalState(join bool) []byte { return nil }

// MergeRemoteState implements memberlist.Delegate.
func (g *gossipMember) MergeRemoteState(buf []byte, join bool) {}

// NotifyJoin implements memberlist.EventDelegate. Like the other event
// callbacks it runs under memberlist's lock and must not call into it.
func (g *gossipMember) NotifyJoin(n *memberlist.Node) { g.memberUp(n) }

// NotifyUpdate implements memberlist.EventDelegate.
func (g *gossipMember) NotifyUpdate(n *memberlist.Node) { g.memberUp(n) }

// NotifyLeave implements memberlist.EventDelegate: the member died or
// left.
func (g *gossipMember) NotifyLeave(n *memberlist.Node) {
	g.mu.Lock()
	_, known := g.servers[n.Name]
	delete(g.servers, n.Name)
	g.mu.Unlock()
	if known {
		g.cfg.Logger.Info("replica gone from gossip", "replica", n.Name)
		g.signal()
	}
}

// memberUp records a server member from its metadata; other roles are
// ignored, as the replicas ignore them.
func (g *gossipMember) memberUp(n *memberlist.Node) {
	meta, err := gossipmeta.Decode(n.Meta)
	g.mu.Lock()
	if err != nil {
		first := g.badMeta[n.Name] != err.Error()
		g.badMeta[n.Name] = err.Error()
		g.mu.Unlock()
		if first {
			g.cfg.Logger.Warn("ignoring gossip member with bad metadata", "member", n.Name, "address", n.Address(), "error", err)
		}
		return
	}
	delete(g.badMeta, n.Name)
	_, was := g.servers[n.Name]
	if meta.Role != gossipmeta.RoleServer {
		delete(g.servers, n.Name)
		g.mu.Unlock()
		if was {
			g.signal()
		}
		return
	}
	g.servers[n.Name] = meta
	g.known[n.Name] = n.Address()
	g.mu.Unlock()
	g.signal()
}

// levelWriter puts memberlist's "[LEVEL] memberlist: text" lines onto
// the agent's slog handler as the replicas do (internal/logbridge: the
// level read from the line, component=memberlist, a repeated warning or
// error once in 30 s); at debug only once the member is stopping.
type levelWriter struct {
	log      *slog.Logger
	lines    io.Writer
	stopping atomic.Bool
}

func newLevelWriter(log *slog.Logger, c clock.Clock) *levelWriter {
	// The agent's handler has the level (--log-level); the bridge passes
	// every line on.
	b := logbridge.New(log.Handler(), logbridge.Options{Level: "trace", Clock: c}).Named("memberlist")
	return &levelWriter{log: log.With("component", "memberlist"), lines: b.StandardWriter(nil)}
}

func (w *levelWriter) Write(p []byte) (int, error) {
	if !w.stopping.Load() {
		return w.lines.Write(p)
	}
	_, _, msg := logbridge.ParseLine(string(p))
	w.log.Debug(msg)
	return len(p), nil
}
