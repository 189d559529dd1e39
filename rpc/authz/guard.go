package authz

import (
	"context"
	"crypto/x509"
	"encoding/base64"
	"fmt"
	"net"
	"net/netip"
	"strings"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/peer"

	"github.com/grapnel-io/grapnel/internal/errs"
	"github.com/grapnel-io/grapnel/internal/identity"
	"github.com/grapnel-io/grapnel/internal/tlsreload"
	"github.com/grapnel-io/grapnel/rpc"
	"github.com/grapnel-io/grapnel/rpc/grapnelpb"
	"github.com/grapnel-io/grapnel/rpc/grpcapi"
	"github.com/grapnel-io/grapnel/rpc/wire"
)

// Guard checks every call of a gRPC server against the table. Untyped is
// the role given to certificates without a grapnel:// URI (identity.None
// refuses them); Refused, if set, is told of every refusal (the server
// logs it, rate-limited, and counts it).
//
// A call a follower proxied acts as the client the follower forwarded
// (wire.ForwardedIdentityKey). Holding a replica's certificate must not
// be enough to act as anyone: the guard believes the header only from a
// replica that Member says is in the cluster's configuration, whose
// certificate Revoked does not name, on a connection from that member's
// own address (its proxy dials from its Raft address), that names itself
// as the forwarder, for a method a proxy forwards (Proxied), and only
// when the client's own certificate comes along
// (wire.ForwardedCertKey), verifies against Roots and names exactly the
// forwarded identity. A call of this replica's own (Self: its dashboard
// asks for logs as the viewer) names no forwarder and comes from
// loopback or another address of this host. Without Member or Roots no
// forwarded identity is believed.
type Guard struct {
	Untyped identity.Role
	Refused func(id identity.Identity, method string, err error)
	// Self is this replica's id.
	Self string
	// Member reports whether replica id is in the latest Raft
	// configuration, with what the guard needs to know of it.
	Member func(id string) (MemberInfo, bool)
	// Revoked says why a certificate serial is revoked ("" when it is
	// not): the serials of removed replicas' certificates.
	Revoked func(serial string) string
	// Roots is the CA pool the TLS handshake verifies clients against.
	Roots func() *x509.CertPool
}

// MemberInfo is what the guard knows of a replica of the configuration.
type MemberInfo struct {
	// Host is the host of its Raft address, where its proxy dials from.
	Host string
	// Legacy says it runs a release that forwards no client certificate
	// and the cluster version has not been raised past that release
	// (docs/upgrade.md): until then its forwarded identity is believed
	// without the certificate, under every other condition.
	Legacy bool
}

// maxForwardedCerts bounds the certificates a forwarded chain may hold;
// a client presents its leaf and perhaps an intermediate.
const maxForwardedCerts = 4

// Proxied are the methods a follower's proxy forwards to the leader: the
// Ankaios streams and the calls of leader-aware-less clients that
// server/proxy.go, plansvc.go, locksvc.go and problemssvc.go forward. A
// forwarded identity on any other method (cluster administration, say)
// is refused: no proxy sends one there.
var Proxied = map[string]bool{
	grpcapi.AgentConnection_ConnectAgent_FullMethodName:     true,
	grpcapi.CliConnection_ConnectCli_FullMethodName:         true,
	grpcapi.CommandConnection_ConnectCommand_FullMethodName: true,
	grapnelpb.Plan_DryRun_FullMethodName:                    true,
	grapnelpb.Plan_Apply_FullMethodName:                     true,
	grapnelpb.Plan_Revision_FullMethodName:                  true,
	grapnelpb.Locks_Lock_FullMethodName:                     true,
	grapnelpb.Locks_Unlock_FullMethodName:                   true,
	grapnelpb.Locks_List_FullMethodName:                     true,
	grapnelpb.Problems_List_FullMethodName:                  true,
}

type ctxKey struct{}

// withIdentity stores the identity a guard established for a call.
func withIdentity(ctx context.Context, id identity.Identity) context.Context {
	return context.WithValue(ctx, ctxKey{}, id)
}

// Identify returns the identity the call in ctx acts as: the one the
// guard stored, or, where no guard ran (a test server), read afresh. Its
// error is errs.ErrUnauthenticated or errs.ErrPermissionDenied.
func (g *Guard) Identify(ctx context.Context) (identity.Identity, error) {
	if id, ok := ctx.Value(ctxKey{}).(identity.Identity); ok {
		return id, nil
	}
	method, _ := grpc.Method(ctx)
	return g.identify(ctx, method)
}

// identify reads the peer's certificate, and for a proxied call the
// client it forwards (forwarded).
func (g *Guard) identify(ctx context.Context, method string) (identity.Identity, error) {
	p, ok := peer.FromContext(ctx)
	if !ok {
		return identity.Insecure, nil
	}
	info, ok := p.AuthInfo.(credentials.TLSInfo)
	if !ok {
		return identity.Insecure, nil
	}
	id, err := identity.FromChains(info.State.VerifiedChains, g.Untyped)
	if err != nil {
		return identity.Identity{}, fmt.Errorf("%w: %w", errs.ErrUnauthenticated, err)
	}
	if err := g.notRevoked(id); err != nil {
		return identity.Identity{}, err
	}
	fwd, ok := wire.ForwardedIdentity(ctx)
	if !ok {
		if wire.ForwardedCert(ctx) != "" {
			return identity.Identity{}, fmt.Errorf("%w: %s sent %s without %s", errs.ErrPermissionDenied, Who(id), wire.ForwardedCertKey, wire.ForwardedIdentityKey)
		}
		return id, nil
	}
	return g.forwarded(ctx, id, method, fwd)
}

