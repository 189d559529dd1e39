package agent

import (
	"fmt"
	"io"
	"log/slog"
	"net"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials"

	"github.com/grapnel-io/grapnel/cluster"
	"github.com/grapnel-io/grapnel/cluster/clustertest"
	"github.com/grapnel-io/grapnel/fsm"
	"github.com/grapnel-io/grapnel/internal/clock"
	"github.com/grapnel-io/grapnel/internal/errs"
	"github.com/grapnel-io/grapnel/internal/identity"
	"github.com/grapnel-io/grapnel/internal/syncbuf"
	"github.com/grapnel-io/grapnel/internal/testwait"
	"github.com/grapnel-io/grapnel/rpc"
	"github.com/grapnel-io/grapnel/rpc/client"
	"github.com/grapnel-io/grapnel/rpc/grpcapi"
	"github.com/grapnel-io/grapnel/rpc/rpctest"
	"github.com/grapnel-io/grapnel/server"
)

// tlsReplica is a real one-voter replica serving mutual TLS, counting the
// agent streams it is asked for.
type tlsReplica struct {
	addr     string
	attempts atomic.Int32
}

func startTLSReplica(t *testing.T, pki *rpctest.CA) *tlsReplica {
	t.Helper()
	raftAddr, err := clustertest.FreeAddr()
	if err != nil {
		t.Fatal(err)
	}
	f := fsm.New()
	node, err := cluster.NewNode(cluster.Config{
		ID: "s1", DataDir: t.TempDir(), RaftAddress: raftAddr, FSM: f, BootstrapSelf: true,
		Timing: cluster.Timing{HeartbeatTimeout: 100 * time.Millisecond, ElectionTimeout: 100 * time.Millisecond,
			LeaderLeaseTimeout: 50 * time.Millisecond, CommitTimeout: 5 * time.Millisecond},
	})
	if err != nil {
		t.Fatal(err)
	}
	srv, err := server.New(server.Config{Node: node, FSM: f, Logger: slog.New(slog.NewTextHandler(io.Discard, nil)), UntypedCertRole: identity.Agent})
	if err != nil {
		t.Fatal(err)
	}
	tc, err := rpc.ServerTLSConfig(pki.IssueIdentity(t, "server", identity.Replica, "s1", rpc.ServerName))
	if err != nil {
		t.Fatal(err)
	}
	r := &tlsReplica{}
	count := func(s any, ss grpc.ServerStream, info *grpc.StreamServerInfo, h grpc.StreamHandler) error {
		if strings.HasSuffix(info.FullMethod, "/ConnectAgent") {
			r.attempts.Add(1)
		}
		return h(s, ss)
	}
	opts := append(append(rpc.ServerOptions(), rpc.StatusInterceptors()...), grpc.Creds(credentials.NewTLS(tc)), grpc.StreamInterceptor(count))
	g := grpc.NewServer(append(opts, srv.Interceptors()...)...)
	srv.Register(g)
	srv.RegisterCluster(g)
	srv.Start()
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	r.addr = lis.Addr().String()
	go func() { _ = g.Serve(lis) }()
	t.Cleanup(func() {
		srv.Shutdown()
		g.Stop()
		_ = node.Shutdown()
	})
	testwait.For(t, connectWithin, srv.IsLeading, "the replica to lead")
	return r
}

// refusedConn is an agent connection named agent_A whose certificate
// allows only another name, so the replica refuses every stream
// (PermissionDenied).
func refusedConn(t *testing.T, pki *rpctest.CA, addr string, clk clock.Clock, log *syncbuf.Buffer) *fakeConn {
	t.Helper()
	r, err := client.NewResolver(client.Options{Addrs: []string{addr}, TLS: pki.Issue(t, "agent", "agent_B"), Clock: clk})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { r.Close() })
	fc := &fakeConn{work: &fakeWork{}, ans: &fakeAnswers{}, logs: &fakeLogs{}, done: make(chan error, 1)}
	fc.conn = &conn{
		name: "agent_A", incarnation: 1, loadEvery: time.Second,
		log: slog.New(slog.NewTextHandler(log, nil)), resolver: r, work: fc.work, ctl: fc.ans, logs: fc.logs, out: newOutbox(),
	}
	return fc
}

func waitAttempts(t *testing.T, r *tlsReplica, n int32) {
	t.Helper()
	testwait.For(t, connectWithin, func() bool { return r.attempts.Load() >= n }, "attempt %d at the replica", n)
	if got := r.attempts.Load(); got != n {
		t.Fatalf("the replica saw %d attempts, want %d", got, n)
	}
}

func waitTimer(t *testing.T, clk *clock.Fake) {
	t.Helper()
	testwait.For(t, connectWithin, func() bool { return clk.Pending() == 1 }, "the agent waiting out its backoff")
}

