package cluster

import (
	"slices"
	"testing"

	"github.com/grapnel-io/grapnel/state"
)

// Requirement (issue 28, point 2): a cluster version whose feature changes
// what agents are sent waits for every connected agent; one that leaves
// agents alone does not.
func TestAgentsHoldOnlyTheVersionsThatChangeWhatTheyAreSent(t *testing.T) {
	features := []state.Feature{
		{Version: 1, Name: "replica only"},
		{Version: 2, Name: "new agent message", Agents: true},
		{Version: 3, Name: "replica only again"},
	}
	for _, tc := range []struct {
		name        string
		cur, target uint32
		agents      map[string]uint32
		want        uint32
		behind      []string
	}{
		{"no agents", 0, 3, nil, 3, nil},
		{"every agent supports it", 0, 3, map[string]uint32{"a": 3, "b": 2}, 3, nil},
		{"an older agent holds the agent feature and what comes after", 0, 3, map[string]uint32{"a": 3, "b": 1, "c": 0}, 1,
			[]string{"agent b (supports cluster version 1; new agent message needs 2)", "agent c (supports cluster version 0; new agent message needs 2)"}},
		{"an older agent does not hold a replica-only version", 0, 1, map[string]uint32{"b": 0}, 1, nil},
		{"already raised past the agent feature", 2, 3, map[string]uint32{"b": 0}, 3, nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, behind := capForAgents(tc.cur, tc.target, features, tc.agents)
			if got != tc.want || !slices.Equal(behind, tc.behind) {
				t.Fatalf("capForAgents = %d %q, want %d %q", got, behind, tc.want, tc.behind)
			}
		})
	}
}
