// Package pki makes the certificates and gossip keys a secured chaos
// campaign runs with: one CA; a replica certificate per replica
// (grapnel://replica/ID and the DNS name ank-server that clients verify),
// an agent certificate per agent, an operator certificate for the
// campaign's own clients and observer; and, for the intruder, an agent
// certificate of a name no agent has (the wrong role for everything it
// tries) and a certificate from a CA nobody trusts. Keys are written 0600,
// certificates 0644, as the programs require.
package pki

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
	"sync"
	"time"

	"github.com/grapnel-io/grapnel/internal/identity"
	"github.com/grapnel-io/grapnel/rpc"
)

// Set is the files of one campaign.
type Set struct {
	Dir string
	// CA is the trusted CA certificate's file.
	CA string
	// Replicas, Agents and Operator are by name.
	Replicas map[string]rpc.TLSFiles
	Agents   map[string]rpc.TLSFiles
	Operator rpc.TLSFiles
	// WrongRole is an agent certificate of the name IntruderAgent, signed
	// by the CA; Foreign is signed by another CA.
	WrongRole rpc.TLSFiles
	Foreign   rpc.TLSFiles
	// GossipKey is the replicas' gossip key file.
	GossipKey string

	ca       *authority
	validity time.Duration
	mu       sync.Mutex // guards Replicas after Make
}

// IntruderAgent is the agent name of the intruder's certificate.
const IntruderAgent = "intruder_agent"

type authority struct {
	cert *x509.Certificate
	key  *ecdsa.PrivateKey
	file string
}

// Make writes a Set into dir for the replica and agent names.
func Make(dir string, replicas, agents []string, validity time.Duration) (*Set, error) {
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, err
	}
	ca, err := newAuthority(dir, "ca", validity)
	if err != nil {
		return nil, err
	}
	other, err := newAuthority(dir, "foreign-ca", validity)
	if err != nil {
		return nil, err
	}
	s := &Set{Dir: dir, CA: ca.file, Replicas: map[string]rpc.TLSFiles{}, Agents: map[string]rpc.TLSFiles{}, ca: ca, validity: validity}
	for _, r := range replicas {
		if s.Replicas[r], err = ca.issue(dir, "replica-"+r, identity.Replica, r, validity, identity.ServerSAN); err != nil {
			return nil, err
		}
	}
	for _, a := range agents {
		if s.Agents[a], err = ca.issue(dir, "agent-"+a, identity.Agent, a, validity, a); err != nil {
			return nil, err
		}
	}
	if s.Operator, err = ca.issue(dir, "operator", identity.Operator, "chaos", validity); err != nil {
		return nil, err
	}
	if s.WrongRole, err = ca.issue(dir, "wrong-role", identity.Agent, IntruderAgent, validity, IntruderAgent); err != nil {
		return nil, err
	}
	if s.Foreign, err = other.issue(dir, "foreign", identity.Operator, "intruder", validity); err != nil {
		return nil, err
	}
	s.GossipKey = filepath.Join(dir, "gossip.key")
	key := make([]byte, 32)
	if _, err := rand.Read(key); err != nil {
		return nil, err
	}
	if err := os.WriteFile(s.GossipKey, []byte(base64.StdEncoding.EncodeToString(key)+"\n"), 0o600); err != nil {
		return nil, err
	}
	return s, nil
}

// Replica returns the files of replica name, issuing them on first use:
// a replaced replica comes back under a new name.
func (s *Set) Replica(name string) (rpc.TLSFiles, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if f, ok := s.Replicas[name]; ok {
		return f, nil
	}
	f, err := s.ca.issue(s.Dir, "replica-"+name, identity.Replica, name, s.validity, identity.ServerSAN)
	if err != nil {
		return rpc.TLSFiles{}, err
	}
	s.Replicas[name] = f
	return f, nil
}

// ServerFlags are the TLS and gossip key flags of replica name, as
// grapnel-server takes them.
func (s *Set) ServerFlags(name string) ([]string, error) {
	f, err := s.Replica(name)
	if err != nil {
		return nil, err
	}
	return []string{"--ca_pem", f.CA, "--crt_pem", f.Cert, "--key_pem", f.Key, "--gossip-key-file", s.GossipKey}, nil
}

func newAuthority(dir, name string, validity time.Duration) (*authority, error) {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, err
	}
	now := time.Now()
	tmpl := &x509.Certificate{
		SerialNumber: serial(), Subject: pkix.Name{CommonName: "grapnel chaos " + name},
		NotBefore: now.Add(-time.Hour), NotAfter: now.Add(validity),
		IsCA: true, BasicConstraintsValid: true, KeyUsage: x509.KeyUsageCertSign,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		return nil, err
	}
	cert, err := x509.ParseCertificate(der)
	if err != nil {
		return nil, err
	}
	file := filepath.Join(dir, name+".pem")
	if err := writePEM(file, "CERTIFICATE", der, 0o644); err != nil {
		return nil, err
	}
	return &authority{cert: cert, key: key, file: file}, nil
}

// issue writes name.pem and name-key.pem for one identity.
func (a *authority) issue(dir, name string, role identity.Role, id string, validity time.Duration, dns ...string) (rpc.TLSFiles, error) {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return rpc.TLSFiles{}, err
	}
	now := time.Now()
	tmpl := &x509.Certificate{
		SerialNumber: serial(), Subject: pkix.Name{CommonName: id},
		DNSNames: dns, URIs: []*url.URL{identity.URI(role, id)},
		NotBefore: now.Add(-time.Hour), NotAfter: now.Add(validity),
		KeyUsage:    x509.KeyUsageDigitalSignature,
		ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth, x509.ExtKeyUsageClientAuth},
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, a.cert, &key.PublicKey, a.key)
	if err != nil {
		return rpc.TLSFiles{}, fmt.Errorf("certificate %s: %w", name, err)
	}
	keyDER, err := x509.MarshalPKCS8PrivateKey(key)
	if err != nil {
		return rpc.TLSFiles{}, err
	}
	f := rpc.TLSFiles{CA: a.file, Cert: filepath.Join(dir, name+".pem"), Key: filepath.Join(dir, name+"-key.pem")}
	if err := writePEM(f.Cert, "CERTIFICATE", der, 0o644); err != nil {
		return rpc.TLSFiles{}, err
	}
	return f, writePEM(f.Key, "PRIVATE KEY", keyDER, 0o600)
}

func serial() *big.Int {
	n, err := rand.Int(rand.Reader, new(big.Int).Lsh(big.NewInt(1), 62))
	if err != nil {
		panic(err)
	}
	return n.Add(n, big.NewInt(1))
}

func writePEM(path, typ string, der []byte, perm os.FileMode) error {
	if err := os.WriteFile(path, pem.EncodeToMemory(&pem.Block{Type: typ, Bytes: der}), perm); err != nil {
		return err
	}
	return os.Chmod(path, perm)
}
