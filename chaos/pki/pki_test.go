package pki

import (
	"crypto/x509"
	"encoding/pem"
	"os"
	"testing"
	"time"

	"github.com/grapnel-io/grapnel/internal/identity"
	"github.com/grapnel-io/grapnel/rpc"
)

func TestMakeGivesEachRoleItsIdentity(t *testing.T) {
	s, err := Make(t.TempDir(), []string{"r1", "r2"}, []string{"agent_h1"}, time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		files rpc.TLSFiles
		role  identity.Role
		name  string
	}{
		{s.Replicas["r1"], identity.Replica, "r1"}, {s.Replicas["r2"], identity.Replica, "r2"},
		{s.Agents["agent_h1"], identity.Agent, "agent_h1"}, {s.Operator, identity.Operator, "chaos"},
		{s.WrongRole, identity.Agent, IntruderAgent}, {s.StrayReplica, identity.Replica, IntruderReplica},
		{s.Commander, identity.Commander, IntruderCommander}, {s.Impostor, identity.Commander, OperatorName},
	} {
		if err := rpc.CheckPEMPermissions(c.files); err != nil {
			t.Fatal(err)
		}
		if _, err := rpc.ServerTLSConfig(c.files); err != nil {
			t.Fatalf("%s: %v", c.files.Cert, err)
		}
		cert := readCert(t, c.files.Cert)
		id, err := identity.FromCert(cert, identity.None)
		if err != nil || id.Role != c.role || id.Name != c.name {
			t.Fatalf("%s: identity %+v, %v; want %s %s", c.files.Cert, id, err, c.role, c.name)
		}
		pool := x509.NewCertPool()
		pool.AddCert(readCert(t, s.CA))
		if _, err := cert.Verify(x509.VerifyOptions{Roots: pool, KeyUsages: []x509.ExtKeyUsage{x509.ExtKeyUsageAny}}); err != nil {
			t.Fatalf("%s does not verify against the CA: %v", c.files.Cert, err)
		}
	}
	pool := x509.NewCertPool()
	pool.AddCert(readCert(t, s.CA))
	if _, err := readCert(t, s.Foreign.Cert).Verify(x509.VerifyOptions{Roots: pool, KeyUsages: []x509.ExtKeyUsage{x509.ExtKeyUsageAny}}); err == nil {
		t.Fatal("the foreign certificate verifies against the campaign's CA")
	}
	late, err := s.Replica("r1g1")
	if err != nil {
		t.Fatal(err)
	}
	if id, err := identity.FromCert(readCert(t, late.Cert), identity.None); err != nil || id.Role != identity.Replica || id.Name != "r1g1" {
		t.Fatalf("a replica issued later: %+v, %v", id, err)
	}
	if again, _ := s.Replica("r1g1"); again != late {
		t.Fatal("a second call issued another certificate")
	}
	if info, err := os.Stat(s.GossipKey); err != nil || info.Mode().Perm() != 0o600 {
		t.Fatalf("gossip key: %v, %v", info, err)
	}
	if dns := readCert(t, s.Replicas["r1"].Cert).DNSNames; len(dns) != 1 || dns[0] != identity.ServerSAN {
		t.Fatalf("a replica certificate has DNS names %v, want %s only", dns, identity.ServerSAN)
	}
}

func readCert(t *testing.T, path string) *x509.Certificate {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	blk, _ := pem.Decode(b)
	c, err := x509.ParseCertificate(blk.Bytes)
	if err != nil {
		t.Fatal(err)
	}
	return c
}
