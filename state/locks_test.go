package state

import "testing"

// Requirement (issue 28): a lock taken under the previous release's bare
// name stays its holder's once owners are role/name keys, both ways, and
// only then: before, the previous release's rule (the same text) holds,
// so replicas of both releases decide alike.
func TestSameOwnerAcrossTheUpgrade(t *testing.T) {
	for _, tc := range []struct {
		held, owner string
		keyed, want bool
	}{
		{"alice", "alice", false, true},
		{"operator/alice", "operator/alice", true, true},
		{"alice", "operator/alice", false, false},
		{"alice", "operator/alice", true, true},
		{"operator/alice", "alice", true, true},
		{"operator/alice", "commander/alice", true, false},
		{"bob", "operator/alice", true, false},
		{"operator/alice", "bob", true, false},
	} {
		if got := SameOwner(tc.held, tc.owner, tc.keyed); got != tc.want {
			t.Errorf("SameOwner(%q, %q, keyed %t) = %t, want %t", tc.held, tc.owner, tc.keyed, got, tc.want)
		}
	}
	st := NewStore()
	if err := st.TakeLocks([]string{"workload/web"}, "alice", "", 0, 1000); err != nil {
		t.Fatal(err)
	}
	if err := st.ReleaseLocks([]string{"workload/web"}, "operator/alice", 1, false); err == nil {
		t.Fatal("a keyed owner released a bare-name lock at cluster version 0")
	}
	st.SetClusterVersion(ClusterVersionRevocation)
	if err := st.ReleaseLocks([]string{"workload/web"}, "operator/alice", 1, false); err != nil {
		t.Fatalf("at cluster version 1 the holder of a bare-name lock could not release it: %v", err)
	}
}