// An agent the replica refuses (its certificate does not allow its name)
// tries again after 1, 2, 4, 8, 16 s, then every 30 s, each wait a random
// time in the upper half of its step; it logs one line per refusal.
// Before, it reconnected at once: 15,682 attempts and 31,365 log lines in
// 10 s against a real replica.
func TestRefusedAgentBacksOff(t *testing.T) {
	pki := rpctest.NewCA(t)
	rep := startTLSReplica(t, pki)
	clk := clock.NewFake(time.Unix(1000, 0))
	var log syncbuf.Buffer
	fc := refusedConn(t, pki, rep.addr, clk, &log)
	fc.start(t)

	waitAttempts(t, rep, 1)
	steps := []time.Duration{time.Second, 2 * time.Second, 4 * time.Second, 8 * time.Second, 16 * time.Second,
		30 * time.Second, 30 * time.Second, 30 * time.Second}
	var elapsed time.Duration
	for i, d := range steps {
		waitTimer(t, clk)
		// Not before half the step: the agent is still waiting, and the
		// replica has seen nothing more.
		clk.Advance(d/2 - time.Millisecond)
		if clk.Pending() != 1 {
			t.Fatalf("refusal %d: the agent tried again within %v, before half its %v step", i+1, d/2-time.Millisecond, d)
		}
		if got := rep.attempts.Load(); got != int32(i+1) {
			t.Fatalf("refusal %d: the replica saw %d attempts while the agent waited", i+1, got)
		}
		// By the end of the step it has tried again.
		clk.Advance(d/2 + time.Millisecond)
		elapsed += d
		waitAttempts(t, rep, int32(i+2))
	}
	// 9 attempts in 139 s of the agent's time, against about 218,000
	// before.
	if n := rep.attempts.Load(); n != int32(len(steps)+1) {
		t.Fatalf("%d attempts in %v", n, elapsed)
	}
	waitTimer(t, clk)
	out := log.String()
	if n := strings.Count(out, "the server refused the agent stream"); n != len(steps)+1 {
		t.Fatalf("%d refusal lines for %d refusals:\n%s", n, len(steps)+1, out)
	}
	if !strings.Contains(out, "may not say AgentHello as 'agent_A'") || !strings.Contains(out, "retry_in=") {
		t.Fatalf("the refusal lines do not say why and when the next attempt is:\n%s", out)
	}
	if strings.Contains(out, "connected to the server") {
		t.Fatalf("a refused agent claims to be connected:\n%s", out)
	}
}

// With the system clock: the third attempt comes no sooner than 1.5 s
// after the first (the shortest waits of the first two steps).
func TestRefusedAgentAttemptRate(t *testing.T) {
	pki := rpctest.NewCA(t)
	rep := startTLSReplica(t, pki)
	var log syncbuf.Buffer
	fc := refusedConn(t, pki, rep.addr, nil, &log)
	fc.start(t)
	testwait.For(t, connectWithin, func() bool { return rep.attempts.Load() >= 1 }, "the first attempt")
	first := time.Now()
	testwait.For(t, connectWithin, func() bool { return rep.attempts.Load() >= 3 }, "the third attempt")
	if d := time.Since(first); d < 1500*time.Millisecond-50*time.Millisecond {
		t.Fatalf("three attempts within %v", d)
	}
	if n := rep.attempts.Load(); n != 3 {
		t.Fatalf("%d attempts when the third was seen", n)
	}
}

// A stream the server takes (ServerHello) starts the backoff over: after
// three refusals in a row the fourth stream is accepted, and the refusal
// after it waits at most the first step again.
func TestAgentBackoffStartsOverAfterAcceptance(t *testing.T) {
	set := newFakeReplicas(t, 1)
	set.setLeader("r1")
	clk := clock.NewFake(time.Unix(1000, 0))
	r, err := client.NewResolver(client.Options{Addrs: set.addrs(), Insecure: true, HeartbeatInterval: 50 * time.Millisecond, Clock: clk})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { r.Close() })
	fc := &fakeConn{work: &fakeWork{}, ans: &fakeAnswers{}, logs: &fakeLogs{}, done: make(chan error, 1)}
	fc.conn = &conn{name: "agent_A", incarnation: 7, loadEvery: time.Second, log: quiet, resolver: r,
		work: fc.work, ctl: fc.ans, logs: fc.logs, out: newOutbox()}
	fc.start(t)
	refusal := rpc.ToStatus(fmt.Errorf("%w: not this name", errs.ErrUnauthenticated))
	hello := &grpcapi.FromServer{FromServerEnum: &grpcapi.FromServer_ServerHello{ServerHello: &grpcapi.ServerHello{}}}

	refuseNext := func(step time.Duration, greet bool) {
		t.Helper()
		fs := set.rep("r1").accepted(t)
		if greet {
			fs.out <- hello
			testwait.For(t, connectWithin, func() bool {
				wait, n := r.Refused()
				return wait == 0 && n == 0
			}, "the backoff starting over after the hello")
		}
		fs.end <- refusal
		testwait.For(t, connectWithin, func() bool { return clk.Pending() == 1 }, "the agent waiting out its backoff")
		wait, _ := r.Refused()
		if wait < step/2 || wait > step {
			t.Fatalf("wait %v, want within [%v, %v]", wait, step/2, step)
		}
		clk.Advance(wait)
	}
	refuseNext(time.Second, false)
	refuseNext(2*time.Second, false)
	refuseNext(4*time.Second, false)
	refuseNext(time.Second, true) // accepted, then refused: the first step again
	set.rep("r1").accepted(t)
}
