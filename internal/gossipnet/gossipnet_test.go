package gossipnet

import (
	"bytes"
	"io"
	"net"
	"runtime"
	"strconv"
	"testing"
	"time"

	"github.com/hashicorp/memberlist"
)

func listen(t *testing.T) *Transport {
	t.Helper()
	tr, err := Listen(Config{Host: "127.0.0.1"})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = tr.Shutdown() })
	return tr
}

func addr(tr *Transport) string { return net.JoinHostPort("127.0.0.1", strconv.Itoa(tr.Port())) }

func receive(t *testing.T, tr *Transport) *memberlist.Packet {
	t.Helper()
	select {
	case p := <-tr.PacketCh():
		return p
	case <-time.After(10 * time.Second):
		t.Fatal("no packet within 10 s")
		return nil
	}
}

// Each packet keeps its own bytes although the reader reuses one buffer,
// and carries its sender and the time it arrived.
func TestPacketsKeepTheirBytes(t *testing.T) {
	a, b := listen(t), listen(t)
	before := time.Now()
	for _, msg := range []string{"first packet, the longer one", "second"} {
		if _, err := a.WriteTo([]byte(msg), addr(b)); err != nil {
			t.Fatal(err)
		}
	}
	first, second := receive(t, b), receive(t, b)
	if string(first.Buf) != "first packet, the longer one" || string(second.Buf) != "second" {
		t.Fatalf("packets %q and %q", first.Buf, second.Buf)
	}
	if got := first.From.String(); got != addr(a) {
		t.Errorf("from %s, want %s", got, addr(a))
	}
	if first.Timestamp.Before(before) {
		t.Errorf("timestamp %v is before the send at %v", first.Timestamp, before)
	}
}

// A packet costs about its own length, not the 64 KiB NetTransport
// allocated for each.
func TestPacketsAllocateTheirLength(t *testing.T) {
	a, b := listen(t), listen(t)
	msg := bytes.Repeat([]byte("x"), 200)
	const n = 200
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	for range n {
		if _, err := a.WriteTo(msg, addr(b)); err != nil {
			t.Fatal(err)
		}
		if p := receive(t, b); len(p.Buf) != len(msg) {
			t.Fatalf("packet of %d bytes, want %d", len(p.Buf), len(msg))
		}
	}
	runtime.ReadMemStats(&after)
	perPacket := (after.TotalAlloc - before.TotalAlloc) / n
	t.Logf("%d bytes allocated per packet (sent and received)", perPacket)
	if perPacket > 8<<10 {
		t.Fatalf("%d bytes allocated per packet of %d, want a few hundred", perPacket, len(msg))
	}
}

func TestStreams(t *testing.T) {
	a, b := listen(t), listen(t)
	c, err := a.DialAddressTimeout(memberlist.Address{Addr: addr(b)}, 5*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	var s net.Conn
	select {
	case s = <-b.StreamCh():
	case <-time.After(10 * time.Second):
		t.Fatal("no stream within 10 s")
	}
	defer s.Close()
	if _, err := c.Write([]byte("push-pull")); err != nil {
		t.Fatal(err)
	}
	c.Close()
	got, err := io.ReadAll(s)
	if err != nil || string(got) != "push-pull" {
		t.Fatalf("read %q, %v", got, err)
	}
}

// Shutdown returns while a packet waits for a reader that never comes
// (memberlist stops reading before it shuts its transport down).
func TestShutdownWithAPacketWaiting(t *testing.T) {
	a := listen(t)
	b, err := Listen(Config{Host: "127.0.0.1"})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := a.WriteTo([]byte("unread"), addr(b)); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- b.Shutdown() }()
	select {
	case err := <-done:
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("Shutdown blocked")
	}
	if err := b.Shutdown(); err != nil {
		t.Fatalf("second Shutdown: %v", err)
	}
}

func TestAdvertiseAddr(t *testing.T) {
	tr := listen(t)
	ip, port, err := tr.FinalAdvertiseAddr("", 0)
	if err != nil || !ip.Equal(net.ParseIP("127.0.0.1")) || port != tr.Port() {
		t.Fatalf("advertise %v:%d (%v), want 127.0.0.1:%d", ip, port, err, tr.Port())
	}
	ip, port, err = tr.FinalAdvertiseAddr("10.1.2.3", 7946)
	if err != nil || !ip.Equal(net.ParseIP("10.1.2.3")) || port != 7946 {
		t.Fatalf("advertise %v:%d (%v), want the given 10.1.2.3:7946", ip, port, err)
	}
	if _, _, err := tr.FinalAdvertiseAddr("not-an-ip", 7946); err == nil {
		t.Fatal("advertise address not-an-ip accepted")
	}
}

func TestListenRejectsWhatCannotBeBound(t *testing.T) {
	a := listen(t)
	if _, err := Listen(Config{Host: "127.0.0.1", Port: a.Port()}); err == nil {
		t.Fatal("a second transport on a port in use")
	}
	if _, err := Listen(Config{Host: "no-such-host.invalid"}); err == nil {
		t.Fatal("an address that does not resolve")
	}
	tr, err := Listen(Config{Host: "localhost"})
	if err != nil {
		t.Fatalf("a name that resolves: %v", err)
	}
	defer tr.Shutdown()
	if ip := tr.tcp.Addr().(*net.TCPAddr).IP; !ip.IsLoopback() {
		t.Fatalf("localhost bound %v, want a loopback address", ip)
	}
}
