// Package gossipnet is memberlist's network transport: gossip packets over
// UDP and push-pull streams over TCP, both on one address, as
// memberlist.NetTransport carries them.
//
// It differs from NetTransport in one thing: a received packet is read
// into one buffer and copied into a slice of its own length. NetTransport
// hands memberlist a fresh 64 KiB buffer for every packet. An idle replica
// receives two or three probe packets a second, and those buffers were
// most of what it allocated (about 130 of its 180–190 KiB a second):
// each one may come from pages the runtime had given back to the kernel,
// 16 page faults, and together they set the pace of the idle garbage
// collector. A gossip packet is at most a few KiB (memberlist's UDP
// buffer size, 1,400 bytes by default).
package gossipnet

import (
	"errors"
	"fmt"
	"io"
	"log"
	"net"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	metrics "github.com/hashicorp/go-metrics/compat"
	"github.com/hashicorp/go-sockaddr"
	"github.com/hashicorp/memberlist"

	"github.com/grapnel-io/grapnel/internal/clock"
)

const (
	// maxPacket is the largest UDP datagram; a longer one is cut by the
	// kernel, as it would be with NetTransport's buffer of this size.
	maxPacket = 65536
	// udpReadBuffer is the socket receive buffer asked for, so that a
	// burst of gossip is not dropped while the reader is scheduled out;
	// the kernel caps it at net.core.rmem_max.
	udpReadBuffer = 2 << 20
	// bindTries is how often Listen tries a new ephemeral port when the
	// TCP port it got is taken for UDP (port 0 only).
	bindTries = 10
	// acceptBackoffMax bounds the pause after a failed Accept.
	acceptBackoffMax = time.Second
)

// wall stamps packets: memberlist compares the stamps with its own
// time.Now, so they come from the system clock, not an injected one.
var wall = clock.Real()

// Transport implements memberlist.NodeAwareTransport.
type Transport struct {
	tcp    *net.TCPListener
	udp    *net.UDPConn
	log    *log.Logger
	labels []metrics.Label
	clk    clock.Clock

	packets chan *memberlist.Packet
	streams chan net.Conn

	closed atomic.Bool
	done   chan struct{} // closed by Shutdown: a loop stops waiting for memberlist
	wg     sync.WaitGroup
}

var _ memberlist.NodeAwareTransport = (*Transport)(nil)

// Config says where a Transport listens and what it reports with.
type Config struct {
	// Host is an IP address or a name that resolves to one (NetTransport
	// bound every address for a name); "" is every IPv4 address.
	Host string
	// Port is the TCP and UDP port; 0 is one free port for both.
	Port int
	// Logger takes memberlist-style lines ("[ERR] ..."); nil discards.
	Logger *log.Logger
	// Labels go with the memberlist.udp.received counter, as
	// NetTransportConfig.MetricLabels do.
	Labels []metrics.Label
	// Clock paces the retries of a failed accept; nil is the system
	// clock. Packets are stamped by the system clock whatever it is:
	// memberlist measures round trips against its own time.Now.
	Clock clock.Clock
}

// Listen binds TCP and UDP as cfg says and starts reading both.
func Listen(cfg Config) (*Transport, error) {
	if cfg.Clock == nil {
		cfg.Clock = clock.Real()
	}
	if cfg.Logger == nil {
		cfg.Logger = log.New(io.Discard, "", 0)
	}
	host := cfg.Host
	ip := net.ParseIP(host)
	switch {
	case host == "":
		ip = net.IPv4zero
	case ip == nil:
		a, err := net.ResolveIPAddr("ip", host)
		if err != nil {
			return nil, fmt.Errorf("gossip: bind address %q: %w", host, err)
		}
		ip = a.IP
	}
	tries := 1
	if cfg.Port == 0 {
		tries = bindTries
	}
	var err error
	for range tries {
		var t *Transport
		if t, err = bind(ip, cfg); err == nil {
			t.wg.Add(2)
			go t.acceptLoop()
			go t.readLoop()
			return t, nil
		}
	}
	return nil, err
}

// bind listens on ip and cfg.Port (0: the port TCP got, for UDP too).
func bind(ip net.IP, cfg Config) (*Transport, error) {
	port := cfg.Port
	tcp, err := net.ListenTCP("tcp", &net.TCPAddr{IP: ip, Port: port})
	if err != nil {
		return nil, fmt.Errorf("gossip: TCP listener on %s: %w", net.JoinHostPort(ip.String(), strconv.Itoa(port)), err)
	}
	port = tcp.Addr().(*net.TCPAddr).Port
	udp, err := net.ListenUDP("udp", &net.UDPAddr{IP: ip, Port: port})
	if err != nil {
		tcp.Close()
		return nil, fmt.Errorf("gossip: UDP listener on %s: %w", net.JoinHostPort(ip.String(), strconv.Itoa(port)), err)
	}
	_ = udp.SetReadBuffer(udpReadBuffer) // best effort: the kernel's default works for a few peers
	return &Transport{
		tcp: tcp, udp: udp, log: cfg.Logger, labels: cfg.Labels, clk: cfg.Clock,
		packets: make(chan *memberlist.Packet),
		streams: make(chan net.Conn),
		done:    make(chan struct{}),
	}, nil
}

