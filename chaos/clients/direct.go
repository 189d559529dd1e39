package clients

import (
	"context"
	"fmt"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/credentials/insecure"

	"github.com/grapnel-io/grapnel/rpc"
	"github.com/grapnel-io/grapnel/rpc/client"
	"github.com/grapnel-io/grapnel/rpc/grpcapi"
	"github.com/grapnel-io/grapnel/rpc/wire"
)

// direct is a Direct client's connection to its one replica.
type direct struct {
	addr string
	cc   *grpc.ClientConn
}

func newDirect(cfg Config, addr string) (*direct, error) {
	creds := insecure.NewCredentials()
	if cfg.TLS != nil {
		tc, err := rpc.ClientTLSConfig(*cfg.TLS, rpc.ServerName)
		if err != nil {
			return nil, err
		}
		creds = credentials.NewTLS(tc)
	}
	cc, err := grpc.NewClient(addr, grpc.WithTransportCredentials(creds), rpc.Redial())
	if err != nil {
		return nil, err
	}
	return &direct{addr: addr, cc: cc}, nil
}

func (d *direct) close() { d.cc.Close() }

// open opens a CommandConnection at the replica as an Ankaios client
// does, without grapnel-leader-aware (a follower proxies it), and says
// hello at once: a proxying follower may send its header only once the
// leader answers, so waiting for it first would wait for ever. A refusal
// shows on the first answer.
func (d *direct) open(ctx context.Context) (*session, error) {
	sctx, cancel := context.WithCancel(context.Background())
	stop := context.AfterFunc(ctx, cancel)
	st, err := wire.KindCommand.Open(sctx, d.cc)
	if !stop() || err != nil {
		cancel()
		if err == nil {
			err = ctx.Err()
		}
		return nil, fmt.Errorf("%w: %s: %v", client.ErrNoServer, d.addr, err)
	}
	return greet(&directStream{st: st, cancel: cancel, addr: d.addr})
}

// directStream is a stream a Direct client opened at one replica.
type directStream struct {
	st     wire.Stream
	cancel context.CancelFunc
	addr   string
}

func (s *directStream) Send(m *grpcapi.ToServer) error     { return s.st.Send(m) }
func (s *directStream) Recv() (*grpcapi.FromServer, error) { return s.st.Recv() }
func (s *directStream) Close()                             { s.cancel() }
func (s *directStream) Addr() string                       { return s.addr }

// ReplicaID is the address of the replica the client talks to: it
// stays there whoever leads.
func (s *directStream) ReplicaID() string { return s.addr }
