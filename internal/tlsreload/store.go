package tlsreload

import (
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
)

// Loader reads the material from wherever it lives; its errors name the
// file at fault.
type Loader func() (tls.Certificate, *x509.CertPool, error)

// Material is one loaded generation of certificate, key and CA pool.
type Material struct {
	Cert *tls.Certificate
	// Leaf is Cert's parsed first certificate.
	Leaf *x509.Certificate
	Pool *x509.CertPool
	// Generation counts successful loads, from 1.
	Generation uint64
}

// Store holds the current Material. Its zero value is not usable; use New.
type Store struct {
	load  Loader
	files []string
	cur   atomic.Pointer[Material]
	// mu serializes reloads, so generations follow load order.
	mu sync.Mutex
	// onError is told of every failed reload (the store keeps the old
	// material); nil ignores them.
	onError func(error)
}

// New loads the material once; it fails when that load fails. files are
// the paths Watch follows (empty for material given as PEM text).
func New(load Loader, files []string) (*Store, error) {
	s := &Store{load: load, files: files}
	if err := s.Reload(); err != nil {
		return nil, err
	}
	return s, nil
}

// OnError sets the function told of reloads that failed; call it before
// Watch.
func (s *Store) OnError(f func(error)) { s.onError = f }

// Files are the paths the material is read from.
func (s *Store) Files() []string { return s.files }

// Current is the material in use.
func (s *Store) Current() *Material { return s.cur.Load() }

// Reload reads the files again and, when they load, makes them current.
// On error the current material stays.
func (s *Store) Reload() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	cert, pool, err := s.load()
	if err != nil {
		return err
	}
	if len(cert.Certificate) == 0 || pool == nil {
		return errors.New("tlsreload: the loader returned no certificate or no CA pool")
	}
	leaf := cert.Leaf
	if leaf == nil {
		if leaf, err = x509.ParseCertificate(cert.Certificate[0]); err != nil {
			return fmt.Errorf("tlsreload: parsing the certificate: %w", err)
		}
		cert.Leaf = leaf
	}
	gen := uint64(1)
	if old := s.cur.Load(); old != nil {
		gen = old.Generation + 1
	}
	s.cur.Store(&Material{Cert: &cert, Leaf: leaf, Pool: pool, Generation: gen})
	return nil
}

// reloadReporting reloads and hands a failure to onError.
func (s *Store) reloadReporting() {
	if err := s.Reload(); err != nil && s.onError != nil {
		s.onError(err)
	}
}

// Peer checks a verified peer beyond its chain (its identity, say); nil
// accepts every peer the CA signed.
type Peer func(chains [][]*x509.Certificate) error

// ServerConfig is the server side of mTLS: the current certificate, and
// every client must show a certificate the current CA signed and that
// check accepts.
func (s *Store) ServerConfig(minVersion uint16, check Peer) *tls.Config {
	return &tls.Config{
		MinVersion: minVersion,
		GetConfigForClient: func(*tls.ClientHelloInfo) (*tls.Config, error) {
			m := s.Current()
			return &tls.Config{
				Certificates: []tls.Certificate{*m.Cert},
				ClientAuth:   tls.RequireAndVerifyClientCert,
				ClientCAs:    m.Pool,
				MinVersion:   minVersion,
				VerifyConnection: func(cs tls.ConnectionState) error {
					if check == nil {
						return nil
					}
					return check(cs.VerifiedChains)
				},
			}, nil
		},
	}
}

// ClientConfig is the client side of mTLS: it presents the current
// certificate and verifies the server's chain against the current CA pool
// for serverName, then check. Go verifies a client's RootCAs only as they
// were when the Config was made, so the chain is verified here, in
// VerifyConnection, and the built-in verification is off.
func (s *Store) ClientConfig(serverName string, minVersion uint16, check Peer) *tls.Config {
	return &tls.Config{
		MinVersion: minVersion,
		ServerName: serverName,
		GetClientCertificate: func(*tls.CertificateRequestInfo) (*tls.Certificate, error) {
			return s.Current().Cert, nil
		},
		InsecureSkipVerify: true, // verified in VerifyConnection against the current pool
		VerifyConnection: func(cs tls.ConnectionState) error {
			chains, err := VerifyServer(cs, s.Current().Pool, serverName)
			if err != nil {
				return err
			}
			if check == nil {
				return nil
			}
			return check(chains)
		},
	}
}

// VerifyServer verifies the certificates a server presented against pool,
// for name, as crypto/tls would.
func VerifyServer(cs tls.ConnectionState, pool *x509.CertPool, name string) ([][]*x509.Certificate, error) {
	if len(cs.PeerCertificates) == 0 {
		return nil, errors.New("tlsreload: the server presented no certificate")
	}
	inter := x509.NewCertPool()
	for _, c := range cs.PeerCertificates[1:] {
		inter.AddCert(c)
	}
	return cs.PeerCertificates[0].Verify(x509.VerifyOptions{
		Roots: pool, Intermediates: inter, DNSName: name,
		KeyUsages: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
	})
}

// VerifyClient verifies certificates a client presented (leaf first)
// against pool, as crypto/tls verifies a client's: a proxy forwards
// them, and the leader checks them so (rpc/authz).
func VerifyClient(certs []*x509.Certificate, pool *x509.CertPool) ([][]*x509.Certificate, error) {
	if len(certs) == 0 {
		return nil, errors.New("tlsreload: no client certificate")
	}
	if pool == nil {
		return nil, errors.New("tlsreload: no CA pool")
	}
	inter := x509.NewCertPool()
	for _, c := range certs[1:] {
		inter.AddCert(c)
	}
	return certs[0].Verify(x509.VerifyOptions{
		Roots: pool, Intermediates: inter,
		KeyUsages: []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth},
	})
}
