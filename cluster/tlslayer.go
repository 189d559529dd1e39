package cluster

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"net"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/hashicorp/go-hclog"
	"github.com/hashicorp/raft"

	"github.com/grapnel-io/grapnel/internal/identity"
	"github.com/grapnel-io/grapnel/internal/tlsreload"
	"github.com/grapnel-io/grapnel/state"
)

// ErrNotReplica marks a Raft peer whose certificate is not the replica
// it must be.
var ErrNotReplica = errors.New("raft peer is not the expected replica")

// raftHandshakeTimeout bounds one TLS handshake on the Raft port, so a
// peer that connects and says nothing holds no goroutine for long.
const raftHandshakeTimeout = 5 * time.Second

// tlsLayer is Raft's stream layer with mutual TLS 1.3 over a base layer
// (plain TCP, or a test's fault network). Both sides present the
// replica's certificate from the store, read at each handshake, so a
// rotated certificate is used by the next connection.
//
// What is verified, and why:
//   - Both sides: the peer's chain leads to the current CA and its
//     certificate names a replica (grapnel://replica/ID). Untyped
//     certificates are never replicas. An agent's, operator's or
//     commander's certificate fails the handshake, before one byte of a
//     Raft RPC is read.
//   - The dialling side: hashicorp/raft dials only servers of its
//     configuration, passing the address only. The layer maps the address
//     back to the id the configuration gives it and requires the peer's
//     replica id to be that id. An address no configuration entry has
//     (the configuration changed meanwhile, or a bootstrap) requires a
//     replica of any id.
//   - The accepting side learns the id from the certificate only; the
//     remote address is the peer's source address (another port, maybe
//     another interface), so comparing it with the configured address
//     would refuse honest peers and prove nothing. Instead, once this
//     replica's configuration is not empty, the id must be in it: a
//     replica that was removed, or one never admitted, cannot vote, ask
//     for votes or send entries here. A replica with an empty
//     configuration (fresh, waiting to be added or to bootstrap) accepts
//     any replica, since it does not know its cluster yet. The id inside
//     each RPC's header is not compared with the certificate: the layer
//     never sees RPCs, and a peer holding a replica certificate of this
//     cluster is trusted as a replica anyway.
//   - Both sides: a certificate an operator's removal revoked (by serial,
//     replicated: RemovalLedger) is refused, so the key of a removed
//     replica opens nothing, under any leader, even once its id is a
//     member again.
type tlsLayer struct {
	raft.StreamLayer
	store  *tlsreload.Store
	logger hclog.Logger
	now    func() time.Time
	// raft gives the configuration once Raft runs; before that it is empty.
	raft atomic.Pointer[raft.Raft]
	// refusals are rate-limited in the log: one line per second at most.
	mu         sync.Mutex
	lastRefuse time.Time
	// refused counts the failed handshakes by side: [0] connections
	// this replica accepted, [1] those it dialled (Raft's and the
	// admission probes').
	refused [2]atomic.Uint64
	// revoked looks a certificate serial up among those revoked by an
	// operator's removal (RemovalLedger.RevokedCert); nil revokes none.
	revoked func(serial string) (state.RevokedCert, bool)
	// seen are the certificates members of the configuration showed in
	// handshakes, newest last, at most state.MaxCertsPerReplica per id
	// (guarded by mu): the leader records them in the replicated state
	// (reconciler.recordCertificates) and a removal revokes them.
	seen map[string][]state.ReplicaCert
	// onSeen is told when a member shows a certificate not in seen.
	onSeen func()
}

func newTLSLayer(base raft.StreamLayer, store *tlsreload.Store, logger hclog.Logger, now func() time.Time) *tlsLayer {
	return &tlsLayer{StreamLayer: base, store: store, logger: logger, now: now, seen: map[string][]state.ReplicaCert{}}
}

