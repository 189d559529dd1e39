package proxy

import (
	"context"
	"errors"
	"io"
	"net"
	"slices"
	"strings"
	"testing"
	"time"

	"google.golang.org/genproto/googleapis/rpc/errdetails"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"

	"github.com/grapnel-io/grapnel/rpc/grpcapi"
	"github.com/grapnel-io/grapnel/rpc/wire"
)

type cliStream = grpc.BidiStreamingServer[grpcapi.ToServer, grpcapi.FromServer]

// cliServer serves CliConnection with handle.
type cliServer struct {
	grpcapi.UnimplementedCliConnectionServer
	handle func(cliStream) error
}

func (s cliServer) ConnectCli(st grpcapi.CliConnection_ConnectCliServer) error { return s.handle(st) }

func serve(t *testing.T, handle func(cliStream) error) string {
	t.Helper()
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	g := grpc.NewServer()
	grpcapi.RegisterCliConnectionServer(g, cliServer{handle: handle})
	go func() { _ = g.Serve(lis) }()
	t.Cleanup(g.Stop)
	return lis.Addr().String()
}

// front serves a CliConnection that forwards every stream to back through
// a pool, as a follower does.
func front(t *testing.T, pool *Pool, back string, forwarded chan<- error) string {
	return serve(t, func(st cliStream) error {
		cc, err := pool.Get(back)
		if err != nil {
			return err
		}
		err = Forward(st.Context(), st, func(ctx context.Context) (wire.Stream, error) {
			return wire.KindCLI.Open(wire.Outgoing(ctx, "r2", "agent/agent-a", ""), cc)
		})
		if forwarded != nil {
			forwarded <- err
		}
		return err
	})
}

func open(t *testing.T, addr string) (grpc.BidiStreamingClient[grpcapi.ToServer, grpcapi.FromServer], context.CancelFunc) {
	t.Helper()
	cc, err := grpc.NewClient(addr, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cc.Close() })
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	st, err := grpcapi.NewCliConnectionClient(cc).ConnectCli(ctx)
	if err != nil {
		t.Fatal(err)
	}
	return st, cancel
}

func goodbye() *grpcapi.ToServer {
	return &grpcapi.ToServer{ToServerEnum: &grpcapi.ToServer_Goodbye{Goodbye: &grpcapi.Goodbye{}}}
}

func logsCancel(id string) *grpcapi.FromServer {
	return &grpcapi.FromServer{FromServerEnum: &grpcapi.FromServer_LogsCancelRequest{LogsCancelRequest: &grpcapi.LogsCancelRequest{RequestId: id}}}
}

func newPool(t *testing.T) *Pool {
	p := NewPool(grpc.WithTransportCredentials(insecure.NewCredentials()))
	t.Cleanup(func() { p.Close() })
	return p
}

// Messages go both ways in order; the client's half-close reaches the
// leader, whose clean end reaches the client.
func TestForwardCopiesBothWays(t *testing.T) {
	got := make(chan []string, 1)
	back := serve(t, func(st cliStream) error {
		var seen []string
		for {
			m, err := st.Recv()
			if errors.Is(err, io.EOF) {
				got <- seen
				return nil
			}
			if err != nil {
				return err
			}
			id := m.GetCommanderHello().GetProtocolVersion()
			seen = append(seen, id)
			if err := st.Send(logsCancel("echo-" + id)); err != nil {
				return err
			}
		}
	})
	forwarded := make(chan error, 1)
	st, _ := open(t, front(t, newPool(t), back, forwarded))
	for _, id := range []string{"1", "2", "3"} {
		if err := st.Send(&grpcapi.ToServer{ToServerEnum: &grpcapi.ToServer_CommanderHello{CommanderHello: &grpcapi.CommanderHello{ProtocolVersion: id}}}); err != nil {
			t.Fatal(err)
		}
		m, err := st.Recv()
		if err != nil {
			t.Fatal(err)
		}
		if m.GetLogsCancelRequest().GetRequestId() != "echo-"+id {
			t.Fatalf("got %v for %s", m, id)
		}
	}
	if err := st.CloseSend(); err != nil {
		t.Fatal(err)
	}
	if seen := <-got; !slices.Equal(seen, []string{"1", "2", "3"}) {
		t.Fatalf("the leader saw %v", seen)
	}
	if _, err := st.Recv(); !errors.Is(err, io.EOF) {
		t.Fatalf("client end: %v, want io.EOF", err)
	}
	if err := <-forwarded; err != nil {
		t.Fatalf("Forward = %v, want nil after a clean end", err)
	}
}

