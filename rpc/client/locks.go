package client

import (
	"context"

	"google.golang.org/grpc"

	"github.com/grapnel-io/grapnel/rpc/grapnelpb"
	"github.com/grapnel-io/grapnel/rpc/wire"
)

// Locks returns a client of Grapnel's Locks service (intent locks) that
// calls the leader r finds, as Plan does.
func (r *Resolver) Locks() grapnelpb.LocksClient { return &leaderLocks{r: r} }

// Locks is the Locks service of the cluster this connection's resolver
// reaches.
func (c *Conn) Locks() grapnelpb.LocksClient { return c.res.Locks() }

// leaderLocks is a LocksClient that always calls the leader.
type leaderLocks struct {
	r *Resolver
}

func (l *leaderLocks) Lock(ctx context.Context, in *grapnelpb.LockRequest, opts ...grpc.CallOption) (*grapnelpb.LockResponse, error) {
	return onLeaderOf(ctx, l.r, "locks", grapnelpb.NewLocksClient, func(c grapnelpb.LocksClient) (*grapnelpb.LockResponse, error) {
		return c.Lock(wire.WithLeaderAware(ctx), in, opts...)
	})
}

func (l *leaderLocks) Unlock(ctx context.Context, in *grapnelpb.UnlockRequest, opts ...grpc.CallOption) (*grapnelpb.UnlockResponse, error) {
	return onLeaderOf(ctx, l.r, "locks", grapnelpb.NewLocksClient, func(c grapnelpb.LocksClient) (*grapnelpb.UnlockResponse, error) {
		return c.Unlock(wire.WithLeaderAware(ctx), in, opts...)
	})
}

func (l *leaderLocks) List(ctx context.Context, in *grapnelpb.ListLocksRequest, opts ...grpc.CallOption) (*grapnelpb.ListLocksResponse, error) {
	return onLeaderOf(ctx, l.r, "locks", grapnelpb.NewLocksClient, func(c grapnelpb.LocksClient) (*grapnelpb.ListLocksResponse, error) {
		return c.List(wire.WithLeaderAware(ctx), in, opts...)
	})
}
