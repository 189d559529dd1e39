package certs

import (
	"crypto/x509"
	"encoding/pem"
	"errors"
	"os"
	"path/filepath"
	"slices"
	"testing"
	"time"

	"github.com/grapnel-io/grapnel/internal/identity"
)

var now = time.Date(2026, 11, 26, 12, 0, 0, 0, time.UTC)

func readCert(t *testing.T, path string) *x509.Certificate {
	t.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	b, _ := pem.Decode(data)
	c, err := x509.ParseCertificate(b.Bytes)
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// Requirement (issue 17, point 3): each role's certificate names its
// identity, verifies against the CA, and carries the DNS names upstream
// Ankaios expects: ank-server for a replica, the agent name for an agent.
func TestIssueEveryRole(t *testing.T) {
	dir := t.TempDir()
	ca := filepath.Join(dir, "ca")
	if err := NewCA(ca, now, 48*time.Hour); err != nil {
		t.Fatal(err)
	}
	pool := x509.NewCertPool()
	pool.AddCert(readCert(t, filepath.Join(ca, CACert)))
	for _, tc := range []struct {
		role identity.Role
		name string
		dns  []string
	}{
		{identity.Replica, "r1", []string{identity.ServerSAN}},
		{identity.Agent, "agent_A", []string{"agent_A"}},
		{identity.Operator, "alice", nil},
		{identity.Commander, "ota", nil},
	} {
		t.Run(tc.role.String(), func(t *testing.T) {
			out := filepath.Join(dir, tc.name)
			if err := Issue(ca, out, Request{Role: tc.role, Name: tc.name, Validity: 24 * time.Hour}, now); err != nil {
				t.Fatal(err)
			}
			c := readCert(t, filepath.Join(out, Cert))
			id, err := identity.FromCert(c, identity.None)
			if err != nil || id.Role != tc.role || id.Name != tc.name {
				t.Fatalf("identity %+v, %v", id, err)
			}
			if !slices.Equal(c.DNSNames, tc.dns) {
				t.Fatalf("DNS names %v, want %v", c.DNSNames, tc.dns)
			}
			if _, err := c.Verify(x509.VerifyOptions{Roots: pool, CurrentTime: now, KeyUsages: []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth}}); err != nil {
				t.Fatal(err)
			}
			if info, err := os.Stat(filepath.Join(out, Key)); err != nil || info.Mode().Perm() != 0o600 {
				t.Fatalf("key: %v %v", info.Mode(), err)
			}
		})
	}
	for _, tc := range []struct {
		name string
		req  Request
	}{
		{"a wildcard name", Request{Role: identity.Agent, Name: "*", Validity: time.Hour}},
		{"ank-server as a name", Request{Role: identity.Agent, Name: identity.ServerSAN, Validity: time.Hour}},
		{"no role", Request{Name: "x", Validity: time.Hour}},
		{"longer than the CA", Request{Role: identity.Agent, Name: "x", Validity: 72 * time.Hour}},
		{"no validity", Request{Role: identity.Agent, Name: "x"}},
	} {
		if err := Issue(ca, filepath.Join(dir, "bad"), tc.req, now); err == nil {
			t.Errorf("%s: issued", tc.name)
		}
	}
	if err := Issue(ca, filepath.Join(dir, "r1"), Request{Role: identity.Replica, Name: "r1", Validity: time.Hour}, now); !errors.Is(err, ErrExists) {
		t.Fatalf("overwriting a key: %v, want ErrExists", err)
	}
}
