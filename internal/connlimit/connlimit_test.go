package connlimit_test

import (
	"log/slog"
	"net"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/grapnel-io/grapnel/internal/clock"
	"github.com/grapnel-io/grapnel/internal/connlimit"
	"github.com/grapnel-io/grapnel/internal/syncbuf"
	"github.com/grapnel-io/grapnel/internal/testwait"
)

// server is a wrapped loopback listener whose accepted connections go to
// a channel, in order.
type server struct {
	l        *connlimit.Listener
	accepted chan net.Conn
	done     chan struct{}
}

func serve(t testing.TB, cfg connlimit.Config) *server {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	s := &server{l: connlimit.Wrap(ln, cfg), accepted: make(chan net.Conn, 1024), done: make(chan struct{})}
	go func() {
		defer close(s.done)
		for {
			c, err := s.l.Accept()
			if err != nil {
				return
			}
			s.accepted <- c
		}
	}()
	t.Cleanup(func() {
		s.l.Close()
		<-s.done
		close(s.accepted)
		for c := range s.accepted {
			c.Close()
		}
	})
	return s
}

// dialFrom connects to the server from the loopback address src
// (127.0.0.0/8 is all local on Linux).
func (s *server) dialFrom(t testing.TB, src string) net.Conn {
	t.Helper()
	d := net.Dialer{LocalAddr: &net.TCPAddr{IP: net.ParseIP(src)}, Timeout: 5 * time.Second}
	c, err := d.Dial("tcp", s.l.Addr().String())
	if err != nil {
		t.Skipf("cannot dial from %s: %v", src, err)
	}
	t.Cleanup(func() { c.Close() })
	return c
}

// outcome waits until the server either hands out c (accepted, returned
// as the server's side) or closes it unread (refused: c reads EOF or a
// reset). Connections are dialled one at a time, so the next accepted
// one must be c.
func (s *server) outcome(t testing.TB, c net.Conn) (net.Conn, bool) {
	t.Helper()
	read := make(chan error, 1)
	go func() {
		_, err := c.Read(make([]byte, 1))
		read <- err
	}()
	select {
	case sc := <-s.accepted:
		if sc.RemoteAddr().String() != c.LocalAddr().String() {
			t.Fatalf("accepted %s, dialled %s", sc.RemoteAddr(), c.LocalAddr())
		}
		return sc, true
	case err := <-read:
		if err == nil {
			t.Fatalf("the server wrote to %s", c.LocalAddr())
		}
		return nil, false
	case <-time.After(10 * time.Second):
		t.Fatalf("%s neither accepted nor closed in 10s", c.LocalAddr())
		return nil, false
	}
}

func (s *server) expect(t testing.TB, src string, accepted bool) net.Conn {
	t.Helper()
	sc, ok := s.outcome(t, s.dialFrom(t, src))
	if ok != accepted {
		t.Fatalf("a connection from %s: accepted=%v, want %v (open %d)", src, ok, accepted, s.l.Open())
	}
	return sc
}

// Requirement (issue 27, hole 4): a connection over the per-source cap or
// the total cap is closed at accept, other sources are still served, and
// a closed connection frees its place.
func TestCapsPerSourceAndTotal(t *testing.T) {
	s := serve(t, connlimit.Config{Name: "test", Limits: connlimit.Limits{PerSource: 2, Total: 3}})
	a1 := s.expect(t, "127.0.0.1", true)
	s.expect(t, "127.0.0.1", true)
	s.expect(t, "127.0.0.1", false) // over 2 from this source
	s.expect(t, "127.0.0.2", true)  // another source is served
	s.expect(t, "127.0.0.3", false) // over 3 in all
	if got, from1 := s.l.Open(), s.l.OpenFrom("127.0.0.1"); got != 3 || from1 != 2 {
		t.Fatalf("open %d, %d from 127.0.0.1; want 3 and 2", got, from1)
	}
	if a, b := s.l.Refused(connlimit.OverSource), s.l.Refused(connlimit.OverTotal); a != 1 || b != 1 {
		t.Fatalf("refused per source %d, total %d; want 1 and 1", a, b)
	}
	a1.Close()
	s.expect(t, "127.0.0.3", true) // the place a1 held
	s.expect(t, "127.0.0.1", false)
}

