package wire

import (
	"context"
	"net"
	"testing"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"

	"github.com/grapnel-io/grapnel/rpc/grpcapi"
)

func TestKindNames(t *testing.T) {
	for k, want := range map[Kind]string{KindCLI: "CliConnection", KindCommand: "CommandConnection", KindAgent: "AgentConnection", Kind(9): "Kind(9)"} {
		if k.String() != want {
			t.Errorf("%d: %s", int(k), k)
		}
	}
}

// services records which of the three streams a connection came in on.
type services struct {
	grpcapi.UnimplementedCliConnectionServer
	grpcapi.UnimplementedCommandConnectionServer
	grpcapi.UnimplementedAgentConnectionServer
	got chan Kind
}

type serverStream = grpc.BidiStreamingServer[grpcapi.ToServer, grpcapi.FromServer]

func (s services) ConnectCli(serverStream) error     { s.got <- KindCLI; return nil }
func (s services) ConnectCommand(serverStream) error { s.got <- KindCommand; return nil }
func (s services) ConnectAgent(serverStream) error   { s.got <- KindAgent; return nil }

// Open reaches the service its kind names, and refuses a kind that names
// none.
func TestOpenReachesTheKindsService(t *testing.T) {
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	svc := services{got: make(chan Kind, 1)}
	g := grpc.NewServer()
	grpcapi.RegisterCliConnectionServer(g, svc)
	grpcapi.RegisterCommandConnectionServer(g, svc)
	grpcapi.RegisterAgentConnectionServer(g, svc)
	go func() { _ = g.Serve(lis) }()
	t.Cleanup(g.Stop)
	cc, err := grpc.NewClient(lis.Addr().String(), grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cc.Close() })

	for _, k := range []Kind{KindCLI, KindCommand, KindAgent} {
		ctx, cancel := context.WithCancel(context.Background())
		st, err := k.Open(ctx, cc)
		if err != nil {
			t.Fatalf("%v: %v", k, err)
		}
		// The stream reaches the server by the first message at the
		// latest; the handler may have ended it already (io.EOF).
		_ = st.Send(&grpcapi.ToServer{})
		if got := <-svc.got; got != k {
			t.Errorf("opened %v, served by %v", k, got)
		}
		cancel()
	}
	if _, err := Kind(9).Open(context.Background(), cc); err == nil {
		t.Fatal("Kind(9) opened a stream")
	}
}
