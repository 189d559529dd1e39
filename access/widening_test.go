package access

import (
	"errors"
	"strings"
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

// Through the control interface or as a commander, a workload's
// runtime, its process user and its security-relevant podman options
// stay as they are, or narrow; a new workload carries none (issue 27).
func TestCheckNoPrivilegeWidening(t *testing.T) {
	proc := func(rc string) *state.Workload {
		return &state.Workload{Agent: "agent_A", Runtime: "process", RuntimeConfig: rc}
	}
	pod := func(opts string) *state.Workload {
		return &state.Workload{Agent: "agent_A", Runtime: "podman", RuntimeConfig: "image: img\ncommandOptions: [" + opts + "]"}
	}
	kube := func(sc string) *state.Workload {
		return &state.Workload{Agent: "agent_A", Runtime: "podman-kube", RuntimeConfig: "manifest: |\n  kind: Pod\n  metadata: {name: p}\n  spec:\n    containers:\n    - name: c\n      securityContext: " + sc}
	}
	tests := []struct {
		name          string
		before, after *state.Workload
		want          string // "" allowed, else words of the refusal
	}{
		{"unchanged process", proc("command: sleep"), proc("command: sleep\nargs: [1]"), ""},
		{"hole 2: user of another workload", proc("command: sleep"), proc("command: sleep\nuser: '60123'"), "adds runtimeConfig.user (user 60123)"},
		{"user changed", proc("command: sleep\nuser: alice"), proc("command: sleep\nuser: bob"), "adds runtimeConfig.user (user bob)"},
		{"user kept", proc("command: sleep\nuser: alice"), proc("command: other\nuser: alice"), ""},
		{"user dropped", proc("command: sleep\nuser: alice"), proc("command: sleep"), ""},
		{"hole 3: runtime changed", proc("command: sleep"), pod(`"--privileged", "-v", "/:/host"`), "changes the runtime from 'process' to 'podman'"},
		{"runtime changed, nothing else", proc("command: sleep"), &state.Workload{Runtime: "podman", RuntimeConfig: "image: img"}, "changes the runtime"},
		{"--privileged added", pod(`"-p", "80:80"`), pod(`"-p", "80:80", "--privileged"`), "adds runtimeConfig.commandOptions[2] (--privileged)"},
		{"host path added", pod(`"--rm"`), pod(`"--rm", "-v", "/:/host"`), "adds runtimeConfig.commandOptions[1] (--volume=/:/host)"},
		{"named volume added", pod(`"--rm"`), pod(`"-v=data:/d"`), "--volume=data:/d"},
		{"--user added", pod(`"--rm"`), pod(`"--user=0"`), "--user=0"},
		{"--pid host added", pod(``), pod(`"--pid=host"`), "--pid=host"},
		{"--net=host added", pod(``), pod(`"--net=host"`), "--network=host"},
		{"--cap-add added", pod(``), pod(`"--cap-add=NET_ADMIN"`), "--cap-add=NET_ADMIN"},
		{"--device added", pod(``), pod(`"--device", "/dev/mem"`), "--device=/dev/mem"},
		{"generalOptions added", pod(``), &state.Workload{Runtime: "podman", RuntimeConfig: "image: img\ngeneralOptions: [--root, /x]"}, "runtimeConfig.generalOptions[0]"},
		{"same options respelled and reordered", pod(`"-v", "data:/d", "--cap-add=KILL", "-u", "1000"`), pod(`"--user=1000", "--cap-add", "cap_kill", "--volume=data:/d", "--env=A=1"`), ""},
		{"--privileged dropped", pod(`"--privileged"`), pod(``), ""},
		{"--cap-drop ALL dropped", pod(`"--cap-drop=ALL"`), pod(``), "drops runtimeConfig.commandOptions[0] (--cap-drop=ALL)"},
		{"non-root --user dropped", pod(`"--user=1000"`), pod(``), "drops runtimeConfig.commandOptions[0] (--user=1000)"},
		{"non-root --user changed", pod(`"--user=1000"`), pod(`"--user=1001"`), "drops"},
		{"no-new-privileges dropped", pod(`"--security-opt=no-new-privileges"`), pod(``), "no-new-privileges"},
		{"an option hidden as a value", pod(``), pod(`"--env", "--privileged"`), ""},
		{"an unknown option", pod(``), pod(`"--frobnicate", "-e", "PW=s3cret"`), `adds runtimeConfig.commandOptions[0] ("--frobnicate" and what follows)`},
		{"kube privileged added", kube("{runAsUser: 1000}"), kube("{runAsUser: 1000, privileged: true}"), "securityContext.privileged"},
		{"kube runAsUser dropped", kube("{runAsUser: 1000}"), kube("{}"), "drops"},
		{"a config the policy cannot read", pod(``), &state.Workload{Runtime: "podman", RuntimeConfig: "image: img\ncommandOptions: --privileged"}, "cannot read"},
		{"new workload without grants", nil, pod(`"--cap-drop=ALL", "--user=1000", "-p", "80:80"`), ""},
		{"new workload with a grant", nil, pod(`"-v", "data:/d"`), "adds runtimeConfig.commandOptions[0]"},
		{"new process workload with a user", nil, proc("command: sleep\nuser: alice"), "adds runtimeConfig.user"},
		{"new process workload", nil, proc("command: sleep"), ""},
		{"deleted", pod(`"--privileged"`), nil, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := CheckNoPrivilegeWidening("w", tt.before, tt.after, ViaControlInterface)
			if tt.want == "" {
				if err != nil {
					t.Fatalf("refused: %v", err)
				}
				return
			}
			var w *Widened
			if !errors.As(err, &w) || w.Workload != "w" || !errors.Is(err, errs.ErrPermissionDenied) ||
				!strings.Contains(err.Error(), tt.want) || !strings.Contains(err.Error(), "through the control interface") {
				t.Fatalf("CheckNoPrivilegeWidening = %v, want a refusal of 'w' naming %q", err, tt.want)
			}
			if strings.Contains(err.Error(), "s3cret") {
				t.Fatalf("the refusal %q quotes an --env value", err)
			}
		})
	}
	err := CheckNoPrivilegeWidening("w", proc("command: a"), proc("command: a\nuser: root"), "")
	if err == nil || err.Error() != "may not widen the privileges of workload 'w': it adds runtimeConfig.user (user root); only an operator may" {
		t.Fatalf("commander's refusal: %v", err)
	}
}
