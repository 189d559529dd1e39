package faultnet

import (
	"net"
	"strconv"
	"time"

	"github.com/hashicorp/memberlist"

	"github.com/grapnel-io/grapnel/internal/clock"
)

// GossipTransport wraps a replica's memberlist transport: packets to a
// replica across a cut link are dropped (as a lost UDP datagram would be),
// stream dials are refused, and dialed streams are closed on a cut. The
// inner transport's advertised address is registered as id's.
func (n *Network) GossipTransport(id string, inner memberlist.Transport) memberlist.Transport {
	if ip, port, err := inner.FinalAdvertiseAddr("", 0); err == nil {
		n.register(id, net.JoinHostPort(ip.String(), strconv.Itoa(port)))
	}
	na, ok := inner.(memberlist.NodeAwareTransport)
	if !ok {
		na = shim{inner}
	}
	return &gossipTransport{nw: n, id: id, inner: na}
}

type gossipTransport struct {
	nw    *Network
	id    string
	inner memberlist.NodeAwareTransport
}

var _ memberlist.NodeAwareTransport = (*gossipTransport)(nil)

func (t *gossipTransport) FinalAdvertiseAddr(ip string, port int) (net.IP, int, error) {
	return t.inner.FinalAdvertiseAddr(ip, port)
}

func (t *gossipTransport) peer(a memberlist.Address) string {
	if a.Name != "" {
		return a.Name
	}
	return t.nw.ownerOf(a.Addr)
}

func (t *gossipTransport) WriteTo(b []byte, addr string) (time.Time, error) {
	return t.WriteToAddress(b, memberlist.Address{Addr: addr})
}

func (t *gossipTransport) WriteToAddress(b []byte, a memberlist.Address) (time.Time, error) {
	if !t.nw.Connected(t.id, t.peer(a)) {
		return clock.Real().Now(), nil
	}
	return t.inner.WriteToAddress(b, a)
}

func (t *gossipTransport) PacketCh() <-chan *memberlist.Packet { return t.inner.PacketCh() }

func (t *gossipTransport) DialTimeout(addr string, timeout time.Duration) (net.Conn, error) {
	return t.DialAddressTimeout(memberlist.Address{Addr: addr}, timeout)
}

func (t *gossipTransport) DialAddressTimeout(a memberlist.Address, timeout time.Duration) (net.Conn, error) {
	return t.nw.dial(t.id, t.peer(a), a.Addr, func() (net.Conn, error) {
		return t.inner.DialAddressTimeout(a, timeout)
	})
}

func (t *gossipTransport) StreamCh() <-chan net.Conn { return t.inner.StreamCh() }
func (t *gossipTransport) Shutdown() error           { return t.inner.Shutdown() }

// shim makes a plain Transport node-aware.
type shim struct{ memberlist.Transport }

func (s shim) WriteToAddress(b []byte, a memberlist.Address) (time.Time, error) {
	return s.WriteTo(b, a.Addr)
}

func (s shim) DialAddressTimeout(a memberlist.Address, timeout time.Duration) (net.Conn, error) {
	return s.DialTimeout(a.Addr, timeout)
}
