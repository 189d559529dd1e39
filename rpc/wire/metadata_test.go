package wire

import (
	"context"
	"testing"

	"google.golang.org/grpc/metadata"
)

func TestMetadata(t *testing.T) {
	in := func(kv ...string) context.Context {
		return metadata.NewIncomingContext(context.Background(), metadata.Pairs(kv...))
	}
	tests := []struct {
		name      string
		ctx       context.Context
		aware     bool
		by        string
		identity  string
		forwarded bool
	}{
		{"plain client", in(), false, "", "", false},
		{"no metadata at all", context.Background(), false, "", "", false},
		{"leader-aware", in(LeaderAwareKey, "1"), true, "", "", false},
		{"leader-aware must say 1", in(LeaderAwareKey, "yes"), false, "", "", false},
		{"forwarded with an identity", in(ForwardedByKey, "r2", ForwardedIdentityKey, "agent/agent-a"), false, "r2", "agent/agent-a", true},
		{"forwarded, insecure", in(ForwardedByKey, "r2"), false, "r2", "", false},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if got := IsLeaderAware(tc.ctx); got != tc.aware {
				t.Errorf("IsLeaderAware = %v", got)
			}
			if got := ForwardedBy(tc.ctx); got != tc.by {
				t.Errorf("ForwardedBy = %q", got)
			}
			id, ok := ForwardedIdentity(tc.ctx)
			if ok != tc.forwarded || id != tc.identity {
				t.Errorf("ForwardedIdentity = %q, %v; want %q, %v", id, ok, tc.identity, tc.forwarded)
			}
		})
	}
}

// What Outgoing and WithLeaderAware write, the incoming side reads.
func TestOutgoingRoundTrip(t *testing.T) {
	tests := []struct {
		name     string
		identity string
		certs    string
	}{
		{"with an identity", "operator/alice", "MIIB,MIIC"},
		{"insecure", "", ""},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			out := WithLeaderAware(Outgoing(context.Background(), "r3", tc.identity, tc.certs))
			md, _ := metadata.FromOutgoingContext(out)
			ctx := metadata.NewIncomingContext(context.Background(), md)
			id, ok := ForwardedIdentity(ctx)
			if ForwardedBy(ctx) != "r3" || !IsLeaderAware(ctx) || ok != (tc.identity != "") || id != tc.identity || ForwardedCert(ctx) != tc.certs {
				t.Fatalf("read back: by %q aware %v identity %q %v", ForwardedBy(ctx), IsLeaderAware(ctx), id, ok)
			}
		})
	}
}
