package server

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/protobuf/proto"

	"github.com/grapnel-io/grapnel/cluster"
	"github.com/grapnel-io/grapnel/cluster/clustertest"
	"github.com/grapnel-io/grapnel/fsm"
	"github.com/grapnel-io/grapnel/internal/testwait"
	"github.com/grapnel-io/grapnel/rpc"
	"github.com/grapnel-io/grapnel/rpc/ankbase"
	"github.com/grapnel-io/grapnel/rpc/grpcapi"
	"github.com/grapnel-io/grapnel/rpc/wire"
	"github.com/grapnel-io/grapnel/state"
)

// testServer is a real one-voter replica on loopback: Raft on its WAL
// (raft-wal) in a temp dir, the server, and gRPC.
type testServer struct {
	t    testing.TB
	addr string
	srv  *Server
	node *cluster.Node
	fsm  *fsm.FSM
	g    *grpc.Server
	dir  string
}

func freeAddr(t testing.TB) string {
	t.Helper()
	addr, err := clustertest.FreeAddr()
	if err != nil {
		t.Fatal(err)
	}
	return addr
}

func startServer(t testing.TB, startup *state.State) *testServer {
	return startServerIn(t, t.TempDir(), startup)
}

// shortReconnectGrace is startServerCfg's change for the tests of what
// happens once a departed agent's grace ends, not of the grace's length:
// they need not wait the default 3 s.
func shortReconnectGrace(cfg *Config) { cfg.AgentReconnectGrace = 300 * time.Millisecond }

func startServerIn(t testing.TB, dir string, startup *state.State) *testServer {
	t.Helper()
	return startServerCfg(t, dir, startup, nil)
}

var stopOnce sync.Map

func (ts *testServer) stop() {
	if _, done := stopOnce.LoadOrStore(ts, true); done {
		return
	}
	ts.srv.Shutdown()
	ts.g.Stop()
	_ = ts.node.Shutdown()
}

func (ts *testServer) store(fn func(s *state.Store)) {
	ts.fsm.Read(func(s *state.Store, _ uint64) { fn(s) })
}

// testConn is a raw Ankaios stream to the server, as an agent or CLI.
type testConn struct {
	t      testing.TB
	cc     *grpc.ClientConn
	stream grpc.BidiStreamingClient[grpcapi.ToServer, grpcapi.FromServer]
	cancel context.CancelFunc
	mu     sync.Mutex
	cond   *sync.Cond
	msgs   []*grpcapi.FromServer
	err    error
	nextID int
}

