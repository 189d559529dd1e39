package server

import (
	"context"
	"io"
	"log/slog"
	"net"
	"sync"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/credentials/insecure"

	"github.com/grapnel-io/grapnel/cluster"
	"github.com/grapnel-io/grapnel/cluster/clustertest"
	"github.com/grapnel-io/grapnel/fsm"
	"github.com/grapnel-io/grapnel/internal/clock"
	"github.com/grapnel-io/grapnel/internal/identity"
	"github.com/grapnel-io/grapnel/internal/testwait"
	"github.com/grapnel-io/grapnel/internal/tlsreload"
	"github.com/grapnel-io/grapnel/rpc"
	"github.com/grapnel-io/grapnel/rpc/grapnelpb"
	"github.com/grapnel-io/grapnel/rpc/proxy"
	"github.com/grapnel-io/grapnel/rpc/rpctest"
	"github.com/grapnel-io/grapnel/server/metrics"
)

// replicaSet is a cluster of real replicas in one process: Raft, gossip and
// gRPC on loopback, formed the production way (BootstrapExpect and gossip
// join), each replica with its Server, Cluster service and proxy pool.
// Replicas can be started later than the others, and stopped.
type replicaSet struct {
	t    *testing.T
	reps []*replica
	// clk, when set before a replica starts, is its server's clock.
	clk clock.Clock
	// ca, when set before a replica starts, makes it serve mutual TLS
	// with a certificate of this CA naming it (grapnel://replica/ID) and
	// proxy with the same identity as a client.
	ca *rpctest.CA
	// metrics, when set before a replica starts, records its metrics.
	metrics *metrics.Set
	// configure, when set before a replica starts, adjusts its server's
	// config.
	configure func(*Config)
}

type replica struct {
	rs     *replicaSet
	id     string
	addr   string // gRPC
	raft   string
	gossip string
	dir    string
	lis    net.Listener
	hold   time.Duration
	// tls is the replica's own certificate when its set has a CA.
	tls     *rpc.TLSFiles
	started bool
	down    bool

	node *cluster.Node
	srv  *Server
	fsm  *fsm.FSM
	g    *grpc.Server
	pool *proxy.Pool

	stopOnce sync.Once
}

// newReplicaSet prepares n replicas (ids rs-1 … rs-n) that will form one
// cluster; start starts them. hold is each server's HoldTimeout.
func newReplicaSet(t *testing.T, n int, hold time.Duration) *replicaSet {
	t.Helper()
	rs := &replicaSet{t: t}
	for i := range n {
		lis, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		rs.reps = append(rs.reps, &replica{
			rs: rs, id: "rs-" + string(rune('1'+i)), addr: lis.Addr().String(), lis: lis,
			raft: freeAddr(t), gossip: freeAddr(t), dir: t.TempDir(), hold: hold,
		})
	}
	t.Cleanup(func() {
		for _, r := range rs.reps {
			r.stop()
		}
	})
	return rs
}

// startReplicaSet starts n replicas and waits until they have a leader
// that every replica knows, with its gRPC address.
func startReplicaSet(t *testing.T, n int, hold time.Duration) *replicaSet {
	t.Helper()
	rs := newReplicaSet(t, n, hold)
	for _, r := range rs.reps {
		r.start()
	}
	rs.leader()
	rs.gossipConverged()
	return rs
}

// gossipConverged waits until every running replica sees every other
// one alive in gossip with its gRPC address. Raft elects a leader before
// gossip has spread every member's metadata (it goes out every gossip
// interval, 500 ms), and the Cluster service reports members, and the
// quorum check counts the alive, from gossip.
func (rs *replicaSet) gossipConverged() {
	t := rs.t
	t.Helper()
	running := rs.running()
	clients := make([]grapnelpb.ClusterClient, len(running))
	for i, r := range running {
		clients[i] = clusterClient(t, r.addr)
	}
	testwait.For(t, 20*time.Second, func() bool {
		for _, c := range clients {
			st, err := c.Status(context.Background(), &grapnelpb.StatusRequest{})
			if err != nil || len(st.GetMembers()) != len(running) {
				return false
			}
			for _, m := range st.GetMembers() {
				if m.GetGossipStatus() != "alive" || m.GetGrpcAddress() == "" {
					return false
				}
			}
		}
		return true
	}, "every replica alive in every replica's gossip")
}