// verified checks a replica certificate that verified against the CA:
// refused when an operator's removal revoked it, else remembered when
// its replica is in the configuration.
func (l *tlsLayer) verified(id string, chains [][]*x509.Certificate, cfg raft.Configuration) error {
	leaf := chains[0][0]
	serial := identity.Serial(leaf)
	if l.revoked != nil {
		if r, ok := l.revoked(serial); ok {
			return fmt.Errorf("%w: the certificate of replica %s (serial %s) was revoked when an operator removed replica %s (Raft index %d)",
				ErrNotReplica, id, serial, r.ID, r.Index)
		}
	}
	for _, s := range cfg.Servers {
		if string(s.ID) == id {
			l.remember(id, state.ReplicaCert{Serial: serial, NotAfterMs: leaf.NotAfter.UnixMilli()})
			break
		}
	}
	return nil
}

// remember adds c to what replica id showed.
func (l *tlsLayer) remember(id string, c state.ReplicaCert) {
	l.mu.Lock()
	have := l.seen[id]
	for _, h := range have {
		if h.Serial == c.Serial {
			l.mu.Unlock()
			return
		}
	}
	have = append(have, c)
	if len(have) > state.MaxCertsPerReplica {
		have = have[1:]
	}
	l.seen[id] = have
	notify := l.onSeen
	l.mu.Unlock()
	if notify != nil {
		notify()
	}
}

