package plan

import (
	"fmt"

	"github.com/grapnel-io/grapnel/access"
	"github.com/grapnel-io/grapnel/state"
	"github.com/grapnel-io/grapnel/workloadpolicy"
)

// Admission is what an update is checked against besides the limits
// and the locks (docs/security.md, "Workload admission policy"): the
// servers' workload policy, for every workload the update renders anew
// (checked after rendering, so that a config item cannot smuggle an
// option past it), and, for a requester that may not widen a workload's
// privileges, that it widens none.
type Admission struct {
	Policy workloadpolicy.Policy
	// SkipPolicy is set for the leader's own re-renderings (sealing
	// secrets again), which change no setting.
	SkipPolicy bool
	// Bounded: the requester may not widen privileges (a commander, or
	// a workload through its control interface; an operator may). Who
	// names the requester and Via how its write came, for the refusal.
	Bounded  bool
	Who, Via string
}

// checkAdmission checks every workload the update renders anew against
// the policy and, for a bounded requester, against its stored
// rendering.
func checkAdmission(c *checks, adm Admission, st *state.Store, rd *rendering) bool {
	for _, n := range state.SortedKeys(rd.put) {
		w := rd.put[n].Workload
		if !adm.SkipPolicy && c.failed(adm.Policy.Check("desiredState.workloads."+n, w.Runtime, w.RuntimeConfig)) {
			return true
		}
		if !adm.Bounded {
			continue
		}
		var before *state.Workload
		if old, ok := st.Rendered[n]; ok {
			before = old.Workload
		}
		if err := access.CheckNoPrivilegeWidening(n, before, w, adm.Via); err != nil && c.failed(fmt.Errorf("%s %w", adm.Who, err)) {
			return true
		}
	}
	return false
}
