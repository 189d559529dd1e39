package access

import (
	"fmt"
	"slices"

	"github.com/grapnel-io/grapnel/internal/errs"
	"github.com/grapnel-io/grapnel/state"
	"github.com/grapnel-io/grapnel/workloadpolicy"
)

// Widened refuses a write that would give a workload more than it has:
// more control-interface rights (through the control interface), or
// more privileges (through the control interface or as a commander). It
// is an errs.ErrPermissionDenied.
type Widened struct {
	Workload string
	// What widened, for privileges: "it adds runtimeConfig.user (user
	// 1000)", "it changes the runtime from 'process' to 'podman'"; ""
	// for the controlInterfaceAccess.
	What string
	// Via is how the write came (ViaControlInterface), or "".
	Via string
}

// ViaControlInterface is the Via of a write a workload sent through its
// control interface.
const ViaControlInterface = "through the control interface"

func (w *Widened) Error() string {
	via := ""
	if w.Via != "" {
		via = " " + w.Via
	}
	if w.What == "" {
		return fmt.Sprintf("may not widen the controlInterfaceAccess of workload '%s'%s", w.Workload, via)
	}
	return fmt.Sprintf("may not widen the privileges of workload '%s'%s: %s; only an operator may", w.Workload, via, w.What)
}

// Unwrap makes the refusal an errs.ErrPermissionDenied.
func (w *Widened) Unwrap() error { return errs.ErrPermissionDenied }

// CheckNoWidening compares the workloads before and after a write sent
// through the control interface: every workload's controlInterfaceAccess
// after it must grant no more than before (Narrows), a new workload's no
// more than nothing. Ankaios lets a workload allowed to write its own
// entry rewrite its own rules, and one allowed to add workloads start one
// with any rules; only an operator's or a commander's write may grant
// rights. The first offending workload, by name, is reported.
//
// A workload the write left alone is the same pointer in both maps and is
// not compared, so an update of one workload costs one comparison.
func CheckNoWidening(before, after map[string]*state.Workload) error {
	first := ""
	for name, w := range after {
		old := before[name]
		if w == nil || w == old || first != "" && name > first {
			continue
		}
		var was state.ControlInterfaceAccess
		if old != nil {
			was = old.ControlInterfaceAccess
		}
		if !Narrows(was, w.ControlInterfaceAccess) {
			first = name
		}
	}
	if first != "" {
		return &Widened{Workload: first, Via: ViaControlInterface}
	}
	return nil
}

// Narrows reports whether after grants no more than before, judged by the
// rules alone: every allow rule of after is one of before, and every deny
// rule of before is still in after. Allow rules only add rights and deny
// rules only remove them, so dropping the one or adding the other can
// only narrow. Unchanged rules, and no allow rules at all (nothing is
// granted), narrow.
func Narrows(before, after state.ControlInterfaceAccess) bool {
	if len(after.AllowRules) == 0 {
		return true
	}
	for _, r := range after.AllowRules {
		if !slices.ContainsFunc(before.AllowRules, func(o state.AccessRule) bool { return sameRule(r, o) }) {
			return false
		}
	}
	for _, r := range before.DenyRules {
		if !slices.ContainsFunc(after.DenyRules, func(o state.AccessRule) bool { return sameRule(r, o) }) {
			return false
		}
	}
	return true
}

func sameRule(a, b state.AccessRule) bool {
	return a.IsLogRule == b.IsLogRule && a.Operation == b.Operation &&
		slices.Equal(a.FilterMasks, b.FilterMasks) && slices.Equal(a.WorkloadNames, b.WorkloadNames)
}

// CheckNoPrivilegeWidening compares one workload's rendered runtime and
// runtimeConfig before and after a write that may not widen privileges
// (through the control interface, or a commander's): the runtime stays,
// every security-relevant setting that grants something (a process
// `user:`, --privileged, a volume, a device, --cap-add, a host
// namespace, --user root, a podman global option, a manifest's
// privileged, hostPath, capabilities.add, ...; workloadpolicy lists
// them) was there before, and every setting that restricts (--cap-drop,
// no-new-privileges, a non-root --user) is still there. A new workload
// (before nil) may carry restrictions but no grant. via names how the
// write came, for the refusal (ViaControlInterface, or "").
//
// Without it, a workload allowed to write its own entry takes another
// workload's uid (`user:`) or the host (podman --privileged, -v /:/host)
// by restarting itself with them (issue 27).
func CheckNoPrivilegeWidening(name string, before, after *state.Workload, via string) error {
	if after == nil {
		return nil
	}
	widened := func(format string, args ...any) error {
		return &Widened{Workload: name, What: fmt.Sprintf(format, args...), Via: via}
	}
	if before != nil && before.Runtime != after.Runtime {
		return widened("it changes the runtime from '%s' to '%s'", before.Runtime, after.Runtime)
	}
	next, err := workloadpolicy.Inspect(after.Runtime, after.RuntimeConfig)
	if err != nil {
		return widened("the workload policy cannot read its runtimeConfig (%v)", err)
	}
	prev := &workloadpolicy.Profile{}
	if before != nil {
		if p, err := workloadpolicy.Inspect(before.Runtime, before.RuntimeConfig); err == nil {
			prev = p
		}
	}
	had := keys(prev.Grants())
	for _, s := range next.Grants() {
		if !had[s.Key] {
			return widened("it adds %s (%s)", s.Field, s.Shown())
		}
	}
	keeps := keys(next.Restrictions())
	for _, s := range prev.Restrictions() {
		if !keeps[s.Key] {
			return widened("it drops %s (%s)", s.Field, s.Shown())
		}
	}
	return nil
}

func keys(ss []workloadpolicy.Setting) map[string]bool {
	m := make(map[string]bool, len(ss))
	for _, s := range ss {
		m[s.Key] = true
	}
	return m
}
