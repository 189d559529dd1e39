package access

import (
	"errors"
	"testing"

	"github.com/grapnel-io/grapnel/internal/errs"
	"github.com/grapnel-io/grapnel/state"
)

func TestNarrows(t *testing.T) {
	readWls := stateRuleOf(state.RWRead, "desiredState.workloads")
	writeOwn := stateRuleOf(state.RWWrite, "desiredState.workloads.me")
	writeAll := stateRuleOf(state.RWReadWrite, "*")
	denySecret := stateRuleOf(state.RWRead, "desiredState.configs.secret")
	acc := func(allow, deny []state.AccessRule) state.ControlInterfaceAccess {
		return state.ControlInterfaceAccess{AllowRules: allow, DenyRules: deny}
	}
	tests := []struct {
		name          string
		before, after state.ControlInterfaceAccess
		want          bool
	}{
		{"unchanged", acc(rules(readWls, writeOwn), rules(denySecret)), acc(rules(readWls, writeOwn), rules(denySecret)), true},
		{"unchanged, rules reordered", acc(rules(readWls, writeOwn), nil), acc(rules(writeOwn, readWls), nil), true},
		{"cleared", acc(rules(readWls), rules(denySecret)), acc(nil, nil), true},
		{"allow rule dropped", acc(rules(readWls, writeOwn), nil), acc(rules(readWls), nil), true},
		{"deny rule added", acc(rules(readWls), nil), acc(rules(readWls), rules(denySecret)), true},
		{"allow rule added", acc(rules(writeOwn), nil), acc(rules(writeOwn, writeAll), nil), false},
		{"allow rule replaced by a wider one", acc(rules(writeOwn), nil), acc(rules(writeAll), nil), false},
		{"allow rule's masks widened", acc(rules(writeOwn), nil), acc(rules(stateRuleOf(state.RWWrite, "desiredState.workloads.me", "desiredState")), nil), false},
		{"allow rule's operation widened", acc(rules(stateRuleOf(state.RWRead, "desiredState")), nil), acc(rules(stateRuleOf(state.RWReadWrite, "desiredState")), nil), false},
		{"deny rule dropped", acc(rules(readWls), rules(denySecret)), acc(rules(readWls), nil), false},
		{"log rule added", acc(rules(readWls), nil), acc(rules(readWls, logRuleOf("*")), nil), false},
		{"new rules from none", acc(nil, nil), acc(rules(readWls), nil), false},
		{"deny rules only from none", acc(nil, nil), acc(nil, rules(denySecret)), true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := Narrows(tt.before, tt.after); got != tt.want {
				t.Fatalf("Narrows = %v, want %v", got, tt.want)
			}
		})
	}
}

// A workload allowed to write its own entry cannot widen its own rules,
// nor start a workload with rules, nor widen another's.
func TestCheckNoWidening(t *testing.T) {
	own := state.ControlInterfaceAccess{AllowRules: rules(stateRuleOf(state.RWReadWrite, "desiredState.workloads.me"))}
	wide := state.ControlInterfaceAccess{AllowRules: rules(stateRuleOf(state.RWReadWrite, "*"))}
	wl := func(a state.ControlInterfaceAccess) *state.Workload {
		return &state.Workload{Agent: "agent_A", Runtime: "podman", ControlInterfaceAccess: a}
	}
	before := map[string]*state.Workload{"me": wl(own), "peer": wl(state.ControlInterfaceAccess{})}
	tests := []struct {
		name  string
		after map[string]*state.Workload
		bad   string
	}{
		{"own entry rewritten with the same rules", map[string]*state.Workload{"me": wl(own), "peer": wl(state.ControlInterfaceAccess{})}, ""},
		{"own entry rewritten without rules", map[string]*state.Workload{"me": wl(state.ControlInterfaceAccess{}), "peer": wl(state.ControlInterfaceAccess{})}, ""},
		{"own rules widened", map[string]*state.Workload{"me": wl(wide), "peer": wl(state.ControlInterfaceAccess{})}, "me"},
		{"another's rules widened", map[string]*state.Workload{"me": wl(own), "peer": wl(own)}, "peer"},
		{"new workload without rules", map[string]*state.Workload{"me": wl(own), "peer": wl(state.ControlInterfaceAccess{}), "new": wl(state.ControlInterfaceAccess{})}, ""},
		{"new workload with rules", map[string]*state.Workload{"me": wl(own), "peer": wl(state.ControlInterfaceAccess{}), "new": wl(own)}, "new"},
		{"workloads deleted", map[string]*state.Workload{}, ""},
		{"two widened: the first by name", map[string]*state.Workload{"me": wl(wide), "peer": wl(own), "new": wl(own)}, "me"},
		{"the same workload untouched", map[string]*state.Workload{"me": before["me"], "peer": before["peer"]}, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := CheckNoWidening(before, tt.after)
			if tt.bad == "" {
				if err != nil {
					t.Fatalf("CheckNoWidening = %v, want nil", err)
				}
				return
			}
			var w *Widened
			if !errors.As(err, &w) || w.Workload != tt.bad || !errors.Is(err, errs.ErrPermissionDenied) {
				t.Fatalf("CheckNoWidening = %v, want a refusal naming %q", err, tt.bad)
			}
		})
	}
}