// Port is the bound port, TCP and UDP.
func (t *Transport) Port() int { return t.tcp.Addr().(*net.TCPAddr).Port }

// FinalAdvertiseAddr is ip:port when ip is given, else the bound address;
// bound to all addresses, it is the host's private address.
func (t *Transport) FinalAdvertiseAddr(ip string, port int) (net.IP, int, error) {
	if ip != "" {
		adv := net.ParseIP(ip)
		if adv == nil {
			return nil, 0, fmt.Errorf("gossip: advertise address %q is not an IP address", ip)
		}
		if v4 := adv.To4(); v4 != nil {
			adv = v4
		}
		return adv, port, nil
	}
	adv := t.tcp.Addr().(*net.TCPAddr).IP
	if adv.IsUnspecified() {
		private, err := sockaddr.GetPrivateIP()
		if err != nil {
			return nil, 0, fmt.Errorf("gossip: no private address to advertise: %w", err)
		}
		if private == "" {
			return nil, 0, errors.New("gossip: no private address to advertise; give an address to bind")
		}
		if adv = net.ParseIP(private); adv == nil {
			return nil, 0, fmt.Errorf("gossip: private address %q does not parse", private)
		}
	}
	return adv, t.Port(), nil
}

// WriteTo sends one packet to addr (host:port).
func (t *Transport) WriteTo(b []byte, addr string) (time.Time, error) {
	to, err := net.ResolveUDPAddr("udp", addr)
	if err != nil {
		return time.Time{}, err
	}
	// The time goes into memberlist's round-trip estimate.
	_, err = t.udp.WriteTo(b, to)
	return wall.Now(), err
}

// WriteToAddress is WriteTo at a.Addr.
func (t *Transport) WriteToAddress(b []byte, a memberlist.Address) (time.Time, error) {
	return t.WriteTo(b, a.Addr)
}

// PacketCh delivers the packets received.
func (t *Transport) PacketCh() <-chan *memberlist.Packet { return t.packets }

// DialTimeout opens a stream to addr.
func (t *Transport) DialTimeout(addr string, timeout time.Duration) (net.Conn, error) {
	return (&net.Dialer{Timeout: timeout}).Dial("tcp", addr)
}

// DialAddressTimeout is DialTimeout to a.Addr.
func (t *Transport) DialAddressTimeout(a memberlist.Address, timeout time.Duration) (net.Conn, error) {
	return t.DialTimeout(a.Addr, timeout)
}

// StreamCh delivers the streams accepted.
func (t *Transport) StreamCh() <-chan net.Conn { return t.streams }

// Shutdown closes both listeners and waits for their loops.
func (t *Transport) Shutdown() error {
	if t.closed.Swap(true) {
		return nil
	}
	close(t.done)
	t.tcp.Close()
	t.udp.Close()
	t.wg.Wait()
	return nil
}

func (t *Transport) acceptLoop() {
	defer t.wg.Done()
	var backoff time.Duration
	for {
		conn, err := t.tcp.AcceptTCP()
		if err != nil {
			if t.closed.Load() {
				return
			}
			// Out of descriptors, say: wait a little longer each time
			// rather than spin.
			backoff = min(max(2*backoff, 5*time.Millisecond), acceptBackoffMax)
			t.log.Printf("[ERR] gossip: accepting a TCP connection: %v", err)
			select {
			case <-clock.After(t.clk, backoff):
			case <-t.done:
				return
			}
			continue
		}
		backoff = 0
		select {
		case t.streams <- conn:
		case <-t.done:
			conn.Close()
			return
		}
	}
}

func (t *Transport) readLoop() {
	defer t.wg.Done()
	buf := make([]byte, maxPacket)
	for {
		n, from, err := t.udp.ReadFrom(buf)
		// Taken before anything else: memberlist measures round trips
		// with it.
		at := wall.Now()
		if err != nil {
			if t.closed.Load() {
				return
			}
			t.log.Printf("[ERR] gossip: reading a UDP packet: %v", err)
			continue
		}
		if n < 1 {
			t.log.Printf("[ERR] gossip: UDP packet of %d bytes from %s is too short", n, from)
			continue
		}
		metrics.IncrCounterWithLabels([]string{"memberlist", "udp", "received"}, float32(n), t.labels)
		select {
		case t.packets <- &memberlist.Packet{Buf: append([]byte(nil), buf[:n]...), From: from, Timestamp: at}:
		case <-t.done:
			return
		}
	}
}
