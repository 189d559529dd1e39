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
		return &Widened{Workload: first}
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