func (ts *testServer) dial(kind wire.Kind) *testConn {
	t := ts.t
	t.Helper()
	cc, err := grpc.NewClient(ts.addr, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	c := &testConn{t: t, cc: cc, cancel: cancel}
	c.cond = sync.NewCond(&c.mu)
	c.stream, err = kind.Open(ctx, cc)
	if err != nil {
		t.Fatal(err)
	}
	go func() {
		for {
			m, err := c.stream.Recv()
			c.mu.Lock()
			if err != nil {
				c.err = err
				c.cond.Broadcast()
				c.mu.Unlock()
				return
			}
			c.msgs = append(c.msgs, m)
			c.cond.Broadcast()
			c.mu.Unlock()
		}
	}()
	t.Cleanup(c.close)
	return c
}

func (ts *testServer) agent(name string, tags map[string]string) *testConn {
	c := ts.dial(wire.KindAgent)
	c.send(&grpcapi.ToServer{ToServerEnum: &grpcapi.ToServer_AgentHello{AgentHello: &grpcapi.AgentHello{
		AgentName: name, ProtocolVersion: rpc.ProtocolVersion, Tags: &ankbase.Tags{Tags: tags}}}})
	c.expect("ServerHello", func(m *grpcapi.FromServer) bool { return m.GetServerHello() != nil })
	testwait.For(ts.t, 10*time.Second, func() bool {
		ok := false
		ts.store(func(s *state.Store) { _, ok = s.Agents[name] })
		return ok
	}, "%s", "agent "+name+" in the agent map")
	return c
}

func (ts *testServer) cli() *testConn {
	c := ts.dial(wire.KindCLI)
	c.send(&grpcapi.ToServer{ToServerEnum: &grpcapi.ToServer_CommanderHello{CommanderHello: &grpcapi.CommanderHello{ProtocolVersion: rpc.ProtocolVersion}}})
	return c
}

func (c *testConn) close() {
	c.cancel()
	_ = c.cc.Close()
}

func (c *testConn) send(m *grpcapi.ToServer) {
	c.t.Helper()
	if err := c.stream.Send(m); err != nil {
		c.t.Fatalf("send: %v", err)
	}
}

// expect waits for the first not yet consumed message matching pred and
// consumes it.
func (c *testConn) expect(what string, pred func(*grpcapi.FromServer) bool) *grpcapi.FromServer {
	c.t.Helper()
	m, ok := c.tryExpect(5*time.Second, pred)
	if !ok {
		c.t.Fatalf("no %s received (stream error: %v)", what, c.streamErr())
	}
	return m
}

func (c *testConn) tryExpect(bound time.Duration, pred func(*grpcapi.FromServer) bool) (*grpcapi.FromServer, bool) {
	deadline := time.Now().Add(bound)
	timer := time.AfterFunc(bound, func() { c.mu.Lock(); c.cond.Broadcast(); c.mu.Unlock() })
	defer timer.Stop()
	c.mu.Lock()
	defer c.mu.Unlock()
	for {
		for i, m := range c.msgs {
			if pred(m) {
				c.msgs = append(c.msgs[:i:i], c.msgs[i+1:]...)
				return m, true
			}
		}
		if c.err != nil || time.Now().After(deadline) {
			return nil, false
		}
		c.cond.Wait()
	}
}

func (c *testConn) streamErr() error {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.err
}

// request sends a request and waits for its response.
func (c *testConn) request(req *ankbase.Request) *ankbase.Response {
	c.t.Helper()
	c.mu.Lock()
	c.nextID++
	id := fmt.Sprintf("req-%d", c.nextID)
	c.mu.Unlock()
	req = proto.Clone(req).(*ankbase.Request)
	req.RequestId = id
	c.send(&grpcapi.ToServer{ToServerEnum: &grpcapi.ToServer_Request{Request: req}})
	m := c.expect("response to "+id, func(m *grpcapi.FromServer) bool { return m.GetResponse().GetRequestId() == id })
	return m.GetResponse()
}

// updateAsync sends an update and returns its request id without
// waiting for the answer (answer waits for it).
func (c *testConn) updateAsync(newState state.Tree, masks ...string) string {
	c.t.Helper()
	cs, err := rpc.CompleteStateFromTree(newState)
	if err != nil {
		c.t.Fatal(err)
	}
	c.mu.Lock()
	c.nextID++
	id := fmt.Sprintf("req-%d", c.nextID)
	c.mu.Unlock()
	c.send(&grpcapi.ToServer{ToServerEnum: &grpcapi.ToServer_Request{Request: &ankbase.Request{RequestId: id,
		RequestContent: &ankbase.Request_UpdateStateRequest{UpdateStateRequest: &ankbase.UpdateStateRequest{NewState: cs, UpdateMask: masks}}}}})
	return id
}

// answer waits up to bound for the response to the request id; nil if
// none came.
func (c *testConn) answer(id string, bound time.Duration) *ankbase.Response {
	m, ok := c.tryExpect(bound, func(m *grpcapi.FromServer) bool { return m.GetResponse().GetRequestId() == id })
	if !ok {
		return nil
	}
	return m.GetResponse()
}

func (c *testConn) update(newState state.Tree, masks ...string) *ankbase.Response {
	c.t.Helper()
	cs, err := rpc.CompleteStateFromTree(newState)
	if err != nil {
		c.t.Fatal(err)
	}
	return c.request(&ankbase.Request{RequestContent: &ankbase.Request_UpdateStateRequest{
		UpdateStateRequest: &ankbase.UpdateStateRequest{NewState: cs, UpdateMask: masks}}})
}

func (c *testConn) get(masks ...string) *ankbase.CompleteState {
	c.t.Helper()
	r := c.request(&ankbase.Request{RequestContent: &ankbase.Request_CompleteStateRequest{
		CompleteStateRequest: &ankbase.CompleteStateRequest{FieldMask: masks}}})
	if r.GetCompleteStateResponse() == nil {
		c.t.Fatalf("expected a CompleteStateResponse, got %v", r)
	}
	return r.GetCompleteStateResponse().GetCompleteState()
}

// manifest parses a YAML manifest for a test.
func manifest(t *testing.T, y string) state.Tree {
	t.Helper()
	tr, err := state.ParseTree([]byte(y))
	if err != nil {
		t.Fatal(err)
	}
	return state.Tree{"desiredState": tr}
}

func mustState(t *testing.T, y string) *state.State {
	t.Helper()
	s, _, err := state.ParseManifest([]byte(y))
	if err != nil {
		t.Fatal(err)
	}
	return &s
}
