package authz

import (
	"context"
	"fmt"
	"strings"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/peer"

	"github.com/grapnel-io/grapnel/internal/errs"
	"github.com/grapnel-io/grapnel/internal/identity"
	"github.com/grapnel-io/grapnel/rpc"
	"github.com/grapnel-io/grapnel/rpc/wire"
)

// Guard checks every call of a gRPC server against the table. Untyped is
// the role given to certificates without a grapnel:// URI (identity.None
// refuses them); Refused, if set, is told of every refusal (the server
// logs it, rate-limited, and counts it).
type Guard struct {
	Untyped identity.Role
	Refused func(id identity.Identity, method string, err error)
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
	return g.identify(ctx)
}

// identify reads the peer's certificate. A call a replica proxied acts
// as the client the replica forwarded (wire.ForwardedIdentityKey); that
// header is believed from replicas only, since believing it from anyone
// else would let any certificate claim any role.
func (g *Guard) identify(ctx context.Context) (identity.Identity, error) {
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
	fwd, ok := wire.ForwardedIdentity(ctx)
	if !ok {
		return id, nil
	}
	if id.Role != identity.Replica {
		return identity.Identity{}, fmt.Errorf("%w: %s may not send %s: only a replica forwards a client's identity",
			errs.ErrPermissionDenied, Who(id), wire.ForwardedIdentityKey)
	}
	client, err := Decode(fwd)
	if err != nil {
		return identity.Identity{}, fmt.Errorf("%w: %s forwarded %w", errs.ErrPermissionDenied, Who(id), err)
	}
	return client, nil
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
	id, err := g.identify(ctx)
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