func (r *replica) start() {
	t := r.rs.t
	t.Helper()
	f := fsm.New()
	cfg := cluster.Config{
		ID: r.id, DataDir: r.dir, RaftAddress: r.raft, GRPCAddress: r.addr, GossipAddress: r.gossip,
		BootstrapExpect: len(r.rs.reps), FSM: f, Timing: clustertest.FastTiming(),
	}
	if len(r.rs.reps) > 1 {
		cfg.Join = []string{r.rs.reps[0].gossip}
	}
	node, err := cluster.NewNode(cfg)
	if err != nil {
		t.Fatal(err)
	}
	log := slog.New(slog.NewTextHandler(io.Discard, nil))
	var serverOpts []grpc.ServerOption
	r.pool = proxy.NewPool(grpc.WithTransportCredentials(insecure.NewCredentials()))
	var certs *tlsreload.Store
	if ca := r.rs.ca; ca != nil {
		if r.tls == nil {
			files := ca.IssueIdentity(t, r.id, identity.Replica, r.id, identity.ServerSAN)
			r.tls = &files
		}
		if certs, err = rpc.NewTLSStore(*r.tls); err != nil {
			t.Fatal(err)
		}
		serverOpts = append(serverOpts, grpc.Creds(credentials.NewTLS(rpc.ServerTLSConfigFrom(certs))))
		r.pool = proxy.NewPool(grpc.WithTransportCredentials(credentials.NewTLS(rpc.ClientTLSConfigFrom(certs, rpc.ServerName))))
	}
	scfg := Config{Node: node, FSM: f, Logger: log, HoldTimeout: r.hold, Proxy: r.pool, Clock: r.rs.clk,
		UntypedCertRole: identity.Agent, Metrics: r.rs.metrics, Certs: certs}
	if r.rs.configure != nil {
		r.rs.configure(&scfg)
	}
	srv, err := New(scfg)
	if err != nil {
		t.Fatal(err)
	}
	g := grpc.NewServer(append(append(serverOpts, rpc.StatusInterceptors()...), srv.Interceptors()...)...)
	srv.Register(g)
	srv.RegisterCluster(g)
	srv.RegisterPlan(g)
	srv.RegisterLocks(g)
	srv.Start()
	go func() { _ = g.Serve(r.lis) }()
	r.node, r.srv, r.fsm, r.g, r.started = node, srv, f, g, true
}

// stop shuts the replica down as a crash would look to the others: its
// gRPC server, Raft and gossip stop at once.
func (r *replica) stop() {
	if !r.started {
		return
	}
	r.down = true
	r.stopOnce.Do(func() {
		r.srv.Shutdown()
		r.g.Stop()
		_ = r.node.Shutdown()
		_ = r.pool.Close()
	})
}

// leader waits until one running replica serves as leader and every
// running replica knows it, with its gRPC address.
func (rs *replicaSet) leader() *replica {
	rs.t.Helper()
	var l *replica
	testwait.For(rs.t, 20*time.Second, func() bool {
		l = nil
		for _, r := range rs.running() {
			if r.srv.IsLeading() {
				l = r
			}
		}
		if l == nil {
			return false
		}
		for _, r := range rs.running() {
			if id, _, addr := r.node.LeaderInfo(); id != l.id || addr != l.addr {
				return false
			}
		}
		return true
	}, "a leader every replica knows")
	return l
}

// follower returns a running replica that does not lead.
func (rs *replicaSet) follower() *replica {
	rs.t.Helper()
	l := rs.leader()
	for _, r := range rs.running() {
		if r != l {
			return r
		}
	}
	rs.t.Fatal("no follower")
	return nil
}

func (rs *replicaSet) running() []*replica {
	var out []*replica
	for _, r := range rs.reps {
		if r.started && !r.down {
			out = append(out, r)
		}
	}
	return out
}

// testServer views a replica through the single-replica harness helpers
// (dial, cli, agent, store), failing t.
func (r *replica) testServer(t *testing.T) *testServer {
	return &testServer{t: t, addr: r.addr, srv: r.srv, node: r.node, fsm: r.fsm, g: r.g, dir: r.dir}
}

// dialRaw is a plain insecure gRPC connection to addr.
func dialRaw(t testing.TB, addr string) *grpc.ClientConn {
	t.Helper()
	cc, err := grpc.NewClient(addr, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cc.Close() })
	return cc
}