// notRevoked refuses a certificate whose serial is revoked.
func (g *Guard) notRevoked(id identity.Identity) error {
	if g.Revoked == nil || id.Serial == "" {
		return nil
	}
	if why := g.Revoked(id.Serial); why != "" {
		return fmt.Errorf("%w: the certificate of %s (serial %s) is revoked: %s", errs.ErrUnauthenticated, Who(id), id.Serial, why)
	}
	return nil
}

// forwarded is the client a replica's proxy forwarded with a call to
// method, when every condition of Guard holds; by is the identity of
// the connection's own certificate.
func (g *Guard) forwarded(ctx context.Context, by identity.Identity, method, fwd string) (identity.Identity, error) {
	refuse := func(format string, a ...any) (identity.Identity, error) {
		return identity.Identity{}, fmt.Errorf("%w: %s (serial %s) may not forward %s: "+format,
			append([]any{errs.ErrPermissionDenied, Who(by), by.Serial, fwd}, a...)...)
	}
	if by.Role != identity.Replica {
		return refuse("only a replica forwards a client's identity (%s)", wire.ForwardedIdentityKey)
	}
	if g.Member == nil || g.Roots == nil {
		return refuse("this replica believes no forwarded identity")
	}
	info, member := g.Member(by.Name)
	host := info.Host
	fb := wire.ForwardedBy(ctx)
	switch {
	case !member:
		return refuse("replica %s is not in the cluster's configuration; only a member's proxy is believed", by.Name)
	case fb != by.Name && (fb != "" || by.Name != g.Self):
		return refuse("the call says it was forwarded by %q, not by the replica its certificate names", fb)
	case !Proxied[method]:
		return refuse("a proxy forwards only the Ankaios streams and the Plan, Locks and Problems calls, not %s", ShortName(method))
	}
	if from, ok := fromMember(ctx, host, fb == ""); !ok {
		return refuse("the call came from %s, not from replica %s's address %s, which its proxy dials from", from, by.Name, host)
	}
	claimed, err := Decode(fwd)
	if err != nil {
		return refuse("%v", err)
	}
	if certs := wire.ForwardedCert(ctx); certs == "" && info.Legacy && fb == by.Name {
		if claimed.Role == identity.Replica {
			return refuse("a replica is never proxied")
		}
		claimed.Via = fmt.Sprintf("%s (serial %s, a release that forwards no client certificate)", Who(by), by.Serial)
		return claimed, nil
	}
	client, err := g.forwardedCert(wire.ForwardedCert(ctx))
	if err != nil {
		return refuse("%v", err)
	}
	switch {
	case !client.Same(claimed):
		return refuse("the client certificate that came with it names %s", Who(client))
	case client.Role == identity.Replica:
		return refuse("a replica is never proxied")
	}
	if err := g.notRevoked(client); err != nil {
		return identity.Identity{}, err
	}
	client.Via = fmt.Sprintf("%s (serial %s)", Who(by), by.Serial)
	return client, nil
}

// fromMember reports whether the call in ctx came from host, a member's
// Raft address host (an IP, or a name it resolves to), or, for a call of
// this replica's own (self), from loopback too. It returns the address
// the call came from, for the refusal.
func fromMember(ctx context.Context, host string, self bool) (string, bool) {
	p, ok := peer.FromContext(ctx)
	if !ok || p.Addr == nil {
		return "an unknown address", false
	}
	ap, err := netip.ParseAddrPort(p.Addr.String())
	if err != nil {
		return p.Addr.String(), false
	}
	from := ap.Addr().Unmap()
	if self && (from.IsLoopback() || sameHost(p, from)) {
		return from.String(), true
	}
	if ip, err := netip.ParseAddr(host); err == nil {
		return from.String(), ip.Unmap() == from
	}
	rctx, cancel := context.WithTimeout(ctx, time.Second)
	defer cancel()
	ips, err := net.DefaultResolver.LookupNetIP(rctx, "ip", host)
	if err != nil {
		return from.String(), false
	}
	for _, ip := range ips {
		if ip.Unmap() == from {
			return from.String(), true
		}
	}
	return from.String(), false
}

// sameHost reports whether the connection of p came from an address of
// this host: its source is the address it reached.
func sameHost(p *peer.Peer, from netip.Addr) bool {
	if p.LocalAddr == nil {
		return false
	}
	local, err := netip.ParseAddrPort(p.LocalAddr.String())
	return err == nil && local.Addr().Unmap() == from
}

