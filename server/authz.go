package server

import (
	"context"
	"fmt"
	"log/slog"
	"net"
	"strings"

	"github.com/grapnel-io/grapnel/internal/errs"
	"github.com/grapnel-io/grapnel/internal/identity"
	"github.com/grapnel-io/grapnel/rpc/authz"
	"github.com/grapnel-io/grapnel/rpc/grpcapi"
	"github.com/grapnel-io/grapnel/rpc/wire"
	"github.com/grapnel-io/grapnel/state"
)

// refused logs a refusal (at most one line per identity and method per
// refusalLogWindow, with the count of those left out) and counts it in
// grapnel_permission_denied_total. The guard calls it for every call it
// refuses, the server for every stream message.
func (s *Server) refused(id identity.Identity, method string, err error) {
	who := authz.Who(id)
	s.refusals.Log(s.log, slog.LevelWarn, "denied|"+who+"|"+method, "permission denied",
		"identity", who, "method", method, "error", err)
	s.cfg.Metrics.Denied(id.Role.String(), method)
}

// authorize checks a right that depends on a request's content (e.g.
// Unlock with force) for the caller in ctx; a refusal is logged and
// counted.
func (s *Server) authorize(ctx context.Context, method string) error {
	id, err := s.guard.Identify(ctx)
	if err == nil {
		err = authz.Check(id, method)
	}
	if err != nil {
		s.refused(id, method, err)
	}
	return err
}

// outgoing prepares the context of a call or stream this follower
// proxies to the leader: it names this replica and forwards the client's
// identity with the certificates the client presented ("" in the
// insecure mode), by which the leader checks the call as this client's
// (rpc/authz Guard).
func (s *Server) outgoing(ctx context.Context) context.Context {
	who, certs := "", ""
	if id, err := s.guard.Identify(ctx); err == nil {
		// (On error the guard refused the call before it got here;
		// should it not have run, forward an identity that holds no
		// right.) A call this replica's own dashboard made as its
		// viewer passes on the viewer's certificates.
		who, certs = authz.Encode(id), authz.ForwardedCerts(ctx)
		if id.Via != "" {
			certs = wire.ForwardedCert(ctx)
		}
	}
	return wire.Outgoing(ctx, s.node.ID(), who, certs)
}

// keyedOwners reports whether lock owners and requesters are role/name
// keys (state.Store.KeyedOwners). It reads the FSM, not the leader's
// projected store: the cluster version is raised by the cluster's own
// entry (cluster.Node.FinalizeUpgrade), which the projection never sees,
// and it never goes down, so the applied value is safe to check with.
func (s *Server) keyedOwners() bool {
	return s.fsm.ClusterVersion() >= state.ClusterVersionRevocation
}

// lockOwner is the lock owner of a call or stream: the caller's
// identity, role and name (identity.Key: a commander named alice does
// not own operator alice's locks), forwarded by a proxying replica; or,
// without TLS, the owner the client declares (wire.OwnerKey), which
// nothing authenticates.
func (s *Server) lockOwner(ctx context.Context) string {
	id, err := s.guard.Identify(ctx)
	switch {
	case err != nil:
		return "" // a call the guard refuses owns nothing
	case !id.IsInsecure() && !s.keyedOwners():
		return id.Name // the previous release's form, until finalized
	case !id.IsInsecure():
		return id.Key()
	}
	return declaredOwner(ctx)
}

// revoked says why a certificate serial is refused on the gRPC port: an
// operator's removal of the replica that held it revoked it
// (state.RevokedCert), "" when it is not revoked.
func (s *Server) revoked(serial string) string {
	r, ok := s.fsm.RevokedCert(serial)
	if !ok {
		return ""
	}
	return fmt.Sprintf("an operator removed replica %s (Raft index %d)", r.ID, r.Index)
}

// checkAgentName refuses an AgentHello whose name the identity may not
// use: an agent says hello only as itself, and never under a name that
// is a replica's (in the current Raft configuration) or the name every
// replica's certificate carries (identity.ServerSAN). Without TLS any
// name goes, as before roles existed.
func (s *Server) checkAgentName(id identity.Identity, name string) error {
	if id.IsInsecure() {
		return nil
	}
	switch {
	case id.Role != identity.Agent:
		return authz.Denied(id, "say AgentHello", authz.AgentStream)
	case name == identity.ServerSAN || strings.Contains(name, "*"):
		return fmt.Errorf("%w: %s may not say AgentHello as '%s': it is a replica's name, never an agent's", errs.ErrPermissionDenied, authz.Who(id), name)
	case !id.Is(identity.Agent, name):
		return fmt.Errorf("%w: %s may not say AgentHello as '%s': an agent says hello only under a name its certificate carries", errs.ErrPermissionDenied, authz.Who(id), name)
	case s.isReplicaID(name):
		return fmt.Errorf("%w: %s may not say AgentHello as '%s': that is a replica's id in the cluster's configuration", errs.ErrPermissionDenied, authz.Who(id), name)
	}
	return nil
}

// isReplicaID reports whether name is the id of a server in the latest
// Raft configuration.
func (s *Server) isReplicaID(name string) bool {
	_, ok := s.replicaHost(name)
	return ok
}

// replicaMember is what the guard knows of replica id of the latest Raft
// configuration: where its proxy dials from, and whether it runs a release
// that forwards no client certificate while the cluster version has not
// been raised past that release (docs/upgrade.md).
func (s *Server) replicaMember(id string) (authz.MemberInfo, bool) {
	host, ok := s.replicaHost(id)
	if !ok {
		return authz.MemberInfo{}, false
	}
	info := authz.MemberInfo{Host: host}
	if s.node.ClusterVersion() < state.ClusterVersionRevocation {
		v, known := s.node.PeerClusterVersion(id)
		info.Legacy = known && v < state.ClusterVersionRevocation
	}
	return info, true
}

// replicaHost is the host of replica id's Raft address in the latest Raft
// configuration (read without waiting on Raft's loop), and whether id is
// in it.
func (s *Server) replicaHost(id string) (string, bool) {
	f := s.node.Raft().GetConfiguration()
	if f.Error() != nil {
		return "", false
	}
	for _, srv := range f.Configuration().Servers {
		if string(srv.ID) == id {
			host, _, err := net.SplitHostPort(string(srv.Address))
			if err != nil {
				host = string(srv.Address)
			}
			return host, true
		}
	}
	return "", false
}

// ownStates keeps of an agent's report only the states of workloads on
// that agent; the others are refused (logged and counted) and not
// applied, so a stolen agent key cannot rewrite another host's states.
// Without TLS everything is kept, as before roles existed.
func (s *Server) ownStates(c *conn, u *grpcapi.UpdateWorkloadState) {
	if c.who.IsInsecure() {
		return
	}
	ws := u.GetWorkloadStates()
	kept := ws[:0]
	var foreign string
	for _, w := range ws {
		if w.GetInstanceName().GetAgentName() == c.name {
			kept = append(kept, w)
		} else if foreign == "" {
			foreign = w.GetInstanceName().GetWorkloadName() + " on " + w.GetInstanceName().GetAgentName()
		}
	}
	if dropped := len(ws) - len(kept); dropped > 0 {
		s.refused(c.who, authz.ReportStates, fmt.Errorf("%w: %s may not report the states of %d workloads of other agents (%s, …): an agent reports only its own",
			errs.ErrPermissionDenied, authz.Who(c.who), dropped, foreign))
	}
	u.WorkloadStates = kept
}
