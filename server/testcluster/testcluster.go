package testcluster

import (
	"io"
	"log/slog"
	"net"
	"sync"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"

	"github.com/grapnel-io/grapnel/cluster/clustertest"
	"github.com/grapnel-io/grapnel/internal/clock"
	"github.com/grapnel-io/grapnel/rpc"
	"github.com/grapnel-io/grapnel/rpc/proxy"
	"github.com/grapnel-io/grapnel/server"
)

// Cluster is N replicas with their servers; the embedded clustertest
// cluster partitions, stops and restarts them (a stopped replica's
// server and gRPC stop with it; a restarted one serves again on the same
// address).
type Cluster struct {
	*clustertest.Cluster
	t testing.TB
	// clock is every server's clock; nil is the system clock.
	clock clock.Clock

	mu      sync.Mutex
	serving map[string]*serving
	// configure, when set, adjusts each replica's server config.
	configure func(id string, cfg *server.Config)
}

type serving struct {
	srv  *server.Server
	g    *grpc.Server
	pool *proxy.Pool
	done chan struct{}
}

// New starts n replicas (insecure gRPC) and waits for a leader.
func New(t testing.TB, n int, opts ...clustertest.Option) *Cluster {
	return NewWithClock(t, n, nil, opts...)
}

// NewWithClock is New with every server on clk (server.Config.Clock), so
// that a test can drive the time every leader goes by.
func NewWithClock(t testing.TB, n int, clk clock.Clock, opts ...clustertest.Option) *Cluster {
	t.Helper()
	c := &Cluster{t: t, serving: map[string]*serving{}, clock: clk}
	opts = append(opts, clustertest.WithLeaderChConsumer(), clustertest.WithHooks(c.serve, c.unserve))
	c.Cluster = clustertest.New(t, n, opts...)
	c.WaitLeader(20 * time.Second)
	return c
}

// NewConfigured is New with configure adjusting each replica's server
// config before its server starts (a key file, a logger).
func NewConfigured(t testing.TB, n int, configure func(id string, cfg *server.Config), opts ...clustertest.Option) *Cluster {
	t.Helper()
	c := &Cluster{t: t, serving: map[string]*serving{}, configure: configure}
	opts = append(opts, clustertest.WithLeaderChConsumer(), clustertest.WithHooks(c.serve, c.unserve))
	c.Cluster = clustertest.New(t, n, opts...)
	c.WaitLeader(20 * time.Second)
	return c
}

// serve starts the server and gRPC of a replica whose node just started.
func (c *Cluster) serve(r *clustertest.Replica) {
	var lis net.Listener
	var err error
	// The address was reserved by closing a listener; another process
	// may hold it for a moment.
	for i := 0; i < 50; i++ {
		if lis, err = net.Listen("tcp", r.GRPCAddress); err == nil {
			break
		}
		clock.Sleep(clock.Real(), 20*time.Millisecond)
	}
	if err != nil {
		c.t.Errorf("testcluster: serve %s: %v", r.ID, err)
		return
	}
	pool := proxy.NewPool(grpc.WithTransportCredentials(insecure.NewCredentials()))
	cfg := server.Config{
		Node: r.Node, FSM: r.FSM, Logger: slog.New(slog.NewTextHandler(io.Discard, nil)),
		HoldTimeout: 5 * time.Second, Proxy: pool, Clock: c.clock,
	}
	if c.configure != nil {
		c.configure(r.ID, &cfg)
	}
	srv, err := server.New(cfg)
	if err != nil {
		lis.Close()
		c.t.Errorf("testcluster: server %s: %v", r.ID, err)
		return
	}
	g := grpc.NewServer(append(rpc.StatusInterceptors(), srv.Interceptors()...)...)
	srv.Register(g)
	srv.RegisterCluster(g)
	srv.RegisterPlan(g)
	srv.RegisterLocks(g)
	srv.Start()
	s := &serving{srv: srv, g: g, pool: pool, done: make(chan struct{})}
	go func() {
		defer close(s.done)
		_ = g.Serve(lis)
	}()
	c.mu.Lock()
	c.serving[r.ID] = s
	c.mu.Unlock()
}

// unserve stops a replica's server before its node stops.
func (c *Cluster) unserve(r *clustertest.Replica) {
	c.mu.Lock()
	s := c.serving[r.ID]
	delete(c.serving, r.ID)
	c.mu.Unlock()
	if s == nil {
		return
	}
	s.srv.Shutdown()
	s.g.Stop()
	<-s.done
	s.pool.Close()
}

// Addr is a replica's gRPC address.
func (c *Cluster) Addr(id string) string { return c.Replica(id).GRPCAddress }

// Addrs are every replica's gRPC addresses.
func (c *Cluster) Addrs() []string {
	var out []string
	for _, id := range c.IDs() {
		out = append(out, c.Addr(id))
	}
	return out
}

// Server is a running replica's server, nil while it is stopped.
func (c *Cluster) Server(id string) *server.Server {
	c.mu.Lock()
	defer c.mu.Unlock()
	if s := c.serving[id]; s != nil {
		return s.srv
	}
	return nil
}

// LeaderID is the id of the replica whose server leads, or "".
func (c *Cluster) LeaderID() string {
	for _, id := range c.Running() {
		if s := c.Server(id); s != nil && s.IsLeading() {
			return id
		}
	}
	return ""
}

// WaitServing waits until some replica's server leads, other than any of
// not, and returns its id.
func (c *Cluster) WaitServing(timeout time.Duration, not ...string) string {
	c.t.Helper()
	var id string
	c.WaitFor("a serving leader", timeout, func() bool {
		id = c.LeaderID()
		for _, n := range not {
			if id == n {
				return false
			}
		}
		return id != ""
	})
	return id
}
