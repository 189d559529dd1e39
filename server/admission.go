package server

import (
	"context"
	"errors"
	"fmt"
	"strings"

	"github.com/grapnel-io/grapnel/access"
	"github.com/grapnel-io/grapnel/internal/identity"
	"github.com/grapnel-io/grapnel/rpc"
	"github.com/grapnel-io/grapnel/rpc/authz"
	"github.com/grapnel-io/grapnel/rpc/wire"
	"github.com/grapnel-io/grapnel/state"
	"github.com/grapnel-io/grapnel/workloadpolicy"
)

// admission is what an update is checked against besides the limits
// and the locks (docs/security.md, "Workload admission policy"): the
// servers' workload policy, for every workload the update renders anew
// (checked after rendering, so that a config item cannot smuggle an
// option past it), and, for a requester that may not widen a workload's
// privileges, that it widens none.
type admission struct {
	policy workloadpolicy.Policy
	// skipPolicy is set for the leader's own re-renderings (sealing
	// secrets again), which change no setting.
	skipPolicy bool
	// bounded: the requester may not widen privileges (a commander, or
	// a workload through its control interface; an operator may). who
	// names the requester and via how its write came, for the refusal.
	bounded  bool
	who, via string
}

// operatorAdmission checks the policy only: an operator's update, the
// startup manifest, the leader's own.
func (s *Server) operatorAdmission() admission { return admission{policy: s.policy} }

// admissionOf is the admission of a client's update: only an operator
// (or anyone without TLS, where every caller may do everything) may
// widen a workload's privileges.
func (s *Server) admissionOf(id identity.Identity) admission {
	a := s.operatorAdmission()
	if id.IsInsecure() || id.Role == identity.Operator {
		return a
	}
	a.bounded, a.who = true, authz.Who(id)
	return a
}

// workloadAdmission is the admission of a workload's write through its
// control interface, forwarded by its agent.
func (s *Server) workloadAdmission(agent, workload string) admission {
	a := s.operatorAdmission()
	a.bounded, a.who, a.via = true, fmt.Sprintf("workload '%s' on agent '%s'", workload, agent), access.ViaControlInterface
	return a
}

// checkAdmission checks every workload the update renders anew against
// the policy and, for a bounded requester, against its stored
// rendering.
func checkAdmission(c *checks, adm admission, st *state.Store, rd *rendering) bool {
	for _, n := range state.SortedKeys(rd.put) {
		w := rd.put[n].Workload
		if !adm.skipPolicy && c.failed(adm.policy.Check("desiredState.workloads."+n, w.Runtime, w.RuntimeConfig)) {
			return true
		}
		if !adm.bounded {
			continue
		}
		var before *state.Workload
		if old, ok := st.Rendered[n]; ok {
			before = old.Workload
		}
		if err := access.CheckNoPrivilegeWidening(n, before, w, adm.via); err != nil && c.failed(fmt.Errorf("%s %w", adm.who, err)) {
			return true
		}
	}
	return false
}

// policyCheck names the admission check that refused an update, for
// grapnel_workload_policy_refused_total; "" when it was another.
func policyCheck(err error) string {
	var r *workloadpolicy.Refusal
	var w *access.Widened
	switch {
	case errors.As(err, &r):
		return "level"
	case errors.As(err, &w):
		return "widening"
	}
	return ""
}

// serverPolicy is the servers' policy at level; the servers know no
// agent's uid range.
func serverPolicy(level workloadpolicy.Level) workloadpolicy.Policy {
	return workloadpolicy.Policy{Level: level, Owner: "the servers' --workload-policy", PassUnreadable: true}
}

// connAdmission is the admission of an update on a stream: an agent
// forwards its workloads' writes (the id names the workload, see
// checkForwarded), a CLI or a commander writes for its identity.
func (s *Server) connAdmission(c *conn, id string) admission {
	if c.kind != wire.KindAgent {
		return s.admissionOf(c.who)
	}
	_, rest, _ := rpc.SplitRequestID(id)
	wl, _, _ := strings.Cut(rest, "@")
	return s.workloadAdmission(c.name, wl)
}

// callAdmission is the admission of a Plan call's caller.
func (s *Server) callAdmission(ctx context.Context) admission {
	id, err := s.guard.Identify(ctx)
	if err != nil {
		// The guard refused the call before it got here; should it not
		// have run, admit as the least trusted writer.
		id = identity.Identity{Role: identity.Commander, Name: "unidentified"}
	}
	return s.admissionOf(id)
}
