// Package certs makes the certificates of a Grapnel installation: a CA,
// and certificates that name one identity each (internal/identity:
// grapnel://ROLE/NAME), ECDSA P-256, keys written 0600 and certificates
// 0644. `grapnel certs` is its command line; docs/security.md the
// procedures. Time comes in as an argument, so the package reads no
// clock.
package certs

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"errors"
	"fmt"
	"math/big"
	"net/url"
	"os"
	"path/filepath"
	"time"

	"github.com/grapnel-io/grapnel/internal/durable"
	"github.com/grapnel-io/grapnel/internal/identity"
)

// File names in a CA directory and in an issued certificate's directory.
// The CA certificate is copied next to every issued certificate, so that
// one directory holds the three files a replica, agent or CLI is given.
const (
	CACert  = "ca.pem"
	CAKey   = "ca-key.pem"
	Cert    = "cert.pem"
	Key     = "key.pem"
	keyMode = 0o600
	crtMode = 0o644
)

// clockSkew backdates NotBefore, so that a certificate is valid at once
// on a machine whose clock is a little behind.
const clockSkew = 5 * time.Minute

// ErrExists refuses to overwrite a key: a lost CA key cannot be replaced
// without reissuing every certificate.
var ErrExists = errors.New("already exists")

// NewCA writes a CA certificate and key into dir (created 0700 if
// absent), valid from now for validity.
func NewCA(dir string, now time.Time, validity time.Duration) error {
	if err := checkValidity(validity); err != nil {
		return err
	}
	if err := prepare(dir, CAKey, CACert); err != nil {
		return err
	}
	key, der, err := sign(&x509.Certificate{
		Subject:   pkix.Name{CommonName: "Grapnel CA"},
		NotBefore: now.Add(-clockSkew), NotAfter: now.Add(validity),
		IsCA: true, BasicConstraintsValid: true, MaxPathLenZero: true,
		KeyUsage: x509.KeyUsageCertSign | x509.KeyUsageCRLSign,
	}, nil, nil)
	if err != nil {
		return err
	}
	return writeCA(durable.OS, dir, key, der)
}

// writeCA writes the CA's key, then its certificate, into dir (created
// 0700 if absent), each durable before the next: a crash leaves a file
// whole or missing, never half written.
func writeCA(files durable.Files, dir string, key *ecdsa.PrivateKey, der []byte) error {
	if err := files.MkdirAll(dir, 0o700); err != nil {
		return err
	}
	return writeKeyAndCert(files, dir, CAKey, CACert, key, der)
}

// sign makes a P-256 key and a certificate of it from tmpl with a fresh
// serial number, signed by parent's key, or self-signed when parent is
// nil.
func sign(tmpl, parent *x509.Certificate, parentKey *ecdsa.PrivateKey) (*ecdsa.PrivateKey, []byte, error) {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, nil, err
	}
	if tmpl.SerialNumber, err = serialNumber(); err != nil {
		return nil, nil, err
	}
	if parent == nil {
		parent, parentKey = tmpl, key
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, parent, &key.PublicKey, parentKey)
	return key, der, err
}

// Request is one certificate to issue.
type Request struct {
	Role identity.Role
	Name string
	// Validity is how long the certificate is valid from now.
	Validity time.Duration
}

// SANs are the DNS names a certificate of role for name carries besides
// its grapnel:// URI: a replica's carries identity.ServerSAN, which
// Ankaios clients verify; an agent's its name, so that an upstream
// Ankaios agent can use it too.
func SANs(role identity.Role, name string) []string {
	switch role {
	case identity.Replica:
		return []string{identity.ServerSAN}
	case identity.Agent:
		return []string{name}
	}
	return nil
}

