package server

import (
	"context"
	"strconv"

	"github.com/hashicorp/raft"
	"google.golang.org/grpc"

	"github.com/grapnel-io/grapnel/cluster"
	"github.com/grapnel-io/grapnel/rpc"
	"github.com/grapnel-io/grapnel/rpc/grapnelpb"
)

// clusterService answers Grapnel's own Cluster.Status: the replica set and
// the leader this replica sees.
type clusterService struct {
	grapnelpb.UnimplementedClusterServer
	node *cluster.Node
}

// RegisterCluster adds Grapnel's cluster service to a gRPC server.
func RegisterCluster(g *grpc.Server, node *cluster.Node) {
	grapnelpb.RegisterClusterServer(g, clusterService{node: node})
}

func (c clusterService) Status(ctx context.Context, _ *grapnelpb.StatusRequest) (*grapnelpb.StatusResponse, error) {
	r := c.node.Raft()
	fut := r.GetConfiguration()
	if err := fut.Error(); err != nil {
		return nil, rpc.ToStatus(err)
	}
	leaderAddr, leaderID := r.LeaderWithID()
	stats := r.Stats()
	resp := &grapnelpb.StatusResponse{
		ReplicaId:    c.node.ID(),
		LeaderId:     string(leaderID),
		Term:         parseUint(stats["term"]),
		CommitIndex:  parseUint(stats["commit_index"]),
		AppliedIndex: parseUint(stats["applied_index"]),
	}
	for _, s := range fut.Configuration().Servers {
		resp.Members = append(resp.Members, &grapnelpb.Member{
			Id: string(s.ID), RaftAddress: string(s.Address), Role: "server",
			Voter: s.Suffrage == raft.Voter, Leader: s.ID == leaderID, Healthy: true, LastContactMs: -1,
		})
	}
	_ = leaderAddr
	return resp, nil
}

func parseUint(s string) uint64 {
	v, _ := strconv.ParseUint(s, 10, 64)
	return v
}
