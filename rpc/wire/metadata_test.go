package wire

import (
	"context"
	"slices"
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
		names     []string
		forwarded bool
	}{
		{"plain client", in(), false, "", nil, false},
		{"no metadata at all", context.Background(), false, "", nil, false},
		{"leader-aware", in(LeaderAwareKey, "1"), true, "", nil, false},
		{"leader-aware must say 1", in(LeaderAwareKey, "yes"), false, "", nil, false},
		{"forwarded with names", in(ForwardedByKey, "r2", ForwardedNamesKey, "agent-a, agent-b,,"), false, "r2", []string{"agent-a", "agent-b"}, true},
		{"forwarded, certificate without names", in(ForwardedByKey, "r2", ForwardedNamesKey, ""), false, "r2", []string{}, true},
		{"forwarded, insecure", in(ForwardedByKey, "r2"), false, "r2", nil, false},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if got := IsLeaderAware(tc.ctx); got != tc.aware {
				t.Errorf("IsLeaderAware = %v", got)
			}
			if got := ForwardedBy(tc.ctx); got != tc.by {
				t.Errorf("ForwardedBy = %q", got)
			}
			names, ok := ForwardedNames(tc.ctx)
			if ok != tc.forwarded || !slices.Equal(names, tc.names) || (tc.names != nil) != (names != nil) {
				t.Errorf("ForwardedNames = %#v, %v; want %#v, %v", names, ok, tc.names, tc.forwarded)
			}
		})
	}
}

// What Outgoing and WithLeaderAware write, the incoming side reads.
func TestOutgoingRoundTrip(t *testing.T) {
	tests := []struct {
		name  string
		names []string
	}{
		{"with names", []string{"agent-a", "*"}},
		{"insecure", nil},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			out := WithLeaderAware(Outgoing(context.Background(), "r3", tc.names))
			md, _ := metadata.FromOutgoingContext(out)
			ctx := metadata.NewIncomingContext(context.Background(), md)
			names, ok := ForwardedNames(ctx)
			if ForwardedBy(ctx) != "r3" || !IsLeaderAware(ctx) || ok != (tc.names != nil) || !slices.Equal(names, tc.names) {
				t.Fatalf("read back: by %q aware %v names %v %v", ForwardedBy(ctx), IsLeaderAware(ctx), names, ok)
			}
		})
	}
}
