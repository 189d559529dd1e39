package wire

import (
	"context"
	"strings"

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
	// ForwardedNamesKey carries the proxied client's certificate names,
	// comma-separated. The leader believes it only from a replica.
	ForwardedNamesKey = "grapnel-forwarded-names"
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

// ForwardedNames returns the certificate names a proxy forwarded with the
// incoming call, and whether it forwarded any (the header is absent when
// the proxied client had no certificate: the insecure mode). Empty parts
// are dropped; a present but empty header gives an empty, non-nil slice,
// which allows nothing.
func ForwardedNames(ctx context.Context) ([]string, bool) {
	md, ok := metadata.FromIncomingContext(ctx)
	if !ok {
		return nil, false
	}
	vals := md.Get(ForwardedNamesKey)
	if len(vals) == 0 {
		return nil, false
	}
	names := []string{}
	for _, v := range vals {
		for _, n := range strings.Split(v, ",") {
			if n = strings.TrimSpace(n); n != "" {
				names = append(names, n)
			}
		}
	}
	return names, true
}

// Owner returns the owner the incoming call declares, or "".
func Owner(ctx context.Context) string { return first(ctx, OwnerKey) }

// WithOwner declares the owner of an outgoing call.
func WithOwner(ctx context.Context, owner string) context.Context {
	return metadata.AppendToOutgoingContext(ctx, OwnerKey, owner)
}

// Outgoing prepares the context of a proxied stream: it names the
// forwarding replica and, when the client showed a certificate (names is
// non-nil), the client's certificate names, and passes on the owner the
// client declared.
func Outgoing(ctx context.Context, by string, names []string) context.Context {
	kv := []string{ForwardedByKey, by}
	if names != nil {
		kv = append(kv, ForwardedNamesKey, strings.Join(names, ","))
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
