package access

import (
	"fmt"
	"slices"

	"github.com/grapnel-io/grapnel/internal/errs"
	"github.com/grapnel-io/grapnel/state"
)

// Widened refuses a write through the control interface that would give
// a workload more control-interface rights than it has. It is an
// errs.ErrPermissionDenied.
type Widened struct {
	Workload string
}

func (w *Widened) Error() string {
	return fmt.Sprintf("may not widen the controlInterfaceAccess of workload '%s' through the control interface", w.Workload)
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
func CheckNoWidening(before, after map[string]*state.Workload) error {
	for _, name := range state.SortedKeys(after) {
		var was state.ControlInterfaceAccess
		if w := before[name]; w != nil {
			was = w.ControlInterfaceAccess
		}
		if w := after[name]; w != nil && !Narrows(was, w.ControlInterfaceAccess) {
			return &Widened{Workload: name}
		}
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
