package identity

import (
	"crypto/x509"
	"errors"
	"fmt"
	"net/url"
	"regexp"
	"slices"
	"strings"
)

// Scheme is the URI scheme of Grapnel identity SANs.
const Scheme = "grapnel"

// ServerSAN is the DNS SAN every replica's certificate carries because
// Ankaios clients verify it; it is never an agent name.
const ServerSAN = "ank-server"

// Role is what a certificate may do; the rights of each are the server's
// (rpc/authz).
type Role uint8

// The roles. None marks the insecure mode (no certificate at all) or a
// certificate that names nothing usable.
const (
	None Role = iota
	Replica
	Agent
	Operator
	Commander
)

var roleNames = [...]string{None: "none", Replica: "replica", Agent: "agent", Operator: "operator", Commander: "commander"}

func (r Role) String() string {
	if int(r) < len(roleNames) {
		return roleNames[r]
	}
	return fmt.Sprintf("role(%d)", uint8(r))
}

// ParseRole reads a role name as written in a URI SAN or a flag.
func ParseRole(s string) (Role, error) {
	for r, n := range roleNames {
		if r != int(None) && n == s {
			return Role(r), nil
		}
	}
	return None, fmt.Errorf("%w: %q is not a role (replica, agent, operator or commander)", ErrBadIdentity, s)
}

// ErrBadIdentity marks a certificate whose identity cannot be read.
var ErrBadIdentity = errors.New("bad certificate identity")

// namePattern is what a NAME may be: an Ankaios agent or workload name,
// which a Raft server id of ours also is.
var namePattern = regexp.MustCompile(`^[A-Za-z0-9_-]{1,63}$`)

// ValidName reports whether name may be an identity's NAME.
func ValidName(name string) bool { return namePattern.MatchString(name) }

// Identity is one verified peer.
type Identity struct {
	Role Role
	// Name is the replica id, the operator's or commander's name, or the
	// agent name. An untyped agent certificate may allow several agent
	// names; Names holds them all and Name the first.
	Name  string
	Names []string
	// Typed is set when the certificate carried a grapnel:// URI.
	Typed bool
	// Serial is the certificate's serial number (Serial), "" for the
	// insecure mode: what a revocation names.
	Serial string
	// Via names the replica that proxied the call and its certificate
	// (authz sets it for a forwarded identity), so that a log shows the
	// certificate the call really came with next to the one it acts as.
	Via string
}

// Serial is how a certificate's serial number is written in identities,
// revocations and logs: lower-case hex.
func Serial(c *x509.Certificate) string {
	if c == nil || c.SerialNumber == nil {
		return ""
	}
	return c.SerialNumber.Text(16)
}

// Insecure is the identity of every peer when TLS is off: nothing is
// verified, and the server allows every call.
var Insecure = Identity{}

// IsInsecure reports whether no certificate was verified.
func (i Identity) IsInsecure() bool { return i.Role == None }

func (i Identity) String() string {
	if i.IsInsecure() {
		return "an unauthenticated peer"
	}
	if !i.Typed {
		return fmt.Sprintf("%s %s (untyped certificate)", i.Role, strings.Join(i.Names, ","))
	}
	return fmt.Sprintf("%s %s", i.Role, i.Name)
}

// Key names the identity where its name alone would be ambiguous: role
// and name, "operator/alice". A lock's owner and the history's requester
// are keys, so that a commander certificate named alice is not operator
// alice (a CA may issue both).
func (i Identity) Key() string { return i.Role.String() + "/" + i.Name }

// Same reports whether i and o are the same identity: role, names and
// kind of certificate (Serial and Via aside).
func (i Identity) Same(o Identity) bool {
	return i.Role == o.Role && i.Name == o.Name && i.Typed == o.Typed && slices.Equal(i.Names, o.Names)
}

// Is reports whether the identity is role r named name.
func (i Identity) Is(r Role, name string) bool {
	if i.Role != r {
		return false
	}
	for _, n := range i.Names {
		if n == name {
			return true
		}
	}
	return false
}

// URI is the SAN that names role r and name in a certificate.
func URI(r Role, name string) *url.URL {
	return &url.URL{Scheme: Scheme, Host: r.String(), Path: "/" + name}
}

// FromCert reads the identity of a verified certificate. A certificate
// with one grapnel:// URI SAN has that identity; one with several, or a
// malformed one, is refused. An untyped certificate gets role untyped
// (None refuses it) with its DNS SANs as agent names, except ServerSAN
// and wildcards, which are never agent names.
func FromCert(c *x509.Certificate, untyped Role) (Identity, error) {
	var found []Identity
	for _, u := range c.URIs {
		if u.Scheme != Scheme {
			continue
		}
		r, err := ParseRole(u.Host)
		if err != nil {
			return Identity{}, fmt.Errorf("%w: URI SAN %s: %w", ErrBadIdentity, u, err)
		}
		name := strings.TrimPrefix(u.Path, "/")
		if !namePattern.MatchString(name) || u.RawQuery != "" || u.Fragment != "" || u.User != nil {
			return Identity{}, fmt.Errorf("%w: URI SAN %s: the name must be 1 to 63 letters, digits, '_' or '-'", ErrBadIdentity, u)
		}
		found = append(found, Identity{Role: r, Name: name, Names: []string{name}, Typed: true, Serial: Serial(c)})
	}
	switch {
	case len(found) == 1:
		return found[0], nil
	case len(found) > 1:
		return Identity{}, fmt.Errorf("%w: certificate %q names %d identities; one certificate is one identity", ErrBadIdentity, c.Subject.CommonName, len(found))
	case untyped == None:
		return Identity{}, fmt.Errorf("%w: certificate %q has no %s:// URI SAN and untyped certificates are refused", ErrBadIdentity, c.Subject.CommonName, Scheme)
	}
	id := Identity{Role: untyped, Serial: Serial(c)}
	for _, n := range c.DNSNames {
		if n == ServerSAN || strings.Contains(n, "*") || !namePattern.MatchString(n) {
			continue
		}
		id.Names = append(id.Names, n)
	}
	if len(id.Names) > 0 {
		id.Name = id.Names[0]
	} else {
		id.Name = c.Subject.CommonName
	}
	return id, nil
}

// FromChains reads the identity of a TLS peer from its verified chains;
// it is Insecure when there are none (no TLS).
func FromChains(chains [][]*x509.Certificate, untyped Role) (Identity, error) {
	if len(chains) == 0 || len(chains[0]) == 0 {
		return Identity{}, fmt.Errorf("%w: no verified certificate", ErrBadIdentity)
	}
	return FromCert(chains[0][0], untyped)
}