// certsOf are the certificates replica id showed this replica, with this
// replica's own when id is its own (nil without TLS).
func (l *tlsLayer) certsOf(id string) []state.ReplicaCert {
	if l == nil {
		return nil
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	return slices.Clone(l.seen[id])
}

// own is the certificate this replica presents now.
func (l *tlsLayer) own() state.ReplicaCert {
	leaf := l.store.Current().Leaf
	return state.ReplicaCert{Serial: identity.Serial(leaf), NotAfterMs: leaf.NotAfter.UnixMilli()}
}

// configuration is the latest Raft configuration, empty before Raft runs.
func (l *tlsLayer) configuration() raft.Configuration {
	r := l.raft.Load()
	if r == nil {
		return raft.Configuration{}
	}
	f := r.GetConfiguration() // reads an atomic copy; does not wait on Raft's loop
	if f.Error() != nil {
		return raft.Configuration{}
	}
	return f.Configuration()
}

// replicaID reads the replica id from a verified chain.
func replicaID(chains [][]*x509.Certificate) (string, error) {
	id, err := identity.FromChains(chains, identity.None)
	if err != nil {
		return "", fmt.Errorf("%w: %w", ErrNotReplica, err)
	}
	if id.Role != identity.Replica {
		return "", fmt.Errorf("%w: the certificate names %s, not a replica", ErrNotReplica, id)
	}
	return id.Name, nil
}

// Dial connects to address and completes the handshake, requiring the
// replica the configuration names for address.
func (l *tlsLayer) Dial(address raft.ServerAddress, timeout time.Duration) (net.Conn, error) {
	want := ""
	for _, s := range l.configuration().Servers {
		if s.Address == address {
			want = string(s.ID)
			break
		}
	}
	return l.dialReplica(address, want, timeout)
}

// dialReplica dials address and requires a replica certificate, with id
// want when want is not empty.
func (l *tlsLayer) dialReplica(address raft.ServerAddress, want string, timeout time.Duration) (*tls.Conn, error) {
	c, err := l.StreamLayer.Dial(address, timeout)
	if err != nil {
		return nil, err
	}
	check := func(chains [][]*x509.Certificate) error {
		id, err := replicaID(chains)
		if err != nil {
			return err
		}
		if want != "" && id != want {
			return fmt.Errorf("%w: %s answered as replica %s, the configuration has %s there", ErrNotReplica, address, id, want)
		}
		return l.verified(id, chains, l.configuration())
	}
	tc := tls.Client(c, l.store.ClientConfig(identity.ServerSAN, tls.VersionTLS13, check))
	ctx, cancel := context.WithTimeout(context.Background(), min(timeout, raftHandshakeTimeout))
	defer cancel()
	if err := tc.HandshakeContext(ctx); err != nil {
		c.Close()
		l.refuse("dialled", string(address), err)
		return nil, fmt.Errorf("raft TLS to %s: %w", address, err)
	}
	return tc, nil
}

// probe connects to address and completes the TLS handshake, then
// closes the connection. It only asks whether the port takes
// connections and the process behind it answers (fastfail.go; a
// handshake that times out is errNoAnswer), so it checks no replica id
// and neither logs nor counts a failure as refused: a dying replica's
// port resetting the handshake is what it looks for, not an intruder.
func (l *tlsLayer) probe(address raft.ServerAddress, timeout time.Duration) error {
	c, err := l.StreamLayer.Dial(address, timeout)
	if err != nil {
		return err
	}
	tc := tls.Client(c, l.store.ClientConfig(identity.ServerSAN, tls.VersionTLS13, nil))
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	if err := tc.HandshakeContext(ctx); err != nil {
		c.Close()
		return noAnswer(err)
	}
	return tc.Close()
}

// Accept hands out the next connection as TLS; its handshake runs on
// its first read, in the transport's goroutine for that connection, so
// a slow or silent peer never holds up the accept loop.
func (l *tlsLayer) Accept() (net.Conn, error) {
	c, err := l.StreamLayer.Accept()
	if err != nil {
		return nil, err
	}
	check := func(chains [][]*x509.Certificate) error {
		id, err := replicaID(chains)
		if err != nil {
			return err
		}
		cfg := l.configuration()
		if len(cfg.Servers) == 0 {
			return l.verified(id, chains, cfg)
		}
		for _, s := range cfg.Servers {
			if string(s.ID) == id {
				return l.verified(id, chains, cfg)
			}
		}
		return fmt.Errorf("%w: replica %s is not in this replica's configuration", ErrNotReplica, id)
	}
	return &acceptedTLS{Conn: tls.Server(c, l.store.ServerConfig(tls.VersionTLS13, check)), layer: l}, nil
}

// refuse logs a failed handshake, at most once a second, and counts it.
func (l *tlsLayer) refuse(side, remote string, err error) {
	if side == "accepted" {
		l.refused[0].Add(1)
	} else {
		l.refused[1].Add(1)
	}
	now := l.now()
	l.mu.Lock()
	quiet := now.Sub(l.lastRefuse) < time.Second
	if !quiet {
		l.lastRefuse = now
	}
	l.mu.Unlock()
	if !quiet {
		l.logger.Warn("raft TLS handshake refused", "side", side, "peer", remote, "error", err, "refused_total", l.refused[0].Load()+l.refused[1].Load())
	}
}

// acceptedTLS runs the server handshake, bounded, before the first read
// or write.
type acceptedTLS struct {
	*tls.Conn
	layer *tlsLayer
	once  sync.Once
	err   error
}

func (c *acceptedTLS) handshake() error {
	c.once.Do(func() {
		ctx, cancel := context.WithTimeout(context.Background(), raftHandshakeTimeout)
		defer cancel()
		if c.err = c.Conn.HandshakeContext(ctx); c.err != nil {
			if peerClosed(c.err) {
				// The peer hung up before it said who it is: nothing
				// was refused. A follower's probe of a stopped leader
				// (fastfail.go) is read only when the leader runs again,
				// long after the follower closed it.
				c.layer.logger.Debug("a peer hung up during the Raft TLS handshake", "peer", c.RemoteAddr().String(), "error", c.err)
			} else {
				c.layer.refuse("accepted", c.RemoteAddr().String(), c.err)
			}
			c.Conn.Close()
		}
	})
	return c.err
}

func (c *acceptedTLS) Read(b []byte) (int, error) {
	if err := c.handshake(); err != nil {
		return 0, err
	}
	return c.Conn.Read(b)
}

func (c *acceptedTLS) Write(b []byte) (int, error) {
	if err := c.handshake(); err != nil {
		return 0, err
	}
	return c.Conn.Write(b)
}
