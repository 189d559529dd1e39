package client

import (
	"context"
	"errors"
	"fmt"
	"strings"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/grapnel-io/grapnel/internal/errs"
	"github.com/grapnel-io/grapnel/rpc"
	"github.com/grapnel-io/grapnel/rpc/grapnelpb"
)

// DialCluster connects to the Cluster service of the leader, for the
// operator verbs. Unary calls that meet a NotLeaderError (leadership moved
// meanwhile) are sent again to the leader it names; streaming calls go to
// the leader known when they start. close releases the connections. The
// address returned is the leader's when DialCluster returned.
func DialCluster(ctx context.Context, o Options) (grapnelpb.ClusterClient, string, func() error, error) {
	r, err := NewResolver(o)
	if err != nil {
		return nil, "", nil, err
	}
	octx, cancel := context.WithTimeout(ctx, o.timeout())
	defer cancel()
	addr, err := r.Leader(octx)
	if err == nil && r.isLegacy(addr) {
		err = fmt.Errorf("%w: %s does not offer Grapnel's cluster service (an Ankaios server?)", ErrRejected, addr)
	}
	if err != nil {
		r.Close()
		if ctx.Err() != nil {
			return nil, "", nil, ctx.Err()
		}
		return nil, "", nil, err
	}
	return &leaderCluster{r: r}, addr, r.Close, nil
}

// DialReplica connects to the Cluster service of the first replica in
// o.Addrs that answers, leader or not: what an operator needs to see the
// replica set or save a snapshot while the cluster has no leader.
func DialReplica(ctx context.Context, o Options) (grapnelpb.ClusterClient, string, func() error, error) {
	r, err := NewResolver(o)
	if err != nil {
		return nil, "", nil, err
	}
	octx, cancel := context.WithTimeout(ctx, o.timeout())
	defer cancel()
	var tried []string
	for _, addr := range o.Addrs {
		cc, err := r.conn(addr)
		if err == nil {
			qctx, qcancel := context.WithTimeout(octx, o.probeTimeout())
			_, err = grapnelpb.NewClusterClient(cc).Status(qctx, &grapnelpb.StatusRequest{})
			qcancel()
			if err == nil {
				return grapnelpb.NewClusterClient(cc), addr, r.Close, nil
			}
			if status.Code(err) == codes.Unimplemented {
				r.Close()
				return nil, "", nil, fmt.Errorf("%w: %s does not offer Grapnel's cluster service (an Ankaios server?)", ErrRejected, addr)
			}
		}
		if ctx.Err() != nil {
			r.Close()
			return nil, "", nil, ctx.Err()
		}
		tried = append(tried, fmt.Sprintf("%s (%s)", addr, statusText(err)))
	}
	r.Close()
	return nil, "", nil, fmt.Errorf("%w: tried %s", ErrNoServer, strings.Join(tried, ", "))
}

// leaderCluster is a ClusterClient that always calls the leader.
type leaderCluster struct {
	r *Resolver
}

func (l *leaderCluster) leader(ctx context.Context) (grapnelpb.ClusterClient, error) {
	addr, err := l.r.Leader(ctx)
	if err != nil {
		return nil, err
	}
	cc, err := l.r.conn(addr)
	if err != nil {
		return nil, err
	}
	return grapnelpb.NewClusterClient(cc), nil
}

// unary calls the leader, following a NotLeaderError to the leader it
// names. Nothing happened where that error came from, so calling again is
// safe.
func unary[T any](ctx context.Context, l *leaderCluster, call func(grapnelpb.ClusterClient) (T, error)) (T, error) {
	for hops := 0; ; hops++ {
		c, err := l.leader(ctx)
		if err != nil {
			var zero T
			return zero, err
		}
		v, err := call(c)
		var nl *errs.NotLeaderError
		if err != nil && hops < maxRedirects && errors.As(rpc.FromStatus(err), &nl) && nl.LeaderAddress != "" {
			l.r.redirect(nl.LeaderID, nl.LeaderAddress)
			continue
		}
		return v, err
	}
}

func (l *leaderCluster) Status(ctx context.Context, in *grapnelpb.StatusRequest, opts ...grpc.CallOption) (*grapnelpb.StatusResponse, error) {
	return unary(ctx, l, func(c grapnelpb.ClusterClient) (*grapnelpb.StatusResponse, error) { return c.Status(ctx, in, opts...) })
}

func (l *leaderCluster) AddReplica(ctx context.Context, in *grapnelpb.AddReplicaRequest, opts ...grpc.CallOption) (*grapnelpb.AddReplicaResponse, error) {
	return unary(ctx, l, func(c grapnelpb.ClusterClient) (*grapnelpb.AddReplicaResponse, error) {
		return c.AddReplica(ctx, in, opts...)
	})
}

