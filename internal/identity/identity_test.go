package identity

import (
	"crypto/x509"
	"crypto/x509/pkix"
	"errors"
	"net/url"
	"slices"
	"testing"
)

func cert(cn string, dns []string, uris ...string) *x509.Certificate {
	c := &x509.Certificate{Subject: pkix.Name{CommonName: cn}, DNSNames: dns}
	for _, u := range uris {
		p, err := url.Parse(u)
		if err != nil {
			panic(err)
		}
		c.URIs = append(c.URIs, p)
	}
	return c
}

func TestFromCert(t *testing.T) {
	cases := []struct {
		name    string
		cert    *x509.Certificate
		untyped Role
		want    Identity
		bad     bool
	}{
		{name: "replica", cert: cert("r1", []string{ServerSAN}, "grapnel://replica/r1"),
			want: Identity{Role: Replica, Name: "r1", Names: []string{"r1"}, Typed: true}},
		{name: "agent", cert: cert("a", []string{"agent_A"}, "grapnel://agent/agent_A"),
			want: Identity{Role: Agent, Name: "agent_A", Names: []string{"agent_A"}, Typed: true}},
		{name: "operator", cert: cert("alice", nil, "grapnel://operator/alice"),
			want: Identity{Role: Operator, Name: "alice", Names: []string{"alice"}, Typed: true}},
		{name: "commander", cert: cert("ota", nil, "grapnel://commander/ota-client"),
			want: Identity{Role: Commander, Name: "ota-client", Names: []string{"ota-client"}, Typed: true}},
		{name: "other schemes are ignored", cert: cert("x", nil, "spiffe://example/x", "grapnel://agent/a1"),
			want: Identity{Role: Agent, Name: "a1", Names: []string{"a1"}, Typed: true}},
		{name: "two identities are refused", cert: cert("x", nil, "grapnel://agent/a1", "grapnel://operator/a1"), bad: true},
		{name: "unknown role", cert: cert("x", nil, "grapnel://root/x"), bad: true},
		{name: "wildcard name", cert: cert("x", nil, "grapnel://agent/*"), bad: true},
		{name: "empty name", cert: cert("x", nil, "grapnel://agent/"), bad: true},
		{name: "nested path", cert: cert("x", nil, "grapnel://agent/a/b"), bad: true},
		{name: "untyped agent: DNS names, never ank-server or a wildcard", cert: cert("x", []string{ServerSAN, "*", "agent_B", "*.car"}), untyped: Agent,
			want: Identity{Role: Agent, Name: "agent_B", Names: []string{"agent_B"}}},
		{name: "untyped refused", cert: cert("x", []string{"agent_B"}), untyped: None, bad: true},
		{name: "untyped commander named by CN", cert: cert("ank-cli", nil), untyped: Commander,
			want: Identity{Role: Commander, Name: "ank-cli"}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			got, err := FromCert(c.cert, c.untyped)
			if c.bad {
				if !errors.Is(err, ErrBadIdentity) {
					t.Fatalf("FromCert = %+v, %v; want ErrBadIdentity", got, err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if got.Role != c.want.Role || got.Name != c.want.Name || got.Typed != c.want.Typed || !slices.Equal(got.Names, c.want.Names) {
				t.Fatalf("FromCert = %+v, want %+v", got, c.want)
			}
		})
	}
}

func TestURIRoundTrip(t *testing.T) {
	for _, r := range []Role{Replica, Agent, Operator, Commander} {
		u := URI(r, "n-1")
		got, err := FromCert(&x509.Certificate{URIs: []*url.URL{u}}, None)
		if err != nil || got.Role != r || got.Name != "n-1" {
			t.Fatalf("%s: FromCert(%s) = %+v, %v", r, u, got, err)
		}
		if p, err := ParseRole(r.String()); err != nil || p != r {
			t.Fatalf("ParseRole(%s) = %v, %v", r, p, err)
		}
	}
	if _, err := ParseRole("none"); err == nil {
		t.Fatal("ParseRole(none) must fail: none is not a role a certificate may name")
	}
}

func TestIs(t *testing.T) {
	id := Identity{Role: Agent, Name: "a", Names: []string{"a", "b"}}
	if !id.Is(Agent, "b") || id.Is(Agent, "c") || id.Is(Operator, "a") {
		t.Fatalf("Is wrong for %+v", id)
	}
	if !Insecure.IsInsecure() {
		t.Fatal("Insecure must be insecure")
	}
}
