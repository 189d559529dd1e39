package cluster

import (
	"errors"
	"fmt"
	"io"
	"net"
	"sync/atomic"
	"syscall"
	"testing"

	"github.com/hashicorp/go-hclog"
	"github.com/hashicorp/raft"

	"github.com/grapnel-io/grapnel/internal/clock"
)

// The successor is the next voter after the dead leader in id order,
// wrapping around, whatever the order of the configuration; non-voters
// never stand.
func TestSuccessor(t *testing.T) {
	cfg := raft.Configuration{Servers: []raft.Server{
		{ID: "c", Suffrage: raft.Voter}, {ID: "a", Suffrage: raft.Nonvoter},
		{ID: "d", Suffrage: raft.Voter}, {ID: "b", Suffrage: raft.Voter},
	}}
	for leader, want := range map[raft.ServerID]raft.ServerID{"b": "c", "c": "d", "d": "b", "a": "b"} {
		if got := successor(cfg, leader); got != want {
			t.Errorf("leader %s: successor %q, want %q", leader, got, want)
		}
	}
	solo := raft.Configuration{Servers: []raft.Server{{ID: "a", Suffrage: raft.Voter}}}
	if got := successor(solo, "a"); got != "" {
		t.Errorf("no other voter: successor %q", got)
	}
}

// Only the far side's end of a connection counts, not this side's close.
func TestPeerClosed(t *testing.T) {
	for err, want := range map[error]bool{
		io.EOF: true, io.ErrUnexpectedEOF: true, fmt.Errorf("read: %w", syscall.ECONNRESET): true,
		errors.New("use of closed network connection"): false, syscall.ETIMEDOUT: false,
	} {
		if got := peerClosed(err); got != want {
			t.Errorf("peerClosed(%v) = %v, want %v", err, got, want)
		}
	}
}

// The insecure probe tells the three leaders apart: a replica that runs
// answers (its acceptedConn answers the probe byte, and the connection
// ends with no sign of a peer gone), a port that takes the connection
// but whose process never reads is frozen, a closed port is gone.
func TestProbeLeader(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	n := &Node{cfg: Config{Clock: clock.Real()}, fast: newFastFailover(false, clock.Real()), logger: hclog.NewNullLogger(),
		layer: newClosingLayer(&tcpStreamLayer{ln: ln, advertise: ln.Addr()})}
	var ended atomic.Int32
	f := func(string) { ended.Add(1) }
	n.layer.ended.Store(&f)
	served := make(chan error, 1)
	go func() {
		c, err := n.layer.Accept()
		if err != nil {
			served <- err
			return
		}
		defer c.Close()
		var b [1]byte
		_, err = c.Read(b[:])
		served <- err
	}()
	addr := raft.ServerAddress(ln.Addr().String())
	if got := n.probeLeader(addr); got != leaderAnswers {
		t.Fatalf("a running replica: %v, want leaderAnswers", got)
	}
	if err := <-served; !errors.Is(err, io.EOF) || ended.Load() != 0 {
		t.Fatalf("the replica's transport read %v and ended was told %d times: want io.EOF, none", err, ended.Load())
	}

	// Nobody accepts: the kernel takes the connection into the backlog
	// and nothing answers, as with a stopped process.
	if got := n.probeLeader(addr); got != leaderFrozen {
		t.Fatalf("a port whose process never reads: %v, want leaderFrozen", got)
	}
	ln.Close()
	if got := n.probeLeader(addr); got != leaderGone {
		t.Fatalf("a closed port: %v, want leaderGone", got)
	}
	if s := n.FastFailover(); s.Probes != 3 || s.Frozen != 1 || s.Refused != 1 {
		t.Fatalf("counters %+v", s)
	}
}
