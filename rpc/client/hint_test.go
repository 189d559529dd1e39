package client

import (
	"context"
	"net"
	"slices"
	"testing"
	"time"

	"github.com/grapnel-io/grapnel/rpc/wire"
)

// deadAddr is an address nobody listens on.
func deadAddr(t *testing.T) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := l.Addr().String()
	l.Close()
	return addr
}

// An address added later is asked too: given only a dead address, the
// Resolver finds the leader through the added one.
func TestAddAddrsAreAskedForTheLeader(t *testing.T) {
	fc := newFakeCluster(t, 3)
	fc.setLeader("r3")
	dead := deadAddr(t)
	r := newResolver(t, opts(dead))
	r.AddAddrs("", dead, fc.rep("r1").addr, fc.rep("r1").addr)
	if got, want := r.Members(), []string{dead, fc.rep("r1").addr}; !slices.Equal(got, want) {
		t.Fatalf("Members = %v, want %v (no empty or repeated address)", got, want)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	addr, err := r.Leader(ctx)
	if err != nil || addr != fc.rep("r3").addr || r.LeaderID() != "r3" {
		t.Fatalf("Leader = %q (%q), %v; want r3 at %s", addr, r.LeaderID(), err, fc.rep("r3").addr)
	}
}

// A hint is taken as the leader at once: the next Open goes there without
// a status round, and the hinted address becomes a member.
func TestHintNamesTheLeader(t *testing.T) {
	fc := newFakeCluster(t, 3)
	fc.setLeader("r2")
	r := newResolver(t, opts(fc.rep("r1").addr))
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if addr, err := r.Leader(ctx); err != nil || addr != fc.rep("r2").addr {
		t.Fatalf("Leader = %q, %v", addr, err)
	}

	tests := []struct {
		name, id, addr string
		wantID         string
	}{
		{"no address is ignored", "r3", "", "r2"},
		{"no id is ignored", "", fc.rep("r3").addr, "r2"},
		{"a full hint moves the leader", "r3", fc.rep("r3").addr, "r3"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r.Hint(tt.id, tt.addr)
			if r.LeaderID() != tt.wantID {
				t.Fatalf("LeaderID = %q, want %q", r.LeaderID(), tt.wantID)
			}
		})
	}
	calls := fc.rep("r1").statusCalls.Load() + fc.rep("r2").statusCalls.Load() + fc.rep("r3").statusCalls.Load()
	fc.setLeader("r3")
	s, err := r.Open(ctx, wire.KindAgent)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	if s.ReplicaID() != "r3" {
		t.Fatalf("opened at %s, want the hinted r3", s.ReplicaID())
	}
	if after := fc.rep("r1").statusCalls.Load() + fc.rep("r2").statusCalls.Load() + fc.rep("r3").statusCalls.Load(); after > calls {
		t.Fatalf("Open asked around (%d status calls before, %d after) instead of taking the hint", calls, after)
	}
	if !slices.Contains(r.Members(), fc.rep("r3").addr) {
		t.Fatalf("Members %v lack the hinted address", r.Members())
	}
}
