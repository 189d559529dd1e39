package server

import (
	"context"
	"errors"
	"io"
	"net"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/grapnel-io/grapnel/rpc"
	"github.com/grapnel-io/grapnel/rpc/ankbase"
	"github.com/grapnel-io/grapnel/rpc/client"
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
	s, err := r.Open(context.Background(), client.KindAgent)
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
	c, err := client.Dial(context.Background(), client.Options{Addrs: []string{fz.addr}, Insecure: true})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if c.Addr() != fz.addr {
		t.Fatalf("connected to %s, want %s", c.Addr(), fz.addr)
	}
	completeState(t, c)
	fz.frozen.Store(true)
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

// tcpFreezer forwards TCP to a target and can stop passing bytes without
// closing anything, as a hung peer looks from outside.
type tcpFreezer struct {
	addr   string
	lis    net.Listener
	frozen atomic.Bool

	mu    sync.Mutex // guards conns
	conns []net.Conn
}

func newTCPFreezer(t *testing.T, target string) *tcpFreezer {
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	f := &tcpFreezer{addr: lis.Addr().String(), lis: lis}
	go func() {
		for {
			in, err := lis.Accept()
			if err != nil {
				return
			}
			out, err := net.Dial("tcp", target)
			if err != nil {
				in.Close()
				continue
			}
			f.mu.Lock()
			f.conns = append(f.conns, in, out)
			f.mu.Unlock()
			go f.pipe(out, in)
			go f.pipe(in, out)
		}
	}()
	t.Cleanup(func() {
		lis.Close()
		f.mu.Lock()
		defer f.mu.Unlock()
		for _, c := range f.conns {
			c.Close()
		}
	})
	return f
}

func (f *tcpFreezer) pipe(dst, src net.Conn) {
	buf := make([]byte, 32<<10)
	for {
		n, err := src.Read(buf)
		if n > 0 && !f.frozen.Load() {
			if _, werr := dst.Write(buf[:n]); werr != nil {
				return
			}
		}
		if err != nil {
			if !errors.Is(err, io.EOF) {
				dst.Close()
			}
			return
		}
	}
}
