// Package rpctest gives tests a throwaway certificate authority: a CA and
// certificates signed by it, written as PEM files that rpc.ServerTLSConfig
// and rpc.ClientTLSConfig load.
package rpctest

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"math/big"
	"net/url"
	"os"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/grapnel-io/grapnel/internal/clock"
	"github.com/grapnel-io/grapnel/internal/identity"
	"github.com/grapnel-io/grapnel/rpc"
)

// CA is a throwaway certificate authority in a test's temp dir.
type CA struct {
	dir  string
	cert *x509.Certificate
	key  *ecdsa.PrivateKey

	mu   sync.Mutex
	next int64
}

// NewCA creates a CA valid for an hour around now and writes ca.pem.
func NewCA(t testing.TB) *CA {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{
		SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "grapnel test CA"},
		NotBefore: clock.Real().Now().Add(-time.Hour), NotAfter: clock.Real().Now().Add(time.Hour),
		IsCA: true, BasicConstraintsValid: true, KeyUsage: x509.KeyUsageCertSign,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	cert, err := x509.ParseCertificate(der)
	if err != nil {
		t.Fatal(err)
	}
	ca := &CA{dir: t.TempDir(), cert: cert, key: key, next: 2}
	writePEM(t, filepath.Join(ca.dir, "ca.pem"), "CERTIFICATE", der, 0o644)
	return ca
}

// Issue writes a certificate and key named file for the SAN names, usable
// by a server and a client, and returns the files to load them with.
func (ca *CA) Issue(t testing.TB, file string, names ...string) rpc.TLSFiles {
	t.Helper()
	return ca.issue(t, file, nil, names)
}

// IssueIdentity writes a certificate naming one Grapnel identity (a
// grapnel://ROLE/NAME URI SAN) plus the DNS names, as `grapnel certs`
// does: a replica's certificate also needs identity.ServerSAN.
func (ca *CA) IssueIdentity(t testing.TB, file string, role identity.Role, name string, dnsNames ...string) rpc.TLSFiles {
	t.Helper()
	return ca.issue(t, file, []*url.URL{identity.URI(role, name)}, dnsNames)
}

func (ca *CA) issue(t testing.TB, file string, uris []*url.URL, names []string) rpc.TLSFiles {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	ca.mu.Lock()
	serial := ca.next
	ca.next++
	ca.mu.Unlock()
	tmpl := &x509.Certificate{
		SerialNumber: big.NewInt(serial), Subject: pkix.Name{CommonName: file}, DNSNames: names, URIs: uris,
		NotBefore: clock.Real().Now().Add(-time.Hour), NotAfter: clock.Real().Now().Add(time.Hour),
		KeyUsage:    x509.KeyUsageDigitalSignature,
		ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth, x509.ExtKeyUsageClientAuth},
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, ca.cert, &key.PublicKey, ca.key)
	if err != nil {
		t.Fatal(err)
	}
	keyDER, err := x509.MarshalPKCS8PrivateKey(key)
	if err != nil {
		t.Fatal(err)
	}
	f := rpc.TLSFiles{CA: filepath.Join(ca.dir, "ca.pem"), Cert: filepath.Join(ca.dir, file+".pem"), Key: filepath.Join(ca.dir, file+"-key.pem")}
	writePEM(t, f.Cert, "CERTIFICATE", der, 0o644)
	writePEM(t, f.Key, "PRIVATE KEY", keyDER, 0o600)
	return f
}

func writePEM(t testing.TB, path, typ string, der []byte, perm os.FileMode) {
	t.Helper()
	if err := os.WriteFile(path, pem.EncodeToMemory(&pem.Block{Type: typ, Bytes: der}), perm); err != nil {
		t.Fatal(err)
	}
}

// Pool is a pool holding the CA's certificate, as a replica's ca.pem
// gives it.
func (ca *CA) Pool() *x509.CertPool {
	p := x509.NewCertPool()
	p.AddCert(ca.cert)
	return p
}

// Leaf reads the certificate of the files f.
func Leaf(t testing.TB, f rpc.TLSFiles) *x509.Certificate {
	t.Helper()
	data, err := os.ReadFile(f.Cert)
	if err != nil {
		t.Fatal(err)
	}
	b, _ := pem.Decode(data)
	if b == nil {
		t.Fatalf("%s holds no PEM block", f.Cert)
	}
	c, err := x509.ParseCertificate(b.Bytes)
	if err != nil {
		t.Fatal(err)
	}
	return c
}
