package client

import (
	"context"

	"google.golang.org/grpc"

	"github.com/grapnel-io/grapnel/rpc/grapnelpb"
	"github.com/grapnel-io/grapnel/rpc/wire"
)

// Problems returns a client of Grapnel's Problems service (the problems
// view, docs/problems.md) that calls the leader r finds, as Plan does:
// it says it is leader-aware, so that a follower names the leader
// instead of forwarding the call, and follows a NotLeaderError to it.
func (r *Resolver) Problems() grapnelpb.ProblemsClient { return &leaderProblems{r: r} }

// Problems is the Problems service of the cluster this connection's
// resolver reaches.
func (c *Conn) Problems() grapnelpb.ProblemsClient { return c.res.Problems() }

// leaderProblems is a ProblemsClient that always calls the leader.
type leaderProblems struct {
	r *Resolver
}

func (l *leaderProblems) List(ctx context.Context, in *grapnelpb.ProblemsListRequest, opts ...grpc.CallOption) (*grapnelpb.ProblemsListResponse, error) {
	return onLeaderOf(ctx, l.r, "problems", grapnelpb.NewProblemsClient, func(c grapnelpb.ProblemsClient) (*grapnelpb.ProblemsListResponse, error) {
		return c.List(wire.WithLeaderAware(ctx), in, opts...)
	})
}
