package server

import (
	"io"
	"log/slog"
	"net"
	"sync/atomic"
	"testing"
	"time"

	"google.golang.org/grpc"

	"github.com/grapnel-io/grapnel/cluster"
	"github.com/grapnel-io/grapnel/fsm"
	"github.com/grapnel-io/grapnel/internal/testwait"
	"github.com/grapnel-io/grapnel/rpc"
	"github.com/grapnel-io/grapnel/rpc/ankbase"
	"github.com/grapnel-io/grapnel/rpc/grpcapi"
	"github.com/grapnel-io/grapnel/rpc/wire"
	"github.com/grapnel-io/grapnel/state"
)

// startServerCfg is startServerIn with a hook that adjusts the server's
// Config (clock, grace, apply timeout) before it starts.
func startServerCfg(t testing.TB, dir string, startup *state.State, mod func(*Config)) *testServer {
	t.Helper()
	cfg := Config{FSM: fsm.New(), Logger: slog.New(slog.NewTextHandler(io.Discard, nil)), StartupState: startup}
	if mod != nil {
		// mod may replace the FSM too (fsm.NewWithoutHistory).
		mod(&cfg)
	}
	f := cfg.FSM
	node, err := cluster.NewNode(cluster.Config{
		ID: "test-1", DataDir: dir, RaftAddress: freeAddr(t), FSM: f, BootstrapSelf: true,
		Timing: cluster.Timing{HeartbeatTimeout: 100 * time.Millisecond, ElectionTimeout: 100 * time.Millisecond,
			LeaderLeaseTimeout: 50 * time.Millisecond, CommitTimeout: 5 * time.Millisecond},
	})
	if err != nil {
		t.Fatal(err)
	}
	cfg.Node = node
	srv, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	g := grpc.NewServer(append(rpc.StatusInterceptors(), srv.Interceptors()...)...)
	srv.Register(g)
	srv.RegisterCluster(g)
	srv.RegisterPlan(g)
	srv.RegisterLocks(g)
	srv.Start()
	go func() { _ = g.Serve(lis) }()
	ts := &testServer{t: t, addr: lis.Addr().String(), srv: srv, node: node, fsm: f, g: g, dir: dir}
	t.Cleanup(ts.stop)
	testwait.For(t, 10*time.Second, srv.IsLeading, "leadership")
	if startup != nil {
		testwait.For(t, 10*time.Second, func() bool {
			rev := uint64(0)
			f.Read(func(s *state.Store, _ uint64) { rev = s.Revision })
			return rev != 0
		}, "startup state")
	}
	return ts
}

// countEntries counts the applied entries of each type from now on.
func countEntries(ts *testServer) func(fsm.MessageType) int64 {
	var counts [256]atomic.Int64
	ts.fsm.SetObserver(func(t fsm.MessageType, _ uint64) { counts[t].Add(1) })
	return func(t fsm.MessageType) int64 { return counts[t].Load() }
}

// hello opens an agent stream with an incarnation and waits for its
// ServerHello.
func (ts *testServer) hello(name string, incarnation uint64, tags map[string]string) (*testConn, *grpcapi.ServerHello) {
	c := ts.dial(wire.KindAgent)
	c.send(&grpcapi.ToServer{ToServerEnum: &grpcapi.ToServer_AgentHello{AgentHello: &grpcapi.AgentHello{
		AgentName: name, ProtocolVersion: rpc.ProtocolVersion, Tags: &ankbase.Tags{Tags: tags}, GrapnelIncarnation: incarnation}}})
	m := c.expect("ServerHello", func(m *grpcapi.FromServer) bool { return m.GetServerHello() != nil })
	return c, m.GetServerHello()
}

// report sends a marked state report.
func (c *testConn) report(generation uint64, ws ...state.WorkloadState) {
	c.t.Helper()
	c.send(&grpcapi.ToServer{ToServerEnum: &grpcapi.ToServer_UpdateWorkloadState{UpdateWorkloadState: &grpcapi.UpdateWorkloadState{
		WorkloadStates: rpc.WorkloadStatesToProto(ws), GrapnelGeneration: generation}}})
}

// sync returns once the leader loop has handled everything this agent
// sent before: the agent sends a request naming none of its workloads,
// which the loop refuses at once (forwarded.go), in order with the
// agent's messages. (It once sent a log batch addressed to itself, which
// the server now drops: log responses count only from a campaign's
// provider.)
func (c *testConn) sync(marker string) {
	c.t.Helper()
	c.send(&grpcapi.ToServer{ToServerEnum: &grpcapi.ToServer_Request{Request: &ankbase.Request{
		RequestId: marker, RequestContent: &ankbase.Request_EventsCancelRequest{EventsCancelRequest: &ankbase.EventsCancelRequest{}}}}})
	c.expect("marker "+marker, func(m *grpcapi.FromServer) bool { return m.GetResponse().GetRequestId() == marker })
}

// stateOf reads an instance's stored state.
func (ts *testServer) stateOf(in state.InstanceName) (state.ExecutionState, bool) {
	var (
		s  state.ExecutionState
		ok bool
	)
	ts.store(func(st *state.Store) { s, ok = st.States.Get(in) })
	return s, ok
}
