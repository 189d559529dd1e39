package server

import (
	"fmt"
	"log/slog"
	"slices"
	"strings"

	"github.com/grapnel-io/grapnel/access"
	"github.com/grapnel-io/grapnel/internal/errs"
	"github.com/grapnel-io/grapnel/rpc"
	"github.com/grapnel-io/grapnel/rpc/ankbase"
	"github.com/grapnel-io/grapnel/state"
)

// accessDenied opens the answer to a refused forwarded request, as the
// agent words its own refusals (Ankaios's "Access denied").
const accessDenied = "Access denied"

// checkForwarded bounds a request that arrived on an agent's stream. An
// agent sends requests only for its workloads, naming the workload in the
// id ("<workload>@<id>", prefixed "<agent>@" by the stream). The request
// is accepted only when that workload is in the (speculative) desired
// state, has an instance on this agent, and its controlInterfaceAccess
// allows the request as the agent's own check would (package access);
// an update may besides widen no workload's controlInterfaceAccess. The
// agent checks all this before forwarding, so a refusal here means an
// agent that is compromised, broken or older than this rule.
//
// A LogsCancelRequest needs only the workload name: the agent cancels the
// campaigns of a workload whose instance it stops, which may be after the
// workload left the desired state, and the id ("<agent>@<workload>@...")
// reaches only campaigns of that agent's own workloads.
func (l *leader) checkForwarded(c *conn, req *ankbase.Request) error {
	_, rest, _ := rpc.SplitRequestID(req.GetRequestId())
	wl, _, ok := strings.Cut(rest, "@")
	if !ok || wl == "" {
		return fmt.Errorf("%w: agent '%s' sent a request naming no workload (id '%s'); agents forward requests of their workloads only",
			errs.ErrPermissionDenied, c.name, rest)
	}
	if req.GetLogsCancelRequest() != nil {
		return nil
	}
	st := l.projected.store
	w := st.Desired.Workloads[wl]
	if w == nil {
		return fmt.Errorf("%w: agent '%s' forwarded a request of workload '%s', which is not in the desired state",
			errs.ErrPermissionDenied, c.name, wl)
	}
	if !slices.ContainsFunc(st.Instances(wl), func(n state.InstanceName) bool { return n.AgentName == c.name }) {
		return fmt.Errorf("%w: agent '%s' forwarded a request of workload '%s', which does not run on it",
			errs.ErrPermissionDenied, c.name, wl)
	}
	if err := access.New(w.ControlInterfaceAccess).Authorize(req); err != nil {
		return fmt.Errorf("workload '%s' on agent '%s' %w", wl, c.name, err)
	}
	if u := req.GetUpdateStateRequest(); u != nil {
		next, _, err := l.applyUpdateMask(u)
		if err != nil {
			// Not a question of rights: updateState refuses it and says why.
			return nil
		}
		if err := access.CheckNoWidening(st.Desired.Workloads, next.Workloads); err != nil {
			return fmt.Errorf("workload '%s' on agent '%s' %w", wl, c.name, err)
		}
	}
	return nil
}

// refuseForwarded answers a refused forwarded request with the reason,
// logs it rate-limited and counts it; nothing else happens. The answer
// goes out at once, as the agent answers the requests it refuses itself:
// it changes nothing, so it need not wait for the proposals before it.
func (l *leader) refuseForwarded(c *conn, req *ankbase.Request, err error) {
	l.s.cfg.Metrics.RefusedForwarded(c.name)
	l.s.refusals.Log(l.s.log, slog.LevelWarn, "forwarded|"+c.name, "refused a request an agent forwarded", "agent", c.name, "err", err)
	l.respondText(req.GetRequestId(), fmt.Sprintf("%s: %v", accessDenied, err))
}
