package rpc

import (
	"net"
	"time"

	"golang.org/x/sys/unix"

	"github.com/grapnel-io/grapnel/internal/connlimit"
)

// DefaultHandshakeTimeout bounds how long a new connection to a
// replica's gRPC port may take to finish the TLS handshake and send the
// HTTP/2 preface (grpc.ConnectionTimeout, in ServerOptions). gRPC's own
// default is 120 s, all of which a peer that connects and never speaks
// held a descriptor and a goroutine for: about 20,000 of them took every
// descriptor a replica had (issue 27). A client on the vehicle network
// finishes in milliseconds.
const DefaultHandshakeTimeout = 5 * time.Second

// ServerListener bounds a gRPC server's listener by cfg
// (internal/connlimit). gRPC sets TCP_USER_TIMEOUT (ServerKeepalive's
// Timeout, which drops a peer that stopped acknowledging) only on a
// *net.TCPConn, which the limiter's connections are not, so each accepted
// socket gets it here, as gRPC would have set it.
func ServerListener(ln net.Listener, cfg connlimit.Config) *connlimit.Listener {
	return connlimit.Wrap(userTimeoutListener{Listener: ln, timeout: ServerKeepalive.Timeout}, cfg)
}

// userTimeoutListener sets TCP_USER_TIMEOUT on every TCP connection it
// accepts.
type userTimeoutListener struct {
	net.Listener
	timeout time.Duration
}

func (l userTimeoutListener) Accept() (net.Conn, error) {
	for {
		c, err := l.Listener.Accept()
		if err != nil {
			return nil, err
		}
		tc, ok := c.(*net.TCPConn)
		if !ok || setUserTimeout(tc, l.timeout) == nil {
			return c, nil
		}
		// As gRPC: a socket that refuses the option fails the
		// connection.
		c.Close()
	}
}

// setUserTimeout sets TCP_USER_TIMEOUT on c, as gRPC's server transport
// does on the sockets it sees (internal/syscall.SetTCPUserTimeout).
func setUserTimeout(c *net.TCPConn, d time.Duration) error {
	raw, err := c.SyscallConn()
	if err != nil {
		return err
	}
	var serr error
	if err := raw.Control(func(fd uintptr) {
		serr = unix.SetsockoptInt(int(fd), unix.IPPROTO_TCP, unix.TCP_USER_TIMEOUT, int(d/time.Millisecond))
	}); err != nil {
		return err
	}
	return serr
}
