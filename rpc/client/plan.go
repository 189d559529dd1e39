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

// Plan returns a client of Grapnel's Plan service (dry-runs, updates at
// an expected sequence number) that calls the leader r finds. It says it
// is leader-aware, so that a follower names the leader instead of
// forwarding the call, and follows a NotLeaderError to the leader it
// names.
func (r *Resolver) Plan() grapnelpb.PlanClient { return &leaderPlan{r: r} }

// Plan is the Plan service of the cluster this connection's resolver
// reaches.
func (c *Conn) Plan() grapnelpb.PlanClient { return c.res.Plan() }

// Cluster is the Cluster service of the leader this connection's
// resolver finds, for the verbs that add Grapnel's columns to an Ankaios
// command (the agents' modes in `get agents`).
func (c *Conn) Cluster() grapnelpb.ClusterClient { return &leaderCluster{r: c.res} }

// leaderPlan is a PlanClient that always calls the leader.
type leaderPlan struct {
	r *Resolver
}

func (l *leaderPlan) DryRun(ctx context.Context, in *grapnelpb.PlanRequest, opts ...grpc.CallOption) (*grapnelpb.PlanResponse, error) {
	return onLeader(ctx, l.r, func(c grapnelpb.PlanClient) (*grapnelpb.PlanResponse, error) {
		return c.DryRun(wire.WithLeaderAware(ctx), in, opts...)
	})
}

func (l *leaderPlan) Apply(ctx context.Context, in *grapnelpb.ApplyRequest, opts ...grpc.CallOption) (*grapnelpb.ApplyResponse, error) {
	return onLeader(ctx, l.r, func(c grapnelpb.PlanClient) (*grapnelpb.ApplyResponse, error) {
		return c.Apply(wire.WithLeaderAware(ctx), in, opts...)
	})
}

func (l *leaderPlan) Revision(ctx context.Context, in *grapnelpb.RevisionRequest, opts ...grpc.CallOption) (*grapnelpb.RevisionResponse, error) {
	return onLeader(ctx, l.r, func(c grapnelpb.PlanClient) (*grapnelpb.RevisionResponse, error) {
		return c.Revision(wire.WithLeaderAware(ctx), in, opts...)
	})
}

// onLeader calls the leader's Plan service, following a NotLeaderError to
// the leader it names: a replica that answers it has done nothing, so
// calling again is safe. The error is turned back into Grapnel's
// sentinels (rpc.FromStatus); a server without the service (an Ankaios
// server) is named as such.
func onLeader[T any](ctx context.Context, r *Resolver, call func(grapnelpb.PlanClient) (T, error)) (T, error) {
	return onLeaderOf(ctx, r, "plan", grapnelpb.NewPlanClient, call)
}

// onLeaderOf is onLeader for any of Grapnel's leader-only services: name
// names it in errors, newClient makes its client.
func onLeaderOf[C, T any](ctx context.Context, r *Resolver, name string, newClient func(grpc.ClientConnInterface) C, call func(C) (T, error)) (T, error) {
	var zero T
	for hops := 0; ; hops++ {
		addr, err := r.Leader(ctx)
		if err != nil {
			return zero, err
		}
		if r.isLegacy(addr) {
			return zero, fmt.Errorf("%w: %s does not offer Grapnel's %s service (an Ankaios server?)", ErrRejected, addr, name)
		}
		cc, err := r.conn(addr)
		if err != nil {
			return zero, err
		}
		v, err := call(newClient(cc))
		if err == nil {
			return v, nil
		}
		if status.Code(err) == codes.Unimplemented {
			return zero, fmt.Errorf("%w: %s does not offer Grapnel's %s service (an older Grapnel or an Ankaios server?)", ErrRejected, addr, name)
		}
		err = rpc.FromStatus(err)
		var nl *errs.NotLeaderError
		if hops < maxRedirects && errors.As(err, &nl) && nl.LeaderAddress != "" {
			r.redirect(nl.LeaderID, nl.LeaderAddress)
			continue
		}
		return zero, err
	}
}
