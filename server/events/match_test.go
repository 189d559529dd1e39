package events

import (
	"slices"
	"strings"
	"testing"
)

// swdd~event-handler-creates-altered-fields-and-filter-masks~1
// swdd~event-handler-expands-subscriber-field-mask-using-altered-field-masks~1
func TestMatchMask(t *testing.T) {
	tests := []struct {
		name       string
		subscriber string
		altered    string
		want       string
		ok         bool
	}{
		// The two examples of the requirement.
		{"shorter subscriber mask uses altered field", "desiredState.workloads.*", "desiredState.workloads.workload_1.agent", "desiredState.workloads.workload_1.agent", true},
		{"shorter altered field expands subscriber mask", "desiredState.workloads.*.agent", "desiredState.workloads.workload_1", "desiredState.workloads.workload_1.agent", true},
		{"equal length", "desiredState.workloads.workload_1", "desiredState.workloads.workload_1", "desiredState.workloads.workload_1", true},
		{"equal length with wildcard", "workloadStates.*.*.*", "workloadStates.agent_A.wl.id1", "workloadStates.agent_A.wl.id1", true},
		{"only wildcard", "*", "agents.agent_A", "agents.agent_A", true},
		{"several wildcards expanded", "workloadStates.*.*.*.state", "workloadStates.agent_A.wl", "workloadStates.agent_A.wl.*.state", true},
		{"expanded tail without wildcards", "desiredState.workloads.*.tags.owner", "desiredState", "desiredState.workloads.*.tags.owner", true},
		{"altered top level under subscriber", "agents.agent_A.status", "agents", "agents.agent_A.status", true},
		{"different first segment", "agents", "desiredState.workloads.workload_1", "", false},
		{"different inner segment", "desiredState.workloads.workload_2.agent", "desiredState.workloads.workload_1", "", false},
		{"different after wildcard", "desiredState.workloads.*.agent", "desiredState.workloads.workload_1.tags", "", false},
		{"prefix of segment is no match", "desiredState.work", "desiredState.workloads", "", false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, ok := matchMask(strings.Split(tt.subscriber, "."), strings.Split(tt.altered, "."))
			if ok != tt.ok {
				t.Fatalf("matchMask(%q, %q) ok = %v, want %v", tt.subscriber, tt.altered, ok, tt.ok)
			}
			if ok && strings.Join(got, ".") != tt.want {
				t.Errorf("matchMask(%q, %q) = %q, want %q", tt.subscriber, tt.altered, strings.Join(got, "."), tt.want)
			}
		})
	}
}

// Expanding must not write into the altered path's backing array, which is
// shared by all subscribers.
func TestMatchMaskDoesNotAliasAlteredPath(t *testing.T) {
	altered := make([]string, 2, 8)
	copy(altered, []string{"desiredState", "workloads"})
	first, _ := matchMask([]string{"desiredState", "workloads", "*", "agent"}, altered)
	second, _ := matchMask([]string{"desiredState", "workloads", "*", "tags"}, altered)
	if !slices.Equal(first, []string{"desiredState", "workloads", "*", "agent"}) {
		t.Errorf("first expansion changed to %v", first)
	}
	if !slices.Equal(second, []string{"desiredState", "workloads", "*", "tags"}) {
		t.Errorf("second expansion = %v", second)
	}
}
