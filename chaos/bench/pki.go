package bench

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/base64"
	"encoding/pem"
	"fmt"
	"math/big"
	"net/url"
	"os"
	"path/filepath"
	"time"

	"github.com/grapnel-io/grapnel/internal/identity"
	"github.com/grapnel-io/grapnel/rpc"
)

// PKI is a throwaway CA in a directory with the files a secured cluster
// needs: one replica certificate per replica, an operator certificate for
// the bench's clients, and the replicas' gossip key.
type PKI struct {
	Dir           string
	GossipKeyFile string
	Client        rpc.TLSFiles
	ca            *x509.Certificate
	key           *ecdsa.PrivateKey
	serial        int64
}

// NewPKI writes the CA, the client certificate and the gossip key into
// dir.
func NewPKI(dir string) (*PKI, error) {
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, err
	}
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, err
	}
	now := time.Now()
	tmpl := &x509.Certificate{
		SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "grapnel bench CA"},
		NotBefore: now.Add(-time.Hour), NotAfter: now.Add(24 * time.Hour),
		IsCA: true, BasicConstraintsValid: true, KeyUsage: x509.KeyUsageCertSign,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		return nil, err
	}
	ca, err := x509.ParseCertificate(der)
	if err != nil {
		return nil, err
	}
	p := &PKI{Dir: dir, ca: ca, key: key, serial: 1}
	if err := writePEM(filepath.Join(dir, "ca.pem"), "CERTIFICATE", der, 0o644); err != nil {
		return nil, err
	}
	if p.Client, err = p.Issue("bench-client", identity.Operator, "bench"); err != nil {
		return nil, err
	}
	gk := make([]byte, 32)
	if _, err := rand.Read(gk); err != nil {
		return nil, err
	}
	p.GossipKeyFile = filepath.Join(dir, "gossip.key")
	if err := os.WriteFile(p.GossipKeyFile, []byte(base64.StdEncoding.EncodeToString(gk)+"\n"), 0o600); err != nil {
		return nil, err
	}
	return p, nil
}

// Issue writes a certificate for role/name (replicas also get the
// ank-server SAN Ankaios clients verify).
func (p *PKI) Issue(file string, role identity.Role, name string) (rpc.TLSFiles, error) {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return rpc.TLSFiles{}, err
	}
	p.serial++
	now := time.Now()
	tmpl := &x509.Certificate{
		SerialNumber: big.NewInt(p.serial), Subject: pkix.Name{CommonName: file},
		URIs: []*url.URL{identity.URI(role, name)}, NotBefore: now.Add(-time.Hour), NotAfter: now.Add(24 * time.Hour),
		KeyUsage:    x509.KeyUsageDigitalSignature,
		ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth, x509.ExtKeyUsageClientAuth},
	}
	if role == identity.Replica {
		tmpl.DNSNames = []string{identity.ServerSAN}
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, p.ca, &key.PublicKey, p.key)
	if err != nil {
		return rpc.TLSFiles{}, err
	}
	keyDER, err := x509.MarshalPKCS8PrivateKey(key)
	if err != nil {
		return rpc.TLSFiles{}, err
	}
	f := rpc.TLSFiles{CA: filepath.Join(p.Dir, "ca.pem"), Cert: filepath.Join(p.Dir, file+".pem"), Key: filepath.Join(p.Dir, file+"-key.pem")}
	if err := writePEM(f.Cert, "CERTIFICATE", der, 0o644); err != nil {
		return rpc.TLSFiles{}, err
	}
	return f, writePEM(f.Key, "PRIVATE KEY", keyDER, 0o600)
}

// ServerFlags are the TLS and gossip key flags of replica name.
func (p *PKI) ServerFlags(name string) ([]string, error) {
	f, err := p.Issue("replica-"+name, identity.Replica, name)
	if err != nil {
		return nil, err
	}
	return []string{"--ca_pem", f.CA, "--crt_pem", f.Cert, "--key_pem", f.Key, "--gossip-key-file", p.GossipKeyFile}, nil
}

func writePEM(path, typ string, der []byte, perm os.FileMode) error {
	if err := os.WriteFile(path, pem.EncodeToMemory(&pem.Block{Type: typ, Bytes: der}), perm); err != nil {
		return fmt.Errorf("pki: %w", err)
	}
	return nil
}