// forwardedCert verifies the client certificates a proxy forwarded
// (wire.ForwardedCertKey) as the TLS handshake verifies a client's, and
// reads their identity.
func (g *Guard) forwardedCert(text string) (identity.Identity, error) {
	if text == "" {
		return identity.Identity{}, fmt.Errorf("no client certificate came with it (%s); a proxy forwards the certificate of the client whose stream it terminated", wire.ForwardedCertKey)
	}
	parts := strings.Split(text, ",")
	if len(parts) > maxForwardedCerts {
		return identity.Identity{}, fmt.Errorf("%s holds %d certificates, at most %d", wire.ForwardedCertKey, len(parts), maxForwardedCerts)
	}
	certs := make([]*x509.Certificate, 0, len(parts))
	for i, p := range parts {
		der, err := base64.StdEncoding.DecodeString(p)
		if err != nil {
			return identity.Identity{}, fmt.Errorf("%s[%d]: not base64: %v", wire.ForwardedCertKey, i, err)
		}
		c, err := x509.ParseCertificate(der)
		if err != nil {
			return identity.Identity{}, fmt.Errorf("%s[%d]: %v", wire.ForwardedCertKey, i, err)
		}
		certs = append(certs, c)
	}
	chains, err := tlsreload.VerifyClient(certs, g.Roots())
	if err != nil {
		return identity.Identity{}, fmt.Errorf("the client certificate that came with it does not verify: %v", err)
	}
	return identity.FromChains(chains, g.Untyped)
}

// ForwardedCerts writes the certificates the client of ctx presented, as
// wire.ForwardedCertKey carries them; "" without TLS.
func ForwardedCerts(ctx context.Context) string {
	p, ok := peer.FromContext(ctx)
	if !ok {
		return ""
	}
	info, ok := p.AuthInfo.(credentials.TLSInfo)
	if !ok {
		return ""
	}
	return EncodeCerts(info.State.PeerCertificates)
}

// EncodeCerts writes certificates as wire.ForwardedCertKey carries them.
func EncodeCerts(certs []*x509.Certificate) string {
	parts := make([]string, 0, len(certs))
	for _, c := range certs {
		parts = append(parts, base64.StdEncoding.EncodeToString(c.Raw))
	}
	return strings.Join(parts, ",")
}

// Encode writes an identity for wire.ForwardedIdentityKey:
// ROLE/NAME[,NAME…], with ";untyped" for an untyped certificate; "" for
// the insecure mode, which forwards nothing.
func Encode(id identity.Identity) string {
	if id.IsInsecure() {
		return ""
	}
	s := id.Role.String() + "/" + strings.Join(id.Names, ",")
	if !id.Typed {
		s += ";untyped"
	}
	return s
}

// Decode reads what Encode wrote.
func Decode(s string) (identity.Identity, error) {
	body, untyped := strings.CutSuffix(s, ";untyped")
	role, names, ok := strings.Cut(body, "/")
	if !ok {
		return identity.Identity{}, fmt.Errorf("an identity %q that is not ROLE/NAME", s)
	}
	r, err := identity.ParseRole(role)
	if err != nil {
		return identity.Identity{}, err
	}
	id := identity.Identity{Role: r, Typed: !untyped}
	for _, n := range strings.Split(names, ",") {
		if n == identity.ServerSAN || !identity.ValidName(n) {
			return identity.Identity{}, fmt.Errorf("an identity %q with the name %q", s, n)
		}
		id.Names = append(id.Names, n)
	}
	id.Name = id.Names[0]
	return id, nil
}

// Unary is the unary server interceptor.
func (g *Guard) Unary(ctx context.Context, req any, info *grpc.UnaryServerInfo, handler grpc.UnaryHandler) (any, error) {
	ctx, err := g.admit(ctx, info.FullMethod)
	if err != nil {
		return nil, err
	}
	return handler(ctx, req)
}

// Stream is the stream server interceptor.
func (g *Guard) Stream(srv any, ss grpc.ServerStream, info *grpc.StreamServerInfo, handler grpc.StreamHandler) error {
	ctx, err := g.admit(ss.Context(), info.FullMethod)
	if err != nil {
		return err
	}
	return handler(srv, &identifiedStream{ServerStream: ss, ctx: ctx})
}

// admit identifies the caller and checks the method; the returned
// context carries the identity for the handler.
func (g *Guard) admit(ctx context.Context, method string) (context.Context, error) {
	id, err := g.identify(ctx, method)
	if err == nil {
		err = Check(id, method)
	}
	if err != nil {
		if g.Refused != nil {
			g.Refused(id, method, err)
		}
		return nil, rpc.ToStatus(err)
	}
	return withIdentity(ctx, id), nil
}

type identifiedStream struct {
	grpc.ServerStream
	ctx context.Context
}

func (s *identifiedStream) Context() context.Context { return s.ctx }

// ServerOptions installs the guard's interceptors. They chain after the
// ones set before them, e.g. rpc.StatusInterceptors.
func (g *Guard) ServerOptions() []grpc.ServerOption {
	return []grpc.ServerOption{grpc.ChainUnaryInterceptor(g.Unary), grpc.ChainStreamInterceptor(g.Stream)}
}
