package faultnet

import (
	"net"
	"time"

	"github.com/hashicorp/raft"
)

// StreamLayer wraps a replica's Raft listener: dials to a replica across a
// cut link are refused and dialed connections are closed when their link
// is cut. Accepted connections are closed from the dialing side. The
// connections of a frozen replica stand still (Freeze).
func (n *Network) StreamLayer(id string, ln net.Listener) raft.StreamLayer {
	n.register(id, ln.Addr().String())
	return &streamLayer{nw: n, id: id, ln: ln}
}

type streamLayer struct {
	nw *Network
	id string
	ln net.Listener
}

func (s *streamLayer) Accept() (net.Conn, error) {
	c, err := s.ln.Accept()
	if err != nil {
		return nil, err
	}
	return newStalling(c, s.nw, s.id), nil
}

func (s *streamLayer) Close() error   { return s.ln.Close() }
func (s *streamLayer) Addr() net.Addr { return s.ln.Addr() }

func (s *streamLayer) Dial(address raft.ServerAddress, timeout time.Duration) (net.Conn, error) {
	addr := string(address)
	return s.nw.dial(s.id, s.nw.ownerOf(addr), addr, func() (net.Conn, error) {
		return net.DialTimeout("tcp", addr, timeout)
	})
}