// Requirement: a connection closed twice (gRPC and net/http both may)
// frees one place, not two: the caps hold after double closes.
func TestDoubleCloseFreesOnePlace(t *testing.T) {
	s := serve(t, connlimit.Config{Limits: connlimit.Limits{PerSource: 2, Total: 2}})
	a := s.expect(t, "127.0.0.1", true)
	s.expect(t, "127.0.0.1", true)
	var wg sync.WaitGroup
	for range 4 {
		wg.Go(func() { a.Close() })
	}
	wg.Wait()
	if got := s.l.Open(); got != 1 {
		t.Fatalf("open %d after closing one connection four times, want 1", got)
	}
	s.expect(t, "127.0.0.1", true)
	s.expect(t, "127.0.0.1", false)
}

// A flood far over the caps: the server never holds more than the cap,
// and every connection over it is closed without waiting for anything.
func TestFloodIsHeldToTheCap(t *testing.T) {
	const cap, flood = 8, 200
	s := serve(t, connlimit.Config{Limits: connlimit.Limits{PerSource: cap, Total: cap}})
	var clients []net.Conn
	for range flood {
		clients = append(clients, s.dialFrom(t, "127.0.0.1"))
	}
	ends := make(chan error, flood)
	for _, c := range clients {
		go func() {
			_, err := c.Read(make([]byte, 1))
			ends <- err
		}()
	}
	for range flood - cap {
		select {
		case err := <-ends:
			if err == nil {
				t.Fatal("the server wrote")
			}
		case <-time.After(20 * time.Second):
			t.Fatalf("connections over the cap still open after 20s: open %d, refused %d",
				s.l.Open(), s.l.Refused(connlimit.OverSource))
		}
	}
	if got := s.l.Open(); got != cap {
		t.Fatalf("open %d, want the cap %d", got, cap)
	}
	if got := len(s.accepted); got != cap {
		t.Fatalf("accepted %d, want %d", got, cap)
	}
	if got := s.l.Refused(connlimit.OverSource); got != flood-cap {
		t.Fatalf("refused %d, want %d", got, flood-cap)
	}
}

// Refusals are logged at most once per LogWindow, the next line with the
// count of those left out.
func TestRefusalsAreLoggedRateLimited(t *testing.T) {
	var buf syncbuf.Buffer
	clk := clock.NewFake(time.Unix(1000, 0))
	s := serve(t, connlimit.Config{Name: "grpc", Limits: connlimit.Limits{Total: 1}, Clock: clk,
		Logger: slog.New(slog.NewTextHandler(&buf, nil))})
	s.expect(t, "127.0.0.1", true)
	for range 3 {
		s.expect(t, "127.0.0.1", false)
	}
	clk.Advance(connlimit.LogWindow)
	s.expect(t, "127.0.0.1", false)
	testwait.For(t, 5*time.Second, func() bool { return strings.Count(buf.String(), "connection refused") == 2 },
		"two log lines, got:\n%s", testwait.Lazy(buf.String))
	lines := strings.Split(strings.TrimSpace(buf.String()), "\n")
	if !strings.Contains(lines[0], "listener=grpc") || !strings.Contains(lines[0], "cap=total") || !strings.Contains(lines[0], "suppressed=0") {
		t.Fatalf("first line %q", lines[0])
	}
	if !strings.Contains(lines[1], "suppressed=2") {
		t.Fatalf("second line %q, want suppressed=2", lines[1])
	}
}

func TestSource(t *testing.T) {
	for _, c := range []struct {
		addr net.Addr
		want string
	}{
		{&net.TCPAddr{IP: net.ParseIP("10.0.0.1"), Port: 5}, "10.0.0.1"},
		{&net.TCPAddr{IP: net.ParseIP("::ffff:10.0.0.1"), Port: 5}, "10.0.0.1"},
		{&net.TCPAddr{IP: net.ParseIP("fe80::1"), Port: 5, Zone: "eth0"}, "fe80::1"},
		{&net.UnixAddr{Name: "/run/x.sock", Net: "unix"}, ""},
		{nil, ""},
	} {
		if got := connlimit.Source(c.addr); got != c.want {
			t.Errorf("Source(%v) = %q, want %q", c.addr, got, c.want)
		}
	}
}

// The wrapped socket stays reachable, so that what gRPC would set on a
// *net.TCPConn (TCP_USER_TIMEOUT) can still be set.
func TestNetConnIsTheSocket(t *testing.T) {
	s := serve(t, connlimit.Config{})
	sc := s.expect(t, "127.0.0.1", true)
	if _, ok := sc.(*connlimit.Conn).NetConn().(*net.TCPConn); !ok {
		t.Fatalf("NetConn is %T", sc.(*connlimit.Conn).NetConn())
	}
}
