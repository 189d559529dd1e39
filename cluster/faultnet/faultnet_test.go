package faultnet

import (
	"errors"
	"io"
	"net"
	"sync"
	"testing"
	"time"

	"github.com/hashicorp/memberlist"
	"github.com/hashicorp/raft"
)

func TestConnected(t *testing.T) {
	tests := []struct {
		name  string
		setup func(n *Network)
		pairs map[[2]string]bool
	}{
		{"all up", func(*Network) {}, map[[2]string]bool{{"a", "b"}: true, {"a", ""}: true}},
		{"partition", func(n *Network) { n.Partition([]string{"a"}, []string{"b", "c"}) },
			map[[2]string]bool{{"a", "b"}: false, {"b", "a"}: false, {"b", "c"}: true, {"a", "d"}: true, {"d", "b"}: true}},
		{"isolate", func(n *Network) { n.Isolate("a") },
			map[[2]string]bool{{"a", "b"}: false, {"c", "a"}: false, {"a", ""}: false, {"b", "c"}: true, {"a", "a"}: true}},
		{"single cut", func(n *Network) { n.Cut("a", "b") },
			map[[2]string]bool{{"b", "a"}: false, {"a", "c"}: true}},
		{"healed", func(n *Network) { n.Isolate("a"); n.Partition([]string{"a"}, []string{"b"}); n.Cut("b", "c"); n.Heal() },
			map[[2]string]bool{{"a", "b"}: true, {"b", "c"}: true}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			n := New()
			tt.setup(n)
			for p, want := range tt.pairs {
				if got := n.Connected(p[0], p[1]); got != want {
					t.Fatalf("Connected(%q, %q) = %v, want %v", p[0], p[1], got, want)
				}
			}
		})
	}
}

// listener listens on loopback until the test ends.
func listener(t *testing.T) net.Listener {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ln.Close() })
	return ln
}

func acceptEcho(layer raft.StreamLayer) {
	go func() {
		for {
			c, err := layer.Accept()
			if err != nil {
				return
			}
			go func() { _, _ = io.Copy(c, c); c.Close() }()
		}
	}()
}

// Raft dials across a cut are refused, live connections on a cut link are
// closed, and healing lets dials through again.
func TestStreamLayer_CutRefusesAndCloses(t *testing.T) {
	n := New()
	lnA, lnB := listener(t), listener(t)
	a := n.StreamLayer("a", lnA)
	b := n.StreamLayer("b", lnB)
	acceptEcho(b)
	if a.Addr().String() != lnA.Addr().String() {
		t.Fatalf("Addr = %v", a.Addr())
	}

	live, err := a.Dial(raft.ServerAddress(lnB.Addr().String()), time.Second)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := live.Write([]byte("x")); err != nil {
		t.Fatal(err)
	}
	buf := make([]byte, 1)
	if _, err := io.ReadFull(live, buf); err != nil {
		t.Fatal(err)
	}

	n.Partition([]string{"a"}, []string{"b"})
	if _, err := a.Dial(raft.ServerAddress(lnB.Addr().String()), time.Second); !errors.Is(err, ErrCut) {
		t.Fatalf("dial across the cut: %v, want ErrCut", err)
	}
	if _, err := b.Dial(raft.ServerAddress(lnA.Addr().String()), time.Second); !errors.Is(err, ErrCut) {
		t.Fatalf("dial back across the cut: %v, want ErrCut", err)
	}
	_ = live.SetReadDeadline(time.Now().Add(5 * time.Second))
	_, err = live.Read(buf)
	var ne net.Error
	if err == nil || (errors.As(err, &ne) && ne.Timeout()) {
		t.Fatalf("read on a cut connection: %v, want it closed", err)
	}

	n.Heal()
	c, err := a.Dial(raft.ServerAddress(lnB.Addr().String()), time.Second)
	if err != nil {
		t.Fatalf("dial after heal: %v", err)
	}
	c.Close()
}

// recorder is an inner memberlist transport that records what reaches it.
type recorder struct {
	addr  string
	mu    sync.Mutex
	wrote []string
	dials []string
}

