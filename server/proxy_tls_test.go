package server

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"errors"
	"math/big"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"

	"github.com/grapnel-io/grapnel/rpc"
	"github.com/grapnel-io/grapnel/rpc/grpcapi"
	"github.com/grapnel-io/grapnel/rpc/proxy"
)

// certAuthority issues throwaway certificates into a temp dir.
type certAuthority struct {
	dir  string
	cert *x509.Certificate
	key  *ecdsa.PrivateKey
	next int64
}

func newCertAuthority(t *testing.T) *certAuthority {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{
		SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "proxy test CA"},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour),
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
	ca := &certAuthority{dir: t.TempDir(), cert: cert, key: key, next: 2}
	savePEM(t, filepath.Join(ca.dir, "ca.pem"), "CERTIFICATE", der, 0o644)
	return ca
}

// issue writes a certificate for the SAN names, usable as server and
// client, and returns the files to load it with.
func (ca *certAuthority) issue(t *testing.T, file string, names ...string) rpc.TLSFiles {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{
		SerialNumber: big.NewInt(ca.next), Subject: pkix.Name{CommonName: file}, DNSNames: names,
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour),
		KeyUsage:    x509.KeyUsageDigitalSignature,
		ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth, x509.ExtKeyUsageClientAuth},
	}
	ca.next++
	der, err := x509.CreateCertificate(rand.Reader, tmpl, ca.cert, &key.PublicKey, ca.key)
	if err != nil {
		t.Fatal(err)
	}
	keyDER, err := x509.MarshalPKCS8PrivateKey(key)
	if err != nil {
		t.Fatal(err)
	}
	f := rpc.TLSFiles{CA: filepath.Join(ca.dir, "ca.pem"), Cert: filepath.Join(ca.dir, file+".pem"), Key: filepath.Join(ca.dir, file+"-key.pem")}
	savePEM(t, f.Cert, "CERTIFICATE", der, 0o644)
	savePEM(t, f.Key, "PRIVATE KEY", keyDER, 0o600)
	return f
}

func savePEM(t *testing.T, path, typ string, der []byte, perm os.FileMode) {
	t.Helper()
	if err := os.WriteFile(path, pem.EncodeToMemory(&pem.Block{Type: typ, Bytes: der}), perm); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(path, perm); err != nil {
		t.Fatal(err)
	}
}

// tlsAgentStream opens an agent stream to addr over mutual TLS with the
// client files f and the outgoing metadata md, and sends the AgentHello.
func tlsAgentStream(t *testing.T, addr string, f rpc.TLSFiles, name string, md ...string) rawClient {
	t.Helper()
	cfg, err := rpc.ClientTLSConfig(f, rpc.ServerName)
	if err != nil {
		t.Fatal(err)
	}
	cc, err := grpc.NewClient(addr, grpc.WithTransportCredentials(credentials.NewTLS(cfg)))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cc.Close() })
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	if len(md) > 0 {
		ctx = metadata.AppendToOutgoingContext(ctx, md...)
	}
	st, err := grpcapi.NewAgentConnectionClient(cc).ConnectAgent(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if err := st.Send(agentHello(name, rpc.ProtocolVersion)); err != nil {
		t.Fatal(err)
	}
	return st
}

// Over mutual TLS the follower proxies with its replica certificate and
// forwards the agent's certificate names; the leader checks the agent name
// against those, and believes forwarded names from replicas only.
func TestProxyForwardsCertificateNames(t *testing.T) {
	ca := newCertAuthority(t)
	replicaFiles := ca.issue(t, "replica", rpc.ServerName)
	agentA := ca.issue(t, "agent-a", "agent_A")

	rs := newReplicaSet(t, 3, 0)
	rs.tls = &replicaFiles
	for _, r := range rs.reps {
		r.start()
	}
	l, f := rs.leader(), rs.follower()

	t.Run("the agent named in its certificate, through a follower", func(t *testing.T) {
		st := tlsAgentStream(t, f.addr, agentA, "agent_A")
		m, err := st.Recv()
		if err != nil || m.GetServerHello() == nil {
			t.Fatalf("got %v, %v; want the ServerHello", m, err)
		}
		if f.pool.Len() != 1 {
			t.Fatal("the stream was not proxied")
		}
	})
	t.Run("another agent name, through a follower", func(t *testing.T) {
		err := streamEnd(t, tlsAgentStream(t, f.addr, agentA, "agent_B"), 10*time.Second)
		if status.Code(err) != codes.Unauthenticated || !strings.Contains(err.Error(), "agent_B") {
			t.Fatalf("err = %v, want Unauthenticated about agent_B", err)
		}
	})
	t.Run("forwarded names forged by an agent", func(t *testing.T) {
		st := tlsAgentStream(t, l.addr, agentA, "agent_B", proxy.ForwardedByKey, f.id, proxy.ForwardedNamesKey, "agent_B")
		err := streamEnd(t, st, 10*time.Second)
		if status.Code(err) != codes.Unauthenticated || !errors.Is(rpc.FromStatus(err), rpc.ErrUnauthenticated) ||
			!strings.Contains(err.Error(), proxy.ForwardedNamesKey) {
			t.Fatalf("err = %v, want Unauthenticated about %s", err, proxy.ForwardedNamesKey)
		}
	})
}
