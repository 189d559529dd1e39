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
	"github.com/grapnel-io/grapnel/server/plan"
	"github.com/grapnel-io/grapnel/workloadpolicy"
)

// The admission of an update (plan.Admission) by who makes it.

// operatorAdmission checks the policy only: an operator's update, the
// startup manifest, the leader's own.
func (s *Server) operatorAdmission() plan.Admission { return plan.Admission{Policy: s.policy} }

// admissionOf is the admission of a client's update: only an operator
// (or anyone without TLS, where every caller may do everything) may
// widen a workload's privileges.
func (s *Server) admissionOf(id identity.Identity) plan.Admission {
	a := s.operatorAdmission()
	if id.IsInsecure() || id.Role == identity.Operator {
		return a
	}
	a.Bounded, a.Who = true, authz.Who(id)
	return a
}

// workloadAdmission is the admission of a workload's write through its
// control interface, forwarded by its agent.
func (s *Server) workloadAdmission(agent, workload string) plan.Admission {
	a := s.operatorAdmission()
	a.Bounded, a.Who, a.Via = true, fmt.Sprintf("workload '%s' on agent '%s'", workload, agent), access.ViaControlInterface
	return a
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
func (s *Server) connAdmission(c *conn, id string) plan.Admission {
	if c.kind != wire.KindAgent {
		return s.admissionOf(c.who)
	}
	_, rest, _ := rpc.SplitRequestID(id)
	wl, _, _ := strings.Cut(rest, "@")
	return s.workloadAdmission(c.name, wl)
}

// callAdmission is the admission of a Plan call's caller.
func (s *Server) callAdmission(ctx context.Context) plan.Admission {
	id, err := s.guard.Identify(ctx)
	if err != nil {
		// The guard refused the call before it got here; should it not
		// have run, admit as the least trusted writer.
		id = identity.Identity{Role: identity.Commander, Name: "unidentified"}
	}
	return s.admissionOf(id)
}
