package wire

import (
	"context"

	"google.golang.org/grpc/metadata"
)

// Metadata keys of the redirect protocol.
const (
	// LeaderAwareKey with value "1" marks a client that follows the leader
	// itself: a follower answers it with a NotLeaderError naming the
	// leader instead of proxying its stream.
	LeaderAwareKey = "grapnel-leader-aware"
	// ForwardedByKey carries the id of the replica that proxies a stream.
	// A replica that receives a forwarded stream while not leading fails
	// it rather than proxying it again, so a stream never travels in a
	// circle while leadership moves.
	ForwardedByKey = "grapnel-forwarded-by"
	// ForwardedIdentityKey carries the proxied client's identity (role
	// and names, as rpc/authz encodes it). The leader believes it only
	// from a replica of its configuration, for a method a proxy forwards,
	// and only when ForwardedCertKey proves it (rpc/authz).
	ForwardedIdentityKey = "grapnel-forwarded-identity"
	// ForwardedCertKey carries the certificates the proxied client
	// presented in the mutual-TLS handshake the proxy terminated (DER,
	// standard base64, leaf first, comma-separated). The leader verifies
	// them against its CA and requires them to name the forwarded
	// identity, so a replica can forward only a client whose certificate
	// it holds, never a name it chose.
	ForwardedCertKey = "grapnel-forwarded-cert"
	// OwnerKey carries the owner a client declares for intent locks
	// (docs/locks.md). A client certificate's name takes precedence; a
	// proxying replica passes it on.
	OwnerKey = "grapnel-owner"
	// ReplicaIDKey is the response header by which a replica accepts a
	// stream: it names the replica that serves it.
	ReplicaIDKey = "grapnel-replica-id"
)

// IsLeaderAware reports whether the incoming call comes from a
// leader-aware client.
func IsLeaderAware(ctx context.Context) bool { return first(ctx, LeaderAwareKey) == "1" }

// WithLeaderAware marks an outgoing call as coming from a leader-aware
// client.
func WithLeaderAware(ctx context.Context) context.Context {
	return metadata.AppendToOutgoingContext(ctx, LeaderAwareKey, "1")
}

// ForwardedBy returns the id of the replica that proxied the incoming call,
// or "" when the client called directly.
func ForwardedBy(ctx context.Context) string { return first(ctx, ForwardedByKey) }

// ForwardedIdentity returns the encoded identity a proxy forwarded with
// the incoming call, and whether it forwarded one (the header is absent
// when the proxied client had no certificate: the insecure mode).
func ForwardedIdentity(ctx context.Context) (string, bool) {
	md, ok := metadata.FromIncomingContext(ctx)
	if !ok {
		return "", false
	}
	vals := md.Get(ForwardedIdentityKey)
	if len(vals) == 0 {
		return "", false
	}
	return vals[0], true
}

// ForwardedCert returns the client certificates a proxy forwarded with
// the incoming call (ForwardedCertKey), or "".
func ForwardedCert(ctx context.Context) string { return first(ctx, ForwardedCertKey) }

// Owner returns the owner the incoming call declares, or "".
func Owner(ctx context.Context) string { return first(ctx, OwnerKey) }

// WithOwner declares the owner of an outgoing call.
func WithOwner(ctx context.Context, owner string) context.Context {
	return metadata.AppendToOutgoingContext(ctx, OwnerKey, owner)
}

// Outgoing prepares the context of a proxied call: it names the
// forwarding replica and, when the client showed a certificate (identity
// is not empty), the client's encoded identity and its certificates
// (certs, as ForwardedCertKey carries them), and passes on the owner the
// client declared.
func Outgoing(ctx context.Context, by, identity, certs string) context.Context {
	kv := []string{ForwardedByKey, by}
	if identity != "" {
		kv = append(kv, ForwardedIdentityKey, identity)
	}
	if certs != "" {
		kv = append(kv, ForwardedCertKey, certs)
	}
	if o := Owner(ctx); o != "" {
		kv = append(kv, OwnerKey, o)
	}
	return metadata.AppendToOutgoingContext(ctx, kv...)
}

func first(ctx context.Context, key string) string {
	md, ok := metadata.FromIncomingContext(ctx)
	if !ok {
		return ""
	}
	if v := md.Get(key); len(v) > 0 {
		return v[0]
	}
	return ""
}