func (l *leaderCluster) RemoveReplica(ctx context.Context, in *grapnelpb.RemoveReplicaRequest, opts ...grpc.CallOption) (*grapnelpb.RemoveReplicaResponse, error) {
	return unary(ctx, l, func(c grapnelpb.ClusterClient) (*grapnelpb.RemoveReplicaResponse, error) {
		return c.RemoveReplica(ctx, in, opts...)
	})
}

func (l *leaderCluster) TransferLeadership(ctx context.Context, in *grapnelpb.TransferLeadershipRequest, opts ...grpc.CallOption) (*grapnelpb.TransferLeadershipResponse, error) {
	return unary(ctx, l, func(c grapnelpb.ClusterClient) (*grapnelpb.TransferLeadershipResponse, error) {
		return c.TransferLeadership(ctx, in, opts...)
	})
}

func (l *leaderCluster) ResyncAgent(ctx context.Context, in *grapnelpb.ResyncAgentRequest, opts ...grpc.CallOption) (*grapnelpb.ResyncAgentResponse, error) {
	return unary(ctx, l, func(c grapnelpb.ClusterClient) (*grapnelpb.ResyncAgentResponse, error) {
		return c.ResyncAgent(ctx, in, opts...)
	})
}

func (l *leaderCluster) SetAgentMode(ctx context.Context, in *grapnelpb.SetAgentModeRequest, opts ...grpc.CallOption) (*grapnelpb.SetAgentModeResponse, error) {
	return unary(ctx, l, func(c grapnelpb.ClusterClient) (*grapnelpb.SetAgentModeResponse, error) {
		return c.SetAgentMode(ctx, in, opts...)
	})
}

func (l *leaderCluster) Placement(ctx context.Context, in *grapnelpb.PlacementRequest, opts ...grpc.CallOption) (*grapnelpb.PlacementResponse, error) {
	return unary(ctx, l, func(c grapnelpb.ClusterClient) (*grapnelpb.PlacementResponse, error) {
		return c.Placement(ctx, in, opts...)
	})
}

func (l *leaderCluster) Agents(ctx context.Context, in *grapnelpb.AgentsRequest, opts ...grpc.CallOption) (*grapnelpb.AgentsResponse, error) {
	return unary(ctx, l, func(c grapnelpb.ClusterClient) (*grapnelpb.AgentsResponse, error) {
		return c.Agents(ctx, in, opts...)
	})
}

func (l *leaderCluster) UpgradeStatus(ctx context.Context, in *grapnelpb.UpgradeStatusRequest, opts ...grpc.CallOption) (*grapnelpb.UpgradeStatusResponse, error) {
	return unary(ctx, l, func(c grapnelpb.ClusterClient) (*grapnelpb.UpgradeStatusResponse, error) {
		return c.UpgradeStatus(ctx, in, opts...)
	})
}

func (l *leaderCluster) UpgradeFinalize(ctx context.Context, in *grapnelpb.UpgradeFinalizeRequest, opts ...grpc.CallOption) (*grapnelpb.UpgradeFinalizeResponse, error) {
	return unary(ctx, l, func(c grapnelpb.ClusterClient) (*grapnelpb.UpgradeFinalizeResponse, error) {
		return c.UpgradeFinalize(ctx, in, opts...)
	})
}

// RepairReplica goes to the leader like the rest; `grapnel cluster
// repair` calls the replica it names instead (DialReplica), since a
// replica that holds its vote may be why there is no leader.
func (l *leaderCluster) RepairReplica(ctx context.Context, in *grapnelpb.RepairReplicaRequest, opts ...grpc.CallOption) (*grapnelpb.RepairReplicaResponse, error) {
	return unary(ctx, l, func(c grapnelpb.ClusterClient) (*grapnelpb.RepairReplicaResponse, error) {
		return c.RepairReplica(ctx, in, opts...)
	})
}

func (l *leaderCluster) Watch(ctx context.Context, in *grapnelpb.WatchRequest, opts ...grpc.CallOption) (grpc.ServerStreamingClient[grapnelpb.WatchEvent], error) {
	c, err := l.leader(ctx)
	if err != nil {
		return nil, err
	}
	return c.Watch(ctx, in, opts...)
}

func (l *leaderCluster) SnapshotSave(ctx context.Context, in *grapnelpb.SnapshotSaveRequest, opts ...grpc.CallOption) (grpc.ServerStreamingClient[grapnelpb.SnapshotChunk], error) {
	c, err := l.leader(ctx)
	if err != nil {
		return nil, err
	}
	return c.SnapshotSave(ctx, in, opts...)
}

func (l *leaderCluster) SnapshotRestore(ctx context.Context, opts ...grpc.CallOption) (grpc.ClientStreamingClient[grapnelpb.SnapshotChunk, grapnelpb.SnapshotRestoreResponse], error) {
	c, err := l.leader(ctx)
	if err != nil {
		return nil, err
	}
	return c.SnapshotRestore(ctx, opts...)
}
