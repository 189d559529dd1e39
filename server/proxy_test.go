package server

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"

	"github.com/grapnel-io/grapnel/internal/errs"
	"github.com/grapnel-io/grapnel/internal/testwait"
	"github.com/grapnel-io/grapnel/rpc"
	"github.com/grapnel-io/grapnel/rpc/ankbase"
	"github.com/grapnel-io/grapnel/rpc/grpcapi"
	"github.com/grapnel-io/grapnel/rpc/wire"
	"github.com/grapnel-io/grapnel/state"
)

const proxyManifest = `
apiVersion: v1
workloads:
  web:
    runtime: podman
    agent: agent_A
    runtimeConfig: |
      image: web
`

type rawClient = grpc.BidiStreamingClient[grpcapi.ToServer, grpcapi.FromServer]

// rawStream opens an Ankaios stream of kind to addr with the outgoing
// metadata pairs md.
func rawStream(t *testing.T, addr string, kind wire.Kind, md ...string) rawClient {
	t.Helper()
	cc := dialRaw(t, addr)
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	if len(md) > 0 {
		ctx = metadata.AppendToOutgoingContext(ctx, md...)
	}
	st, err := kind.Open(ctx, cc)
	if err != nil {
		t.Fatal(err)
	}
	return st
}

func commanderHello(version string) *grpcapi.ToServer {
	return &grpcapi.ToServer{ToServerEnum: &grpcapi.ToServer_CommanderHello{CommanderHello: &grpcapi.CommanderHello{ProtocolVersion: version}}}
}

func agentHello(name, version string) *grpcapi.ToServer {
	return &grpcapi.ToServer{ToServerEnum: &grpcapi.ToServer_AgentHello{AgentHello: &grpcapi.AgentHello{AgentName: name, ProtocolVersion: version}}}
}

// streamEnd waits for the stream's end and returns its status error (nil
// for a clean end).
func streamEnd(t *testing.T, st rawClient, bound time.Duration) error {
	t.Helper()
	errc := make(chan error, 1)
	go func() {
		for {
			if _, err := st.Recv(); err != nil {
				errc <- err
				return
			}
		}
	}()
	select {
	case err := <-errc:
		if err.Error() == "EOF" {
			return nil
		}
		return err
	case <-time.After(bound):
		t.Fatalf("the stream did not end within %v", bound)
	}
	return nil
}

// An unmodified Ankaios client works against a follower: its streams are
// proxied to the leader, through one reused connection.
func TestFollowerProxiesAnkaiosStreams(t *testing.T) {
	rs := startReplicaSet(t, 3, 0)
	l, f := rs.leader(), rs.follower()

	t.Run("an update sent through a follower is committed", func(t *testing.T) {
		cli := f.testServer(t).cli()
		r := cli.update(manifest(t, proxyManifest), "desiredState.workloads.web")
		if r.GetUpdateStateSuccess() == nil {
			t.Fatalf("response %v", r)
		}
		for _, rep := range rs.running() {
			testwait.For(t, 10*time.Second, func() bool {
				ok := false
				rep.testServer(t).store(func(s *state.Store) { _, ok = s.Desired.Workloads["web"] })
				return ok
			}, "%s", "the workload on "+rep.id)
		}
		if got := cli.get("desiredState.workloads.web"); got.GetDesiredState().GetWorkloads().GetWorkloads()["web"] == nil {
			t.Fatalf("read through the follower: %v", got)
		}
	})
	t.Run("an agent connects through a follower", func(t *testing.T) {
		a := f.testServer(t).dial(wire.KindAgent)
		a.send(agentHello("agent_A", rpc.ProtocolVersion))
		hello := a.expect("ServerHello", func(m *grpcapi.FromServer) bool { return m.GetServerHello() != nil }).GetServerHello()
		if ws := hello.GetAddedWorkloads(); len(ws) != 1 || ws[0].GetInstanceName().GetWorkloadName() != "web" {
			t.Fatalf("ServerHello carries %v, want the workload web", ws)
		}
		testwait.For(t, 10*time.Second, func() bool {
			ok := false
			l.testServer(t).store(func(s *state.Store) { _, ok = s.Agents["agent_A"] })
			return ok
		}, "the agent on the leader")
	})
	t.Run("the leader's refusal reaches the client unchanged", func(t *testing.T) {
		direct := rawStream(t, l.addr, wire.KindAgent)
		if err := direct.Send(agentHello("agent_B", "0.1.0")); err != nil {
			t.Fatal(err)
		}
		want := status.Convert(streamEnd(t, direct, 5*time.Second))
		viaFollower := rawStream(t, f.addr, wire.KindAgent)
		if err := viaFollower.Send(agentHello("agent_B", "0.1.0")); err != nil {
			t.Fatal(err)
		}
		got := status.Convert(streamEnd(t, viaFollower, 5*time.Second))
		if got.Code() != codes.FailedPrecondition || got.Code() != want.Code() || got.Message() != want.Message() {
			t.Fatalf("through the follower: %v %q; from the leader: %v %q", got.Code(), got.Message(), want.Code(), want.Message())
		}
	})
	t.Run("one connection to the leader", func(t *testing.T) {
		if n := f.pool.Len(); n != 1 {
			t.Fatalf("the follower holds %d connections to the leader, want 1", n)
		}
	})
}

