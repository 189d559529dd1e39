package rpc

import (
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"os"
)

// ServerName is the name clients verify in the server certificate. Ankaios
// clients hard-code it, so every replica's certificate needs this SAN.
const ServerName = "ank-server"

// ErrPEMPermissions marks a PEM file whose permissions are too open.
var ErrPEMPermissions = errors.New("insecure PEM file permissions")

// TLSFiles names the PEM files of one side of an mTLS connection. Each
// of the three may instead be given as PEM text (an Ankaios config file's
// ca_pem_content, crt_pem_content, key_pem_content); a path, when given
// too, wins over the text.
type TLSFiles struct {
	CA   string // CA certificate that signs both sides
	Cert string // own certificate
	Key  string // own private key

	CAPEM   string // the CA certificate's PEM text, used when CA is empty
	CertPEM string // the own certificate's PEM text, used when Cert is empty
	KeyPEM  string // the own private key's PEM text, used when Key is empty
}

// Empty reports whether no file and no PEM text is given, i.e. the
// insecure mode.
func (f TLSFiles) Empty() bool {
	return f.CA == "" && f.Cert == "" && f.Key == "" && f.CAPEM == "" && f.CertPEM == "" && f.KeyPEM == ""
}

func (f TLSFiles) complete() error {
	switch {
	case f.CA == "" && f.CAPEM == "":
		return errors.New("missing CA certificate file")
	case f.Cert == "" && f.CertPEM == "":
		return errors.New("missing certificate file")
	case f.Key == "" && f.KeyPEM == "":
		return errors.New("missing private key file")
	}
	return nil
}

// pemOf returns the PEM text of one part: the file's content when a path is
// given, the text otherwise. name describes where it came from in errors.
func pemOf(path, text, kind string) (data []byte, name string, err error) {
	if path == "" {
		return []byte(text), kind + " (PEM content)", nil
	}
	data, err = os.ReadFile(path)
	if err != nil {
		return nil, "", fmt.Errorf("%s %s: %w", kind, path, err)
	}
	return data, kind + " " + path, nil
}

// CheckPEMPermissions checks the files that are given, as Ankaios does: a
// private key must be 0600 or 0400; a certificate must be readable by its
// owner and neither writable by group or others nor executable.
func CheckPEMPermissions(f TLSFiles) error {
	for _, c := range []struct{ path, kind string }{{f.CA, "CA certificate"}, {f.Cert, "certificate"}, {f.Key, "private key"}} {
		if c.path == "" {
			continue
		}
		info, err := os.Stat(c.path)
		if err != nil {
			return fmt.Errorf("%s %s: %w", c.kind, c.path, err)
		}
		perm := info.Mode().Perm()
		var reason string
		switch {
		case c.kind == "private key":
			if perm != 0o600 && perm != 0o400 {
				reason = "must have permissions 0600 or 0400"
			}
		case perm&0o400 == 0:
			reason = "must be readable by its owner"
		case perm&0o022 != 0:
			reason = "must not be writable by group or others"
		case perm&0o111 != 0:
			reason = "must not be executable"
		}
		if reason != "" {
			return fmt.Errorf("%w: %s %s has permissions %04o and %s", ErrPEMPermissions, c.kind, c.path, perm, reason)
		}
	}
	return nil
}

// load checks and reads the three parts, from their files or PEM text.
func (f TLSFiles) load() (tls.Certificate, *x509.CertPool, error) {
	if err := f.complete(); err != nil {
		return tls.Certificate{}, nil, err
	}
	if err := CheckPEMPermissions(f); err != nil {
		return tls.Certificate{}, nil, err
	}
	if f.Cert != "" && f.Key != "" {
		cert, err := tls.LoadX509KeyPair(f.Cert, f.Key)
		if err != nil {
			return tls.Certificate{}, nil, fmt.Errorf("loading certificate %s and key %s: %w", f.Cert, f.Key, err)
		}
		pool, err := f.caPool()
		return cert, pool, err
	}
	certPEM, certName, err := pemOf(f.Cert, f.CertPEM, "certificate")
	if err != nil {
		return tls.Certificate{}, nil, err
	}
	keyPEM, keyName, err := pemOf(f.Key, f.KeyPEM, "private key")
	if err != nil {
		return tls.Certificate{}, nil, err
	}
	cert, err := tls.X509KeyPair(certPEM, keyPEM)
	if err != nil {
		return tls.Certificate{}, nil, fmt.Errorf("loading %s and %s: %w", certName, keyName, err)
	}
	pool, err := f.caPool()
	return cert, pool, err
}

// caPool reads the CA certificate.
func (f TLSFiles) caPool() (*x509.CertPool, error) {
	caPEM, name, err := pemOf(f.CA, f.CAPEM, "CA certificate")
	if err != nil {
		return nil, err
	}
	pool := x509.NewCertPool()
	if !pool.AppendCertsFromPEM(caPEM) {
		return nil, fmt.Errorf("%s: no PEM certificate found", name)
	}
	return pool, nil
}

// ServerTLSConfig builds the server side of mTLS: every client must show a
// certificate signed by the CA; TLS 1.2 or newer.
func ServerTLSConfig(f TLSFiles) (*tls.Config, error) {
	cert, pool, err := f.load()
	if err != nil {
		return nil, err
	}
	return &tls.Config{
		Certificates: []tls.Certificate{cert},
		ClientAuth:   tls.RequireAndVerifyClientCert,
		ClientCAs:    pool,
		MinVersion:   tls.VersionTLS12,
	}, nil
}

// ClientTLSConfig builds the client side of mTLS: it presents its own
// certificate and verifies the server's against the CA for serverName
// (ServerName when empty).
func ClientTLSConfig(f TLSFiles, serverName string) (*tls.Config, error) {
	cert, pool, err := f.load()
	if err != nil {
		return nil, err
	}
	if serverName == "" {
		serverName = ServerName
	}
	return &tls.Config{
		Certificates: []tls.Certificate{cert},
		RootCAs:      pool,
		ServerName:   serverName,
		MinVersion:   tls.VersionTLS12,
	}, nil
}