// The leader's status reaches the client unchanged: code, message and
// details.
func TestForwardPassesTheLeadersStatusVerbatim(t *testing.T) {
	sent := status.New(codes.FailedPrecondition, "Unsupported protocol version '0.1.0'. Currently supported '1'")
	sent, err := sent.WithDetails(&errdetails.ErrorInfo{Reason: "UNSUPPORTED_PROTOCOL", Domain: "grapnel.io"})
	if err != nil {
		t.Fatal(err)
	}
	back := serve(t, func(st cliStream) error {
		if _, err := st.Recv(); err != nil {
			return err
		}
		return sent.Err()
	})
	st, _ := open(t, front(t, newPool(t), back, nil))
	if err := st.Send(goodbye()); err != nil {
		t.Fatal(err)
	}
	_, err = st.Recv()
	got := status.Convert(err)
	if got.Code() != sent.Code() || got.Message() != sent.Message() || !proto.Equal(got.Proto(), sent.Proto()) {
		t.Fatalf("client got %v, want %v", got.Proto(), sent.Proto())
	}
}

// A client that goes away ends the leader's stream; cancelling Forward's
// context (leadership moved) ends both.
func TestForwardEnds(t *testing.T) {
	tests := []struct {
		name string
		end  func(clientCancel context.CancelFunc, forwardCancel context.CancelFunc)
	}{
		{"client leaves", func(c, _ context.CancelFunc) { c() }},
		{"forwarding cancelled", func(_, f context.CancelFunc) { f() }},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			leaderEnded := make(chan error, 1)
			started := make(chan struct{})
			back := serve(t, func(st cliStream) error {
				close(started)
				<-st.Context().Done()
				leaderEnded <- st.Context().Err()
				return nil
			})
			pool := newPool(t)
			forwardCtx, forwardCancel := context.WithCancel(context.Background())
			defer forwardCancel()
			forwarded := make(chan error, 1)
			addr := serve(t, func(st cliStream) error {
				cc, err := pool.Get(back)
				if err != nil {
					return err
				}
				ctx, cancel := context.WithCancel(st.Context())
				defer cancel()
				stop := context.AfterFunc(forwardCtx, cancel)
				defer stop()
				err = Forward(ctx, st, func(ctx context.Context) (grpc.BidiStreamingClient[grpcapi.ToServer, grpcapi.FromServer], error) {
					return grpcapi.NewCliConnectionClient(cc).ConnectCli(ctx)
				})
				forwarded <- err
				return status.Error(codes.Unavailable, "the leader changed")
			})
			st, clientCancel := open(t, addr)
			if err := st.Send(goodbye()); err != nil {
				t.Fatal(err)
			}
			select {
			case <-started:
			case <-time.After(5 * time.Second):
				t.Fatal("the leader's stream was not opened")
			}
			tc.end(clientCancel, forwardCancel)
			select {
			case err := <-leaderEnded:
				if !errors.Is(err, context.Canceled) {
					t.Fatalf("leader stream ended with %v", err)
				}
			case <-time.After(5 * time.Second):
				t.Fatal("the leader's stream did not end")
			}
			select {
			case <-forwarded:
			case <-time.After(5 * time.Second):
				t.Fatal("Forward did not return")
			}
		})
	}
}

func TestForwardOpenError(t *testing.T) {
	want := errors.New("no route")
	addr := serve(t, func(st cliStream) error {
		return Forward(st.Context(), st, func(context.Context) (grpc.BidiStreamingClient[grpcapi.ToServer, grpcapi.FromServer], error) {
			return nil, status.Error(codes.Unavailable, want.Error())
		})
	})
	st, _ := open(t, addr)
	if _, err := st.Recv(); status.Code(err) != codes.Unavailable || status.Convert(err).Message() != want.Error() {
		t.Fatalf("got %v", err)
	}
}

func TestPool(t *testing.T) {
	p := NewPool(grpc.WithTransportCredentials(insecure.NewCredentials()))
	a1, err := p.Get("127.0.0.1:1")
	if err != nil {
		t.Fatal(err)
	}
	a2, _ := p.Get("127.0.0.1:1")
	b, _ := p.Get("127.0.0.1:2")
	if a1 != a2 || a1 == b || p.Len() != 2 {
		t.Fatalf("one connection per address: %p %p %p, %d", a1, a2, b, p.Len())
	}
	p.Retain("127.0.0.1:2")
	if p.Len() != 1 {
		t.Fatalf("Retain left %d connections", p.Len())
	}
	if b2, _ := p.Get("127.0.0.1:2"); b2 != b {
		t.Fatal("Retain dropped the one to keep")
	}
	if err := p.Close(); err != nil {
		t.Fatal(err)
	}
	if _, err := p.Get("127.0.0.1:2"); !errors.Is(err, ErrPoolClosed) {
		t.Fatalf("Get after Close: %v", err)
	}
	if NewPool().Len() != 0 {
		t.Fatal("new pool not empty")
	}
	// Without transport credentials gRPC refuses to build a connection;
	// the error names the address.
	if _, err := NewPool().Get("127.0.0.1:3"); err == nil || !strings.Contains(err.Error(), "127.0.0.1:3") {
		t.Fatalf("Get without credentials: %v", err)
	}
}
