package server

import (
	"context"

	"google.golang.org/grpc"

	"github.com/grapnel-io/grapnel/rpc/grapnelpb"
	"github.com/grapnel-io/grapnel/state"
)

// problemsService answers Grapnel's Problems service (docs/problems.md).
// The leader answers from its FSM, which holds every problem it recorded;
// a follower forwards the call to the leader, or names the leader to a
// leader-aware client, as the Plan service does, so that a reader never
// sees a problem list older than the leader's.
type problemsService struct {
	grapnelpb.UnimplementedProblemsServer
	s *Server
}

// registerProblems adds the Problems service; RegisterCluster calls it.
func (s *Server) registerProblems(g grpc.ServiceRegistrar) {
	grapnelpb.RegisterProblemsServer(g, &problemsService{s: s})
}

// List returns the open problems, oldest id first.
func (p *problemsService) List(ctx context.Context, req *grapnelpb.ProblemsListRequest) (*grapnelpb.ProblemsListResponse, error) {
	s := p.s
	d, err := s.findLeader(ctx)
	if err != nil {
		return nil, err
	}
	if d.t == nil {
		if err := s.notProxied(ctx, "call", d); err != nil {
			return nil, err
		}
		cc, err := s.leaderConn(d)
		if err != nil {
			return nil, err
		}
		return grapnelpb.NewProblemsClient(cc).List(s.outgoing(ctx), req)
	}
	resp := &grapnelpb.ProblemsListResponse{ReplicaId: s.node.ID()}
	s.fsm.Read(func(st *state.Store, applied uint64) {
		resp.AppliedIndex = applied
		resp.LastId = st.Problems.LastID
		for _, pr := range st.Problems.List() {
			resp.Problems = append(resp.Problems, problemToProto(pr))
		}
	})
	return resp, nil
}

// problemToProto is a problem on the wire.
func problemToProto(p *state.Problem) *grapnelpb.Problem {
	out := &grapnelpb.Problem{Id: p.ID, Kind: p.Kind, Summary: p.Summary, Detail: p.Detail, SinceMs: p.SinceMs, Key: p.Key,
		LastUpdatedMs: p.LastUpdatedMs()}
	for _, o := range p.Objects {
		out.Objects = append(out.Objects, &grapnelpb.ProblemObject{Kind: o.Kind, Name: o.Name})
	}
	return out
}