// A leader-aware client gets a NotLeaderError naming the leader's gRPC
// address (FailedPrecondition), and a stream a replica already forwarded is
// not forwarded again (Unavailable): neither is proxied.
func TestFollowerRedirectsInsteadOfProxying(t *testing.T) {
	rs := startReplicaSet(t, 3, 0)
	l, f := rs.leader(), rs.follower()
	tests := []struct {
		name   string
		md     []string
		code   codes.Code
		leader bool // the error names the leader for a redirect
	}{
		{"leader-aware client", []string{wire.LeaderAwareKey, "1"}, codes.FailedPrecondition, true},
		{"forwarded by a replica", []string{wire.ForwardedByKey, "rs-9"}, codes.Unavailable, false},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			st := rawStream(t, f.addr, wire.KindCLI, tc.md...)
			_ = st.Send(commanderHello(rpc.ProtocolVersion))
			err := streamEnd(t, st, 5*time.Second)
			if status.Code(err) != tc.code {
				t.Fatalf("code %v (%v), want %v", status.Code(err), err, tc.code)
			}
			var nl *errs.NotLeaderError
			got := rpc.FromStatus(err)
			if !errors.Is(got, errs.ErrNotLeader) {
				t.Fatalf("%v is no ErrNotLeader", got)
			}
			if isNL := errors.As(got, &nl); isNL != tc.leader {
				t.Fatalf("NotLeaderError: %v, want %v", isNL, tc.leader)
			}
			if tc.leader && (nl.LeaderID != l.id || nl.LeaderAddress != l.addr) {
				t.Fatalf("redirected to %s at %s, want %s at %s", nl.LeaderID, nl.LeaderAddress, l.id, l.addr)
			}
			if !strings.Contains(err.Error(), l.addr) {
				t.Errorf("%v does not name the leader's address", err)
			}
		})
	}
	if n := f.pool.Len(); n != 0 {
		t.Fatalf("the follower opened %d proxy connections", n)
	}
}

// When the proxying follower sees leadership move, the proxied stream
// ends with ErrLeaderChanged (Unavailable), so that the client reconnects
// as after a failover, even if the old leader's side stays open.
func TestProxiedStreamEndsWhenLeadershipMoves(t *testing.T) {
	rs := startReplicaSet(t, 3, 0)
	l, f := rs.leader(), rs.follower()
	st := rawStream(t, f.addr, wire.KindCLI)
	if err := st.Send(commanderHello(rpc.ProtocolVersion)); err != nil {
		t.Fatal(err)
	}
	// A request answered proves the stream reached the leader.
	if err := st.Send(&grpcapi.ToServer{ToServerEnum: &grpcapi.ToServer_Request{Request: &ankbase.Request{
		RequestId: "r1", RequestContent: &ankbase.Request_CompleteStateRequest{CompleteStateRequest: &ankbase.CompleteStateRequest{}}}}}); err != nil {
		t.Fatal(err)
	}
	if m, err := st.Recv(); err != nil || m.GetResponse().GetRequestId() != "r1" {
		t.Fatalf("first answer: %v, %v", m, err)
	}
	// The leader's Raft stops; its gRPC side, and so the proxied stream to
	// it, stays up. Only the follower's view of the leadership changes.
	_ = l.node.Shutdown()
	err := streamEnd(t, st, 15*time.Second)
	if status.Code(err) != codes.Unavailable || !errors.Is(rpc.FromStatus(err), errs.ErrLeaderChanged) {
		t.Fatalf("stream ended with %v, want Unavailable LEADER_CHANGED", err)
	}
	if !strings.Contains(err.Error(), l.id) {
		t.Errorf("%v does not name the former leader", err)
	}
}
