package plan

import (
	"slices"
	"testing"

	"github.com/grapnel-io/grapnel/state"
)

// The plan's first steps on their own: what a new desired state changes
// (diffDesired) and which workloads must be rendered again (toRender).
// plan's own tests cover their composition.
func TestPlanDiffAndRenderSteps(t *testing.T) {
	wl := func(agent string, configs map[string]string) *state.Workload {
		return &state.Workload{Agent: agent, Runtime: "podman", RuntimeConfig: "image: x", Configs: configs}
	}
	cur := state.State{APIVersion: "v1",
		Workloads: map[string]*state.Workload{
			"same":    wl("agent_A", nil),
			"changed": wl("agent_A", nil),
			"gone":    wl("agent_A", nil),
			"uses_c":  wl("agent_B", map[string]string{"alias": "c"}),
			"uses_d":  wl("agent_B", map[string]string{"alias": "d"}),
		},
		Configs: map[string]any{"c": "1", "d": "1", "old": "x"},
	}
	tests := []struct {
		name       string
		next       state.State
		changed    []string // workloads in the diff
		changedCfg []string
		deletedWl  []string
		deletedCfg []string
		rerendered []string
	}{
		{
			// swdd~server-detects-changed-workload~1
			// swdd~server-detects-deleted-workload~1
			name: "a workload changed, one deleted, one added",
			next: state.State{APIVersion: "v1", Workloads: map[string]*state.Workload{
				"same": wl("agent_A", nil), "changed": wl("agent_B", nil), "new": wl("agent_A", nil),
				"uses_c": wl("agent_B", map[string]string{"alias": "c"}), "uses_d": wl("agent_B", map[string]string{"alias": "d"}),
			}, Configs: cur.Configs},
			changed: []string{"changed", "new"}, deletedWl: []string{"gone"}, rerendered: []string{"changed", "new"},
		},
		{
			// A config item that changes renders again every workload that maps it.
			name:       "a config item changed and one deleted",
			next:       state.State{APIVersion: "v1", Workloads: cur.Workloads, Configs: map[string]any{"c": "2", "d": "1"}},
			changedCfg: []string{"c", "old"}, deletedCfg: []string{"old"}, rerendered: []string{"uses_c"},
		},
		{
			name: "nothing changed",
			next: cur,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			d := diffDesired(cur, tt.next)
			got := state.SortedKeys(d.changed.Workloads)
			if !slices.Equal(got, tt.changed) && !(len(got) == 0 && len(tt.changed) == 0) {
				t.Fatalf("changed workloads %v, want %v", got, tt.changed)
			}
			if cfg := state.SortedKeys(d.changedCfg); !slices.Equal(cfg, tt.changedCfg) && !(len(cfg) == 0 && len(tt.changedCfg) == 0) {
				t.Fatalf("changed configs %v, want %v", cfg, tt.changedCfg)
			}
			if !slices.Equal(d.deletedWl, tt.deletedWl) || !slices.Equal(d.deletedCfg, tt.deletedCfg) {
				t.Fatalf("deleted %v / %v, want %v / %v", d.deletedWl, d.deletedCfg, tt.deletedWl, tt.deletedCfg)
			}
			if r := toRender(tt.next, d); !slices.Equal(r, tt.rerendered) && !(len(r) == 0 && len(tt.rerendered) == 0) {
				t.Fatalf("rendered again %v, want %v", r, tt.rerendered)
			}
		})
	}
}
