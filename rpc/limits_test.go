package rpc

import (
	"context"
	"net"
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/status"

	"github.com/grapnel-io/grapnel/rpc/ankbase"
	"github.com/grapnel-io/grapnel/rpc/grpcapi"
)

// A client's keepalive pings stay within what the server enforces;
// otherwise gRPC ends the connection with GOAWAY (too_many_pings) after
// a few pings.
func TestClientKeepaliveWithinEnforcement(t *testing.T) {
	if ClientKeepalive.Time < KeepaliveEnforcement.MinTime {
		t.Fatalf("clients ping every %v, the server allows one every %v", ClientKeepalive.Time, KeepaliveEnforcement.MinTime)
	}
	if ClientKeepalive.PermitWithoutStream && !KeepaliveEnforcement.PermitWithoutStream {
		t.Fatal("clients ping without a stream, the server does not allow it")
	}
	if ClientKeepalive.Time < 10*time.Second {
		t.Fatalf("gRPC raises a client keepalive time below 10 s; %v says something it does not do", ClientKeepalive.Time)
	}
}

// sizeServer answers each message on a CLI stream with a message of the
// size it asks for, in the request id's length.
type sizeServer struct {
	grpcapi.UnimplementedCliConnectionServer
	got chan int
}

func (s *sizeServer) ConnectCli(st grpcapi.CliConnection_ConnectCliServer) error {
	for {
		m, err := st.Recv()
		if err != nil {
			return err
		}
		id := m.GetRequest().GetRequestId()
		s.got <- len(id)
		if err := st.Send(&grpcapi.FromServer{FromServerEnum: &grpcapi.FromServer_Response{Response: &ankbase.Response{RequestId: id}}}); err != nil {
			return err
		}
	}
}

func request(n int) *grpcapi.ToServer {
	return &grpcapi.ToServer{ToServerEnum: &grpcapi.ToServer_Request{Request: &ankbase.Request{RequestId: strings.Repeat("x", n)}}}
}

// The server and a client with ClientLimits agree on the message limit:
// what fits goes both ways; what does not is refused by the sending side,
// before it travels, with ResourceExhausted.
func TestMessageLimitsAgree(t *testing.T) {
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv := &sizeServer{got: make(chan int, 4)}
	g := grpc.NewServer(ServerOptions()...)
	grpcapi.RegisterCliConnectionServer(g, srv)
	go func() { _ = g.Serve(lis) }()
	t.Cleanup(g.Stop)
	cc, err := grpc.NewClient(lis.Addr().String(), grpc.WithTransportCredentials(insecure.NewCredentials()), ClientLimits())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cc.Close() })
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	open := func() grpc.BidiStreamingClient[grpcapi.ToServer, grpcapi.FromServer] {
		st, err := grpcapi.NewCliConnectionClient(cc).ConnectCli(ctx)
		if err != nil {
			t.Fatal(err)
		}
		return st
	}

	// Just under the limit, both ways (the envelope takes a few bytes).
	fits := MaxMessageBytes - 64
	st := open()
	if err := st.Send(request(fits)); err != nil {
		t.Fatalf("send %d bytes: %v", fits, err)
	}
	if got := <-srv.got; got != fits {
		t.Fatalf("server got %d bytes", got)
	}
	if m, err := st.Recv(); err != nil || len(m.GetResponse().GetRequestId()) != fits {
		t.Fatalf("answer of %d bytes: %v", fits, err)
	}

	// Over it: the client refuses to send.
	err = open().Send(request(MaxMessageBytes + 1))
	if status.Code(err) != codes.ResourceExhausted || !strings.Contains(err.Error(), "larger than max") {
		t.Fatalf("sending over the limit: %v, want the client's ResourceExhausted", err)
	}
	select {
	case n := <-srv.got:
		t.Fatalf("the server received a message of %d bytes over the limit", n)
	default:
	}
}

// The server refuses to send over the limit, too: its answer to a request
// that fits but whose echo would not ends the stream with
// ResourceExhausted (server/conns.go keeps Grapnel from getting there).
func TestServerSendLimit(t *testing.T) {
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	g := grpc.NewServer(ServerOptions()...)
	grpcapi.RegisterCliConnectionServer(g, &bigAnswer{})
	go func() { _ = g.Serve(lis) }()
	t.Cleanup(g.Stop)
	cc, err := grpc.NewClient(lis.Addr().String(), grpc.WithTransportCredentials(insecure.NewCredentials()), ClientLimits())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cc.Close() })
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	st, err := grpcapi.NewCliConnectionClient(cc).ConnectCli(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if err := st.Send(request(10)); err != nil {
		t.Fatal(err)
	}
	_, err = st.Recv()
	if status.Code(err) != codes.ResourceExhausted || !strings.Contains(err.Error(), "larger than max") {
		t.Fatalf("receiving an answer over the limit: %v, want the server's ResourceExhausted", err)
	}
}

type bigAnswer struct {
	grpcapi.UnimplementedCliConnectionServer
}

func (bigAnswer) ConnectCli(st grpcapi.CliConnection_ConnectCliServer) error {
	if _, err := st.Recv(); err != nil {
		return err
	}
	return st.Send(&grpcapi.FromServer{FromServerEnum: &grpcapi.FromServer_Response{Response: &ankbase.Response{
		RequestId: strings.Repeat("y", MaxMessageBytes+1)}}})
}
