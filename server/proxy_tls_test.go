package server

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"

	"github.com/grapnel-io/grapnel/internal/errs"
	"github.com/grapnel-io/grapnel/rpc"
	"github.com/grapnel-io/grapnel/rpc/ankbase"
	"github.com/grapnel-io/grapnel/rpc/grpcapi"
	"github.com/grapnel-io/grapnel/rpc/rpctest"
	"github.com/grapnel-io/grapnel/rpc/wire"
	"github.com/grapnel-io/grapnel/state"
)

// addWorkloadRequest is an UpdateState that adds one workload.
func addWorkloadRequest(name string) *ankbase.Request {
	p := func(s string) *string { return &s }
	return &ankbase.Request{RequestId: "r1", RequestContent: &ankbase.Request_UpdateStateRequest{UpdateStateRequest: &ankbase.UpdateStateRequest{
		NewState: &ankbase.CompleteState{DesiredState: &ankbase.State{ApiVersion: "v1", Workloads: &ankbase.WorkloadMap{
			Workloads: map[string]*ankbase.Workload{name: {Agent: p("agent_A"), Runtime: p("podman"), RuntimeConfig: p("image: " + name)}},
		}}},
		UpdateMask: []string{"desiredState.workloads." + name},
	}}}
}

// tlsAgentStream opens an agent stream to addr over mutual TLS with the
// client files f and the outgoing metadata md, and sends the AgentHello.
func tlsAgentStream(t *testing.T, addr string, f rpc.TLSFiles, name string, md ...string) rawClient {
	t.Helper()
	cfg, err := rpc.ClientTLSConfig(f, rpc.ServerName)
	if err != nil {
		t.Fatal(err)
	}
	cc, err := grpc.NewClient(addr, grpc.WithTransportCredentials(credentials.NewTLS(cfg)))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cc.Close() })
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	if len(md) > 0 {
		ctx = metadata.AppendToOutgoingContext(ctx, md...)
	}
	st, err := grpcapi.NewAgentConnectionClient(cc).ConnectAgent(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if err := st.Send(agentHello(name, rpc.ProtocolVersion)); err != nil {
		t.Fatal(err)
	}
	return st
}

// Over mutual TLS the follower proxies with its replica certificate and
// forwards the agent's certificate names; the leader checks the agent name
// against those, and believes forwarded names from replicas only.
func TestProxyForwardsCertificateNames(t *testing.T) {
	ca := rpctest.NewCA(t)
	replicaFiles := ca.Issue(t, "replica", rpc.ServerName)
	agentA := ca.Issue(t, "agent-a", "agent_A")

	rs := newReplicaSet(t, 3, 0)
	rs.tls = &replicaFiles
	for _, r := range rs.reps {
		r.start()
	}
	l, f := rs.leader(), rs.follower()

	t.Run("the agent named in its certificate, through a follower", func(t *testing.T) {
		st := tlsAgentStream(t, f.addr, agentA, "agent_A")
		m, err := st.Recv()
		if err != nil || m.GetServerHello() == nil {
			t.Fatalf("got %v, %v; want the ServerHello", m, err)
		}
		if f.pool.Len() != 1 {
			t.Fatal("the stream was not proxied")
		}
	})
	t.Run("another agent name, through a follower", func(t *testing.T) {
		err := streamEnd(t, tlsAgentStream(t, f.addr, agentA, "agent_B"), 10*time.Second)
		if status.Code(err) != codes.Unauthenticated || !strings.Contains(err.Error(), "agent_B") {
			t.Fatalf("err = %v, want Unauthenticated about agent_B", err)
		}
	})
	t.Run("the history names a CLI by its certificate, through a follower", func(t *testing.T) {
		cfg, err := rpc.ClientTLSConfig(ca.Issue(t, "operator", "operator-1"), rpc.ServerName)
		if err != nil {
			t.Fatal(err)
		}
		cc, err := grpc.NewClient(f.addr, grpc.WithTransportCredentials(credentials.NewTLS(cfg)))
		if err != nil {
			t.Fatal(err)
		}
		defer cc.Close()
		ctx, cancel := context.WithCancel(context.Background())
		defer cancel()
		st, err := wire.KindCLI.Open(ctx, cc)
		if err != nil {
			t.Fatal(err)
		}
		if err := st.Send(&grpcapi.ToServer{ToServerEnum: &grpcapi.ToServer_CommanderHello{CommanderHello: &grpcapi.CommanderHello{ProtocolVersion: rpc.ProtocolVersion}}}); err != nil {
			t.Fatal(err)
		}
		if err := st.Send(&grpcapi.ToServer{ToServerEnum: &grpcapi.ToServer_Request{Request: addWorkloadRequest("by-operator")}}); err != nil {
			t.Fatal(err)
		}
		if m, err := st.Recv(); err != nil || m.GetResponse().GetUpdateStateSuccess() == nil {
			t.Fatalf("update: %v %v", m, err)
		}
		var who string
		l.fsm.Read(func(s *state.Store, _ uint64) {
			for _, tx := range s.History.Txs {
				if tx.Touches("by-operator") {
					who = tx.Requester
				}
			}
		})
		if !strings.HasPrefix(who, "operator-1/cli-conn-") {
			t.Fatalf("requester %q, want operator-1/cli-conn-…", who)
		}
	})
	t.Run("forwarded names forged by an agent", func(t *testing.T) {
		st := tlsAgentStream(t, l.addr, agentA, "agent_B", wire.ForwardedByKey, f.id, wire.ForwardedNamesKey, "agent_B")
		err := streamEnd(t, st, 10*time.Second)
		if status.Code(err) != codes.Unauthenticated || !errors.Is(rpc.FromStatus(err), errs.ErrUnauthenticated) ||
			!strings.Contains(err.Error(), wire.ForwardedNamesKey) {
			t.Fatalf("err = %v, want Unauthenticated about %s", err, wire.ForwardedNamesKey)
		}
	})
}
