package server

import (
	"context"
	"log/slog"
	"maps"

	"github.com/grapnel-io/grapnel/internal/buildinfo"
	"github.com/grapnel-io/grapnel/rpc/grapnelpb"
	"github.com/grapnel-io/grapnel/rpc/grpcapi"
	"github.com/grapnel-io/grapnel/state"
)

// What an agent's release shows when its hello gives none that can be
// shown (grapnelpb.AgentInfo.release).
const (
	// ReleaseAnkaios: the hello has neither a release nor an incarnation,
	// the Grapnel fields an Ankaios agent does not know.
	ReleaseAnkaios = "ankaios"
	// ReleaseUnknown: a Grapnel agent (it sent an incarnation) older than
	// releases.
	ReleaseUnknown = "unknown"
	// ReleaseInvalid: the release is not a semantic version of at most
	// buildinfo.MaxReleaseBytes bytes; it is logged, not kept.
	ReleaseInvalid = "invalid"
)

// helloRelease is the release an agent's hello announces, as shown. A
// text that is not a release is not kept (it would be a metric label
// and a table cell): it shows as ReleaseInvalid, with the reason.
func helloRelease(h *grpcapi.AgentHello) (string, error) {
	r := h.GetGrapnelRelease()
	switch {
	case r == "" && h.GetGrapnelIncarnation() == 0:
		return ReleaseAnkaios, nil
	case r == "":
		return ReleaseUnknown, nil
	}
	if err := buildinfo.CheckRelease(r); err != nil {
		return ReleaseInvalid, err
	}
	return r, nil
}

// noteRelease keeps the release an agent's hello announced in the
// leader's memory, as its load: it changes only when the agent restarts,
// and a new leader hears it again in the agent's next hello, so writing
// it to Raft would cost every replica's flash for nothing. A bad release
// is logged and shown as invalid; the stream is served all the same (the
// release only informs).
func (l *leader) noteRelease(agent string, h *grpcapi.AgentHello) {
	r, err := helloRelease(h)
	if err != nil {
		l.s.refusals.Log(l.s.log, slog.LevelWarn, "release|"+agent, "an agent's hello announces a bad release (AgentHello.grapnelRelease); shown as "+ReleaseInvalid,
			"agent", agent, "err", err)
	}
	l.term.relMu.Lock()
	defer l.term.relMu.Unlock()
	l.term.releases[agent] = r
	l.term.clusterVersions[agent] = h.GetGrapnelClusterVersion()
}

// forgetRelease drops an agent's release when it leaves the agent map.
func (t *term) forgetRelease(agent string) {
	t.relMu.Lock()
	defer t.relMu.Unlock()
	delete(t.releases, agent)
	delete(t.clusterVersions, agent)
}

// AgentReleases is each agent's release as its hello to this replica said
// it, while this replica leads; nil on a follower, which does not hear
// the agents' hellos. An agent still in its reconnect grace keeps the
// release its last hello to this leader said; one that has not said hello
// to this leader yet is missing.
func (s *Server) AgentReleases() map[string]string {
	return fromHellos(s, func(t *term) map[string]string { return t.releases })
}

// AgentClusterVersions is the newest cluster version each connected
// agent's release supports, as its hello to this replica said, while this
// replica leads; nil on a follower. The leader's raise of the cluster
// version to one that changes what agents are sent waits for them
// (cluster.Node.SetAgentSupport).
func (s *Server) AgentClusterVersions() map[string]uint32 {
	return fromHellos(s, func(t *term) map[string]uint32 { return t.clusterVersions })
}

// fromHellos copies what the agents' hellos said (pick's map of the
// term) while this replica leads; nil on a follower.
func fromHellos[V any](s *Server, pick func(*term) map[string]V) map[string]V {
	s.leaderMu.Lock()
	t := s.term
	s.leaderMu.Unlock()
	if t == nil {
		return nil
	}
	t.relMu.Lock()
	defer t.relMu.Unlock()
	return maps.Clone(pick(t))
}

// ReplicaReleases is each replica's release as its gossip metadata
// announces it (cluster.Member.Version); a member gossip does not know
// yet is missing.
func (s *Server) ReplicaReleases() map[string]string {
	members, err := s.node.Members()
	if err != nil {
		return nil
	}
	out := make(map[string]string, len(members))
	for _, m := range members {
		if m.Version != "" {
			out[m.ID] = m.Version
		}
	}
	return out
}

// replicaStorage says, for every member this replica knows, whether its
// storage failed (grapnel_storage_failed).
func (s *Server) replicaStorage() map[string]bool {
	members, err := s.node.Members()
	if err != nil {
		return nil
	}
	out := make(map[string]bool, len(members))
	for _, m := range members {
		out[m.ID] = m.StorageFailed != ""
	}
	return out
}

// Agents answers the agents' releases (leader only: they live in its
// memory).
func (c *clusterService) Agents(ctx context.Context, _ *grapnelpb.AgentsRequest) (*grapnelpb.AgentsResponse, error) {
	if err := c.requireLeader(ctx); err != nil {
		return nil, err
	}
	rel := c.releases()
	resp := &grapnelpb.AgentsResponse{Agents: make([]*grapnelpb.AgentInfo, 0, len(rel))}
	for _, name := range state.SortedKeys(rel) {
		resp.Agents = append(resp.Agents, &grapnelpb.AgentInfo{Name: name, Release: rel[name]})
	}
	return resp, nil
}