func (r *recorder) FinalAdvertiseAddr(string, int) (net.IP, int, error) {
	host, port, _ := net.SplitHostPort(r.addr)
	p := 0
	for _, ch := range port {
		p = p*10 + int(ch-'0')
	}
	return net.ParseIP(host), p, nil
}

func (r *recorder) WriteTo(b []byte, addr string) (time.Time, error) {
	r.mu.Lock()
	r.wrote = append(r.wrote, addr)
	r.mu.Unlock()
	return time.Now(), nil
}

func (r *recorder) PacketCh() <-chan *memberlist.Packet { return nil }

func (r *recorder) DialTimeout(addr string, _ time.Duration) (net.Conn, error) {
	r.mu.Lock()
	r.dials = append(r.dials, addr)
	r.mu.Unlock()
	c1, c2 := net.Pipe()
	go func() { _, _ = io.Copy(io.Discard, c2) }()
	return c1, nil
}

func (r *recorder) StreamCh() <-chan net.Conn { return nil }
func (r *recorder) Shutdown() error           { return nil }

func (r *recorder) count() (int, int) {
	r.mu.Lock()
	defer r.mu.Unlock()
	return len(r.wrote), len(r.dials)
}

// Gossip packets across a cut are dropped silently, stream dials refused,
// by node name or by the address the peer registered.
func TestGossipTransport_DropsAndRefuses(t *testing.T) {
	n := New()
	ra, rb := &recorder{addr: "127.0.0.1:7001"}, &recorder{addr: "127.0.0.1:7002"}
	a := n.GossipTransport("a", ra).(memberlist.NodeAwareTransport)
	n.GossipTransport("b", rb)

	send := func() {
		if _, err := a.WriteTo([]byte("p"), "127.0.0.1:7002"); err != nil {
			t.Fatal(err)
		}
		if _, err := a.WriteToAddress([]byte("p"), memberlist.Address{Addr: "10.9.9.9:1", Name: "b"}); err != nil {
			t.Fatal(err)
		}
	}
	send()
	if w, _ := ra.count(); w != 2 {
		t.Fatalf("%d packets passed with the link up, want 2", w)
	}
	c, err := a.DialTimeout("127.0.0.1:7002", time.Second)
	if err != nil {
		t.Fatal(err)
	}

	n.Isolate("b")
	send()
	if w, _ := ra.count(); w != 2 {
		t.Fatalf("packets passed across the cut: %d", w)
	}
	if _, err := a.DialAddressTimeout(memberlist.Address{Addr: "127.0.0.1:7002", Name: "b"}, time.Second); !errors.Is(err, ErrCut) {
		t.Fatalf("dial across the cut: %v", err)
	}
	if _, err := c.Write([]byte("x")); err == nil {
		t.Fatal("stream dialed before the cut still writes")
	}
	if _, err := a.WriteTo([]byte("p"), "127.0.0.1:7003"); err != nil {
		t.Fatal(err)
	}
	if w, _ := ra.count(); w != 3 {
		t.Fatal("a packet to an unregistered address was dropped")
	}
}

// A frozen Freezer passes nothing and closes nothing; thawed, it passes
// again.
func TestFreezer_StopsBytesKeepsConnection(t *testing.T) {
	echo, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer echo.Close()
	go func() {
		for {
			c, err := echo.Accept()
			if err != nil {
				return
			}
			go func() { _, _ = io.Copy(c, c) }()
		}
	}()
	f, err := NewFreezer(echo.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	c, err := net.Dial("tcp", f.Addr())
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	roundTrip := func(msg string) error {
		if _, err := c.Write([]byte(msg)); err != nil {
			return err
		}
		_ = c.SetReadDeadline(time.Now().Add(300 * time.Millisecond))
		buf := make([]byte, len(msg))
		_, err := io.ReadFull(c, buf)
		return err
	}
	if err := roundTrip("ping"); err != nil {
		t.Fatalf("before freezing: %v", err)
	}
	f.Freeze()
	var ne net.Error
	if err := roundTrip("lost"); !errors.As(err, &ne) || !ne.Timeout() {
		t.Fatalf("frozen: %v, want a read timeout on an open connection", err)
	}
	f.Thaw()
	if err := roundTrip("pong"); err != nil {
		t.Fatalf("after thawing: %v", err)
	}
}
