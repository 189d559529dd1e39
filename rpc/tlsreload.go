package rpc

import (
	"crypto/tls"
	"crypto/x509"

	"github.com/grapnel-io/grapnel/internal/tlsreload"
)

// NewTLSStore loads f into a store that rotates with the files
// (tlsreload.Watch, or Reload on SIGHUP). Every reload applies the same
// checks as the first load, permissions included.
func NewTLSStore(f TLSFiles) (*tlsreload.Store, error) {
	var files []string
	for _, p := range []string{f.CA, f.Cert, f.Key} {
		if p != "" {
			files = append(files, p)
		}
	}
	return tlsreload.New(func() (tls.Certificate, *x509.CertPool, error) { return f.load() }, files)
}

// ServerTLSConfigFrom is ServerTLSConfig reading the store's current
// material at every handshake.
func ServerTLSConfigFrom(s *tlsreload.Store) *tls.Config {
	return s.ServerConfig(tls.VersionTLS12, nil)
}

// ClientTLSConfigFrom is ClientTLSConfig reading the store's current
// material at every handshake.
func ClientTLSConfigFrom(s *tlsreload.Store, serverName string) *tls.Config {
	if serverName == "" {
		serverName = ServerName
	}
	return s.ClientConfig(serverName, tls.VersionTLS12, nil)
}
