package cluster

import (
	"errors"
	"net"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/hashicorp/go-hclog"
	"github.com/hashicorp/raft"
)

// stuckPipeline's AppendEntries parks until the pipeline is closed, as
// hashicorp/raft's does in its pipeline deadlock.
type stuckPipeline struct{ closed chan struct{} }

func (p *stuckPipeline) AppendEntries(*raft.AppendEntriesRequest, *raft.AppendEntriesResponse) (raft.AppendFuture, error) {
	<-p.closed
	return nil, raft.ErrPipelineShutdown
}
func (p *stuckPipeline) Consumer() <-chan raft.AppendFuture { return nil }
func (p *stuckPipeline) Close() error {
	select {
	case <-p.closed:
	default:
		close(p.closed)
	}
	return nil
}

// A pipelined send that parks is failed by closing the pipeline after the
// stall limit, so replication falls back instead of hanging.
func TestWatchedPipeline_UnparksAStuckSend(t *testing.T) {
	inner := &stuckPipeline{closed: make(chan struct{})}
	p := &watchedPipeline{AppendPipeline: inner, limit: 50 * time.Millisecond}
	done := make(chan error, 1)
	start := time.Now()
	go func() {
		_, err := p.AppendEntries(&raft.AppendEntriesRequest{}, &raft.AppendEntriesResponse{})
		done <- err
	}()
	select {
	case err := <-done:
		if !errors.Is(err, raft.ErrPipelineShutdown) {
			t.Fatalf("err = %v, want ErrPipelineShutdown", err)
		}
		if time.Since(start) < 50*time.Millisecond {
			t.Fatal("pipeline closed before the stall limit")
		}
	case <-time.After(10 * time.Second):
		t.Fatal("stuck send was never released")
	}
}

// The contact tracker keeps the latest answer per peer, on the injected
// clock.
func TestContactTracker(t *testing.T) {
	now := t0
	c := newContactTracker(func() time.Time { return now })
	c.record("b", 3, 10)
	now = now.Add(time.Second)
	c.record("b", 4, 12)
	got, ok := c.get("b")
	if !ok || got.Term != 4 || got.LastLog != 12 || !got.At.Equal(t0.Add(time.Second)) {
		t.Fatalf("contact = %+v, %v", got, ok)
	}
	if _, ok := c.get("x"); ok {
		t.Fatal("contact for a peer that never answered")
	}
}

// countingLayer is the plain TCP stream layer that counts its dials and
// tells of every accepted connection closed.
type countingLayer struct {
	*tcpStreamLayer
	dials  atomic.Int32
	closed chan struct{}
}

func (l *countingLayer) Dial(address raft.ServerAddress, timeout time.Duration) (net.Conn, error) {
	l.dials.Add(1)
	return l.tcpStreamLayer.Dial(address, timeout)
}

func (l *countingLayer) Accept() (net.Conn, error) {
	c, err := l.tcpStreamLayer.Accept()
	if err != nil {
		return nil, err
	}
	return &closeSignalConn{Conn: c, closed: l.closed}, nil
}

type closeSignalConn struct {
	net.Conn
	closed chan struct{}
	once   sync.Once
}

func (c *closeSignalConn) Close() error {
	c.once.Do(func() { c.closed <- struct{}{} })
	return c.Conn.Close()
}

func countingTransport(t *testing.T) (*raft.NetworkTransport, *closingLayer, *countingLayer) {
	t.Helper()
	var cl *countingLayer
	rn, err := newRaftTransport(Config{RaftAddress: "127.0.0.1:0",
		RaftStreamLayer: func(ln net.Listener, adv net.Addr) raft.StreamLayer {
			cl = &countingLayer{tcpStreamLayer: &tcpStreamLayer{ln: ln, advertise: adv}, closed: make(chan struct{}, 8)}
			return cl
		}}, hclog.NewNullLogger())
	if err != nil {
		t.Fatal(err)
	}
	nt, layer := rn.nt, rn.layer
	t.Cleanup(func() { nt.Close(); nt.CloseStreams(); layer.Close(); layer.wait() })
	return nt, layer, cl
}

// The transport keeps one idle connection per peer: a second RPC under
// way at the same time gets a connection of its own, which is closed
// afterwards (and with it the peer's goroutine and buffer for it), and
// the next RPC reuses the one that was kept.
func TestRaftTransportPoolsOneConnectionPerPeer(t *testing.T) {
	a, aLayer, aCount := countingTransport(t)
	b, _, bCount := countingTransport(t)
	target := b.LocalAddr()
	vote := func() chan error {
		done := make(chan error, 1)
		go func() {
			done <- a.RequestVote("b", target, &raft.RequestVoteRequest{Term: 1}, &raft.RequestVoteResponse{})
		}()
		return done
	}
	timeout := time.After(time.Minute)
	next := func() raft.RPC {
		t.Helper()
		select {
		case rpc := <-b.Consumer():
			return rpc
		case <-timeout:
			t.Fatal("no RPC arrived")
		}
		return raft.RPC{}
	}
	wait := func(done chan error) {
		t.Helper()
		select {
		case err := <-done:
			if err != nil {
				t.Fatal(err)
			}
		case <-timeout:
			t.Fatal("RPC did not return")
		}
	}

	// Two votes at once: b holds the first until the second arrives,
	// which it can only on a second connection.
	first, second := vote(), vote()
	r1, r2 := next(), next()
	r1.Respond(&raft.RequestVoteResponse{Term: 1}, nil)
	r2.Respond(&raft.RequestVoteResponse{Term: 1}, nil)
	wait(first)
	wait(second)
	if n := aCount.dials.Load(); n != 2 {
		t.Fatalf("%d dials for two RPCs at once, want 2", n)
	}
	aLayer.mu.Lock()
	kept := len(aLayer.dialed)
	aLayer.mu.Unlock()
	if kept != 1 {
		t.Fatalf("%d connections kept after the RPCs, want 1", kept)
	}
	// b's end of the connection that was not kept closes.
	select {
	case <-bCount.closed:
	case <-timeout:
		t.Fatal("the peer kept serving the connection that was not pooled")
	}

	// The next RPC goes over the kept connection.
	third := vote()
	r3 := next()
	r3.Respond(&raft.RequestVoteResponse{Term: 1}, nil)
	wait(third)
	if n := aCount.dials.Load(); n != 2 {
		t.Fatalf("%d dials after a third RPC, want the pooled connection reused", n)
	}
}
