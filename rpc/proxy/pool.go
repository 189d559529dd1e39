package proxy

import (
	"context"
	"errors"
	"fmt"
	"net"
	"sync"

	"google.golang.org/grpc"

	"github.com/grapnel-io/grapnel/rpc"
)

// ErrPoolClosed is returned by Get after Close.
var ErrPoolClosed = errors.New("proxy pool closed")

// Pool keeps one gRPC client connection per address and hands it to every
// stream proxied there, so that a burst of reconnecting agents does not
// open a connection each. Safe for concurrent use.
type Pool struct {
	opts []grpc.DialOption

	mu     sync.Mutex // guards the following fields
	conns  map[string]*grpc.ClientConn
	closed bool
}

// NewPool returns a pool whose connections use opts: the transport
// credentials (the replica's own certificate as a client, or insecure) and
// whatever else the caller wants, such as keepalive parameters. They
// redial a failed leader quickly (rpc.Redial) and keep to the server's
// message limits and windows (rpc.ClientLimits, rpc.ClientWindows) unless
// opts say otherwise.
func NewPool(opts ...grpc.DialOption) *Pool {
	opts = append(append([]grpc.DialOption{rpc.Redial(), rpc.ClientLimits()}, rpc.ClientWindows()...), opts...)
	return &Pool{opts: opts, conns: map[string]*grpc.ClientConn{}}
}

// Get returns the connection to addr, creating it on first use. gRPC
// connects lazily and reconnects by itself, so the connection stays
// usable across outages of the peer.
func (p *Pool) Get(addr string) (*grpc.ClientConn, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.closed {
		return nil, ErrPoolClosed
	}
	if cc, ok := p.conns[addr]; ok {
		return cc, nil
	}
	cc, err := grpc.NewClient(addr, p.opts...)
	if err != nil {
		return nil, fmt.Errorf("proxy connection to %s: %w", addr, err)
	}
	p.conns[addr] = cc
	return cc, nil
}

// Retain closes the connections to every address but keep: once
// leadership has moved, streams to a former leader must end anyway.
func (p *Pool) Retain(keep string) {
	p.mu.Lock()
	var drop []*grpc.ClientConn
	for addr, cc := range p.conns {
		if addr != keep {
			drop = append(drop, cc)
			delete(p.conns, addr)
		}
	}
	p.mu.Unlock()
	for _, cc := range drop {
		_ = cc.Close()
	}
}

// Close closes every connection, which ends the streams on them; Get
// fails afterwards.
func (p *Pool) Close() error {
	p.mu.Lock()
	p.closed = true
	conns := p.conns
	p.conns = map[string]*grpc.ClientConn{}
	p.mu.Unlock()
	var errs []error
	for _, cc := range conns {
		if err := cc.Close(); err != nil {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}

// Len is the number of open connections.
func (p *Pool) Len() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return len(p.conns)
}

// DialFrom makes the pool's connections leave from the host of
// raftAddress, the replica's own Raft address: the leader believes a
// forwarded identity only on a connection from the forwarding member's
// Raft address (rpc/authz), and on a unit with several interfaces the
// kernel could otherwise pick another source. A host that is not an IP,
// or an unspecified one, leaves the choice to the kernel.
func DialFrom(raftAddress string) grpc.DialOption {
	host, _, err := net.SplitHostPort(raftAddress)
	ip := net.ParseIP(host)
	if err != nil || ip == nil || ip.IsUnspecified() {
		return grpc.EmptyDialOption{}
	}
	d := &net.Dialer{LocalAddr: &net.TCPAddr{IP: ip}}
	return grpc.WithContextDialer(func(ctx context.Context, addr string) (net.Conn, error) {
		return d.DialContext(ctx, "tcp", addr)
	})
}
