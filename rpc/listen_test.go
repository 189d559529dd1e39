package rpc

import (
	"net"
	"testing"
	"time"

	"golang.org/x/sys/unix"
	"google.golang.org/grpc"

	"github.com/grapnel-io/grapnel/internal/connlimit"
	"github.com/grapnel-io/grapnel/internal/testwait"
)

// The limited listener's connections are not *net.TCPConn, on which
// alone gRPC sets TCP_USER_TIMEOUT: the listener sets it itself, so a
// replica still drops a peer that stopped acknowledging within
// ServerKeepalive.Timeout.
func TestServerListenerSetsTCPUserTimeout(t *testing.T) {
	raw, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	ln := ServerListener(raw, connlimit.Config{Limits: connlimit.Limits{Total: 4}})
	defer ln.Close()
	c, err := net.Dial("tcp", ln.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	sc, err := ln.Accept()
	if err != nil {
		t.Fatal(err)
	}
	defer sc.Close()
	tc, ok := sc.(*connlimit.Conn).NetConn().(*net.TCPConn)
	if !ok {
		t.Fatalf("the accepted socket is %T", sc.(*connlimit.Conn).NetConn())
	}
	raw2, err := tc.SyscallConn()
	if err != nil {
		t.Fatal(err)
	}
	var ms int
	var gerr error
	if err := raw2.Control(func(fd uintptr) {
		ms, gerr = unix.GetsockoptInt(int(fd), unix.IPPROTO_TCP, unix.TCP_USER_TIMEOUT)
	}); err != nil || gerr != nil {
		t.Fatal(err, gerr)
	}
	if want := int(ServerKeepalive.Timeout / time.Millisecond); ms != want {
		t.Fatalf("TCP_USER_TIMEOUT %d ms, want %d", ms, want)
	}
}

// Requirement (issue 27, hole 4): a connection that never sends the
// HTTP/2 preface is closed at the handshake deadline
// (DefaultHandshakeTimeout), not after gRPC's 120 s.
func TestIdleConnectionClosedAtTheHandshakeDeadline(t *testing.T) {
	raw, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	ln := ServerListener(raw, connlimit.Config{})
	g := grpc.NewServer(ServerOptions()...)
	go func() { _ = g.Serve(ln) }()
	defer g.Stop()
	c, err := net.Dial("tcp", ln.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	start := time.Now()
	read := make(chan error, 1)
	go func() {
		for {
			// The server speaks first (its SETTINGS); then it waits
			// for the preface that never comes.
			if _, err := c.Read(make([]byte, 256)); err != nil {
				read <- err
				return
			}
		}
	}()
	select {
	case <-read:
	case <-time.After(3 * DefaultHandshakeTimeout):
		t.Fatalf("an idle connection still open after %v (handshake deadline %v)", 3*DefaultHandshakeTimeout, DefaultHandshakeTimeout)
	}
	if d := time.Since(start); d < DefaultHandshakeTimeout/2 {
		t.Fatalf("closed after %v, before the deadline of %v", d, DefaultHandshakeTimeout)
	}
	testwait.For(t, 5*time.Second, func() bool { return ln.Open() == 0 }, "the closed connection uncounted")
}
