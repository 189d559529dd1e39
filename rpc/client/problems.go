package client

import (
	"context"
	"errors"
	"fmt"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/grapnel-io/grapnel/internal/errs"
	"github.com/grapnel-io/grapnel/rpc"
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
	var zero *grapnelpb.ProblemsListResponse
	for hops := 0; ; hops++ {
		addr, err := l.r.Leader(ctx)
		if err != nil {
			return zero, err
		}
		if l.r.isLegacy(addr) {
			return zero, fmt.Errorf("%w: %s does not offer Grapnel's problems service (an Ankaios server?)", ErrRejected, addr)
		}
		cc, err := l.r.conn(addr)
		if err != nil {
			return zero, err
		}
		v, err := grapnelpb.NewProblemsClient(cc).List(wire.WithLeaderAware(ctx), in, opts...)
		if err == nil {
			return v, nil
		}
		if status.Code(err) == codes.Unimplemented {
			return zero, fmt.Errorf("%w: %s does not offer Grapnel's problems service (an older Grapnel or an Ankaios server?)", ErrRejected, addr)
		}
		err = rpc.FromStatus(err)
		var nl *errs.NotLeaderError
		if hops < maxRedirects && errors.As(err, &nl) && nl.LeaderAddress != "" {
			l.r.redirect(nl.LeaderID, nl.LeaderAddress)
			continue
		}
		return zero, err
	}
}