// Issue writes a certificate for r, signed by the CA in caDir, with its
// key and a copy of the CA certificate into outDir (created 0700 if
// absent).
func Issue(caDir, outDir string, r Request, now time.Time) error {
	if r.Role == identity.None {
		return errors.New("--role: give replica, agent, operator or commander")
	}
	if !identity.ValidName(r.Name) {
		return fmt.Errorf("--name %q: 1 to 63 letters, digits, '_' or '-'", r.Name)
	}
	if r.Name == identity.ServerSAN {
		return fmt.Errorf("--name %q: every replica's certificate carries that name; it names no identity", r.Name)
	}
	if err := checkValidity(r.Validity); err != nil {
		return err
	}
	caCert, caKey, caPEM, err := loadCA(caDir)
	if err != nil {
		return err
	}
	notAfter := now.Add(r.Validity)
	if notAfter.After(caCert.NotAfter) {
		return fmt.Errorf("--validity %v: the certificate would outlive the CA, which expires %s", r.Validity, caCert.NotAfter.UTC().Format(time.RFC3339))
	}
	if err := prepare(outDir, Key, Cert, CACert); err != nil {
		return err
	}
	key, der, err := sign(&x509.Certificate{
		Subject:  pkix.Name{CommonName: r.Name, OrganizationalUnit: []string{r.Role.String()}},
		DNSNames: SANs(r.Role, r.Name), URIs: []*url.URL{identity.URI(r.Role, r.Name)},
		NotBefore: now.Add(-clockSkew), NotAfter: notAfter,
		KeyUsage:    x509.KeyUsageDigitalSignature,
		ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth, x509.ExtKeyUsageClientAuth},
	}, caCert, caKey)
	if err != nil {
		return err
	}
	return writeIssued(durable.OS, outDir, key, der, caPEM)
}

// writeIssued writes an issued certificate's key, the certificate and a
// copy of the CA certificate into dir (created 0700 if absent), as
// writeCA does.
func writeIssued(files durable.Files, dir string, key *ecdsa.PrivateKey, der, caPEM []byte) error {
	if err := files.MkdirAll(dir, 0o700); err != nil {
		return err
	}
	if err := writeKeyAndCert(files, dir, Key, Cert, key, der); err != nil {
		return err
	}
	return files.Create(filepath.Join(dir, CACert), caPEM, crtMode)
}

func checkValidity(d time.Duration) error {
	if d <= 0 {
		return fmt.Errorf("--validity %v: must be positive", d)
	}
	return nil
}

// prepare refuses to overwrite any of files in dir, before anything is
// made.
func prepare(dir string, files ...string) error {
	for _, f := range files {
		p := filepath.Join(dir, f)
		if _, err := os.Lstat(p); err == nil {
			return fmt.Errorf("%s: %w; move it away first (nothing was written)", p, ErrExists)
		}
	}
	return nil
}

func loadCA(dir string) (*x509.Certificate, *ecdsa.PrivateKey, []byte, error) {
	certPEM, err := os.ReadFile(filepath.Join(dir, CACert))
	if err != nil {
		return nil, nil, nil, fmt.Errorf("--ca: %w", err)
	}
	keyPEM, err := os.ReadFile(filepath.Join(dir, CAKey))
	if err != nil {
		return nil, nil, nil, fmt.Errorf("--ca: %w", err)
	}
	cb, _ := pem.Decode(certPEM)
	kb, _ := pem.Decode(keyPEM)
	if cb == nil || kb == nil {
		return nil, nil, nil, fmt.Errorf("--ca %s: %s or %s is not PEM", dir, CACert, CAKey)
	}
	cert, err := x509.ParseCertificate(cb.Bytes)
	if err != nil {
		return nil, nil, nil, fmt.Errorf("--ca %s: %w", dir, err)
	}
	k, err := x509.ParsePKCS8PrivateKey(kb.Bytes)
	if err != nil {
		return nil, nil, nil, fmt.Errorf("--ca %s: %w", dir, err)
	}
	key, ok := k.(*ecdsa.PrivateKey)
	if !ok || !cert.IsCA {
		return nil, nil, nil, fmt.Errorf("--ca %s: not a CA made by grapnel certs ca", dir)
	}
	return cert, key, certPEM, nil
}

func writeKeyAndCert(files durable.Files, dir, keyFile, certFile string, key *ecdsa.PrivateKey, der []byte) error {
	keyDER, err := x509.MarshalPKCS8PrivateKey(key)
	if err != nil {
		return err
	}
	// Created with its mode whatever the umask, never replacing a file.
	if err := files.Create(filepath.Join(dir, keyFile), pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: keyDER}), keyMode); err != nil {
		return err
	}
	return files.Create(filepath.Join(dir, certFile), pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}), crtMode)
}

func serialNumber() (*big.Int, error) {
	return rand.Int(rand.Reader, new(big.Int).Lsh(big.NewInt(1), 127))
}
