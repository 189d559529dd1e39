package server

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/grapnel-io/grapnel/cluster/faultnet"
	"github.com/grapnel-io/grapnel/rpc"
	"github.com/grapnel-io/grapnel/rpc/ankbase"
	"github.com/grapnel-io/grapnel/rpc/client"
	"github.com/grapnel-io/grapnel/rpc/wire"
)

func completeState(t *testing.T, c *client.Conn) *ankbase.CompleteState {
	t.Helper()
	resp, err := c.Request(context.Background(), &ankbase.Request{RequestContent: &ankbase.Request_CompleteStateRequest{
		CompleteStateRequest: &ankbase.CompleteStateRequest{}}})
	if err != nil {
		t.Fatal(err)
	}
	return resp.GetCompleteStateResponse().GetCompleteState()
}

// The leader-aware client, given a follower, ends up on the leader; when
// the leader dies its stream ends, and the next Dial through the same
// resolver reaches the new leader with the state intact.
func TestLeaderAwareClientFollowsTheLeader(t *testing.T) {
	rs := startReplicaSet(t, 3, 0)
	l, f := rs.leader(), rs.follower()
	r, err := client.NewResolver(client.Options{Addrs: []string{f.addr}, Insecure: true, ResponseTimeout: 10 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	c, err := r.Dial(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if c.Addr() != l.addr {
		t.Fatalf("connected to %s, want the leader %s", c.Addr(), l.addr)
	}
	if n := f.pool.Len(); n != 0 {
		t.Fatalf("the follower proxied a leader-aware client (%d connections)", n)
	}
	if r := f.testServer(t).cli().update(manifest(t, proxyManifest), "desiredState.workloads.web"); r.GetUpdateStateSuccess() == nil {
		t.Fatalf("update: %v", r)
	}

	l.stop()
	select {
	case <-c.Done():
	case <-time.After(10 * time.Second):
		t.Fatal("the stream outlived its leader")
	}
	if !errors.Is(c.Err(), client.ErrConnectionLost) {
		t.Fatalf("Err = %v", c.Err())
	}
	nl := rs.leader()
	c2, err := r.Dial(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	defer c2.Close()
	if c2.Addr() != nl.addr {
		t.Fatalf("reconnected to %s, want the new leader %s", c2.Addr(), nl.addr)
	}
	if completeState(t, c2).GetDesiredState().GetWorkloads().GetWorkloads()["web"] == nil {
		t.Fatal("the acknowledged update is lost")
	}
}

// The agent's way in: any stream kind opened through the resolver reaches
// the leader with the heartbeat attached.
func TestResolverOpensAnAgentStreamAtTheLeader(t *testing.T) {
	rs := startReplicaSet(t, 3, 0)
	l, f := rs.leader(), rs.follower()
	r, err := client.NewResolver(client.Options{Addrs: []string{f.addr}, Insecure: true})
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	s, err := r.Open(context.Background(), wire.KindAgent)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	if s.Addr() != l.addr || s.ReplicaID() != l.id {
		t.Fatalf("opened at %s (%s), want %s", s.Addr(), s.ReplicaID(), l.id)
	}
	if err := s.Send(agentHello("agent_R", rpc.ProtocolVersion)); err != nil {
		t.Fatal(err)
	}
	m, err := s.Recv()
	if err != nil || m.GetServerHello() == nil {
		t.Fatalf("first message %v, %v", m, err)
	}
}

// A leader that hangs with its TCP connections open is noticed by the
// heartbeat within the heartbeat timeout.
func TestHeartbeatNoticesAHungLeader(t *testing.T) {
	const timeout = time.Second // the default
	rs := startReplicaSet(t, 1, 0)
	l := rs.leader()
	fz := newTCPFreezer(t, l.addr)
	c, err := client.Dial(context.Background(), client.Options{Addrs: []string{fz.Addr()}, Insecure: true})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if c.Addr() != fz.Addr() {
		t.Fatalf("connected to %s, want %s", c.Addr(), fz.Addr())
	}
	completeState(t, c)
	fz.Freeze()
	start := time.Now()
	select {
	case <-c.Done():
	case <-time.After(5 * timeout):
		t.Fatal("the hung leader was not noticed")
	}
	if !errors.Is(c.Err(), client.ErrHeartbeatLost) {
		t.Fatalf("Err = %v, want ErrHeartbeatLost", c.Err())
	}
	t.Logf("noticed after %v", time.Since(start))
}

// newTCPFreezer puts a faultnet.Freezer in front of target for the test.
func newTCPFreezer(t *testing.T, target string) *faultnet.Freezer {
	t.Helper()
	f, err := faultnet.NewFreezer(target)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(f.Close)
	return f
}
