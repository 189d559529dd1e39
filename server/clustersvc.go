package server

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"strconv"
	"time"

	"google.golang.org/grpc"

	"github.com/grapnel-io/grapnel/cluster"
	"github.com/grapnel-io/grapnel/fsm"
	"github.com/grapnel-io/grapnel/internal/clock"
	"github.com/grapnel-io/grapnel/internal/errs"
	"github.com/grapnel-io/grapnel/rpc/grapnelpb"
	"github.com/grapnel-io/grapnel/state"
)

// Watch heartbeat bounds: the default suits a client that declares a
// replica dead after a second of silence; the minimum keeps a careless
// client from turning the watch into a busy loop.
const (
	DefaultWatchHeartbeat = 250 * time.Millisecond
	MinWatchHeartbeat     = 50 * time.Millisecond
)

// snapshotChunkSize is the payload of one SnapshotChunk, well under gRPC's
// 4 MiB message limit.
const snapshotChunkSize = 64 << 10

// defaultOpTimeout bounds an operator action whose caller set no deadline.
const defaultOpTimeout = 30 * time.Second

// clusterService answers Grapnel's Cluster service: the replica set and
// its leader, the heartbeat watch, and the operator actions.
type clusterService struct {
	grapnelpb.UnimplementedClusterServer
	node     *cluster.Node
	conns    *registry
	clk      clock.Clock
	hold     time.Duration
	shutdown <-chan struct{}
	spool    *restoreSpool
	// resync hands a drift repair request to the leader loop.
	resync func(ctx context.Context, agent string) error
	// setMode hands an agent mode to the leader loop; placement reads the
	// modes, the layout and the last allocation's shortfalls
	// (placementsvc.go).
	setMode   func(ctx context.Context, agent string, mode state.AgentMode, requester string, force bool) error
	placement func() *grapnelpb.PlacementResponse
	// releases reads the agents' releases from the leader's memory
	// (releases.go).
	releases func() map[string]string
}

// RegisterCluster adds Grapnel's Cluster service to a gRPC server, tied to
// the server: leader-only calls hold for Config.HoldTimeout while no
// leader is known, and watches end on Shutdown. It removes what a restore
// interrupted by a crash left in the restore spool. It registers the
// History service (historysvc.go) and the Problems service
// (problemssvc.go) along with it.
func (s *Server) RegisterCluster(g grpc.ServiceRegistrar) {
	s.registerHistory(g)
	s.registerProblems(g)
	grapnelpb.RegisterClusterServer(g, &clusterService{node: s.node, conns: s.conns, clk: s.clock(), hold: s.holdTimeout(), shutdown: s.shutdownCh,
		spool: newRestoreSpool(s.node.DataDir(), s.cfg.MaxRestoreBytes, s.log), resync: s.resyncAgent,
		setMode: s.setAgentMode, placement: s.placementView, releases: s.AgentReleases})
}

// Status tells the replica set and the leader this replica sees. Any
// replica answers, leader or not: that is how a client finds the leader.
func (c *clusterService) Status(context.Context, *grapnelpb.StatusRequest) (*grapnelpb.StatusResponse, error) {
	return c.status()
}

func (c *clusterService) status() (*grapnelpb.StatusResponse, error) {
	members, err := c.node.Members()
	if err != nil {
		return nil, fmt.Errorf("reading the replica set: %w", err)
	}
	leaderID, leaderAddr, term := c.leaderAndTerm()
	stats := c.node.Stats()
	resp := &grapnelpb.StatusResponse{
		ReplicaId:         c.node.ID(),
		LeaderId:          leaderID,
		LeaderGrpcAddress: leaderAddr,
		Term:              term,
		CommitIndex:       statUint(stats, "commit_index"),
		AppliedIndex:      statUint(stats, "applied_index"),
		Members:           make([]*grapnelpb.Member, 0, len(members)),
		AttachedAgents:    c.conns.agentNames(),
	}
	for _, m := range members {
		resp.Members = append(resp.Members, memberToProto(m))
	}
	if seen, expect := c.node.Forming(); expect > 0 {
		resp.FormingExpect, resp.FormingSeen = uint32(expect), uint32(len(seen))
	}
	return resp, nil
}

// memberToProto is a member on the wire.
func memberToProto(m cluster.Member) *grapnelpb.Member {
	contact := int64(-1)
	if m.LastContact >= 0 {
		contact = m.LastContact.Milliseconds()
	}
	return &grapnelpb.Member{
		Id: m.ID, GrpcAddress: m.GRPCAddress, RaftAddress: m.RaftAddress, GossipAddress: m.GossipAddress,
		Role: m.Role, Voter: m.Voter, Healthy: m.Healthy, Leader: m.Leader, LastContactMs: contact,
		Version: m.Version, GossipStatus: m.GossipStatus, LeaderSeen: m.LeaderSeen, ClusterVersion: m.ClusterVersion,
		VoteHold: m.VoteHold,
	}
}

// UpgradeStatus tells the cluster version, what the voters' releases
// support and who is behind, as this replica sees it (any replica
// answers; docs/upgrade.md).
func (c *clusterService) UpgradeStatus(ctx context.Context, _ *grapnelpb.UpgradeStatusRequest) (*grapnelpb.UpgradeStatusResponse, error) {
	st, err := c.node.Upgrade()
	if err != nil {
		return nil, c.clusterErr(err)
	}
	members, err := c.node.Members()
	if err != nil {
		return nil, c.clusterErr(err)
	}
	resp := &grapnelpb.UpgradeStatusResponse{
		ReplicaId: c.node.ID(), ClusterVersion: st.ClusterVersion, Supported: st.Supported, Target: st.Target,
		Behind: st.Behind, RollbackPossible: st.RollbackPossible(), FinalizeAfterMs: st.FinalizeAfter.Milliseconds(),
	}
	for _, m := range members {
		resp.Members = append(resp.Members, memberToProto(m))
	}
	for _, f := range state.Features {
		resp.Features = append(resp.Features, &grapnelpb.ClusterVersionFeature{Version: f.Version, Name: f.Name, Waiting: f.Waiting})
	}
	return resp, nil
}

// UpgradeFinalize raises the cluster version to the newest every voter
// supports (leader only; see cluster.Node.FinalizeUpgrade): it is cluster
// administration, for operators only.
func (c *clusterService) UpgradeFinalize(ctx context.Context, _ *grapnelpb.UpgradeFinalizeRequest) (*grapnelpb.UpgradeFinalizeResponse, error) {
	if err := c.requireLeader(ctx); err != nil {
		return nil, err
	}
	from, to, err := c.node.FinalizeUpgrade()
	if err != nil {
		return nil, c.clusterErr(err)
	}
	return &grapnelpb.UpgradeFinalizeResponse{From: from, To: to}, nil
}

// RepairReplica releases this replica's vote hold (cluster.Node.
// ReleaseVoteHold): cluster administration, answered by the replica the
// request names, leader or not, since a held vote may be why there is no
// leader.
func (c *clusterService) RepairReplica(_ context.Context, req *grapnelpb.RepairReplicaRequest) (*grapnelpb.RepairReplicaResponse, error) {
	if req.GetId() != c.node.ID() {
		return nil, errs.WithText(errs.ErrOtherReplica, fmt.Sprintf("field id: %q is not this replica (%s): send the repair to %q itself",
			req.GetId(), c.node.ID(), req.GetId()))
	}
	what, err := c.node.ReleaseVoteHold()
	if errors.Is(err, errs.ErrNoVoteHold) {
		return nil, errs.WithText(errs.ErrNoVoteHold, fmt.Sprintf("replica %s holds no vote: it lost no Raft entries or has caught up; nothing to repair", c.node.ID()))
	}
	if err != nil {
		return nil, err
	}
	return &grapnelpb.RepairReplicaResponse{Released: what}, nil
}

// leaderAndTerm reads the leader together with the term it belongs to:
// the term is read before and after the leader (Raft's CurrentTerm, a
// cheap atomic read, unlike Stats, which this status is built from every
// heartbeat), and the pair is used only when it did not move (a few tries;
// a term that keeps moving is reported without a leader). A follower may
// still name the leader it last heard of in a newer term, before it hears
// from the new one, which is why the chaos campaign checks one leader per
// term on the replicas' claims about themselves.
func (c *clusterService) leaderAndTerm() (id, addr string, term uint64) {
	r := c.node.Raft()
	for range 3 {
		term = r.CurrentTerm()
		id, _, addr = c.node.LeaderInfo()
		if r.CurrentTerm() == term {
			return id, addr, term
		}
	}
	return "", "", r.CurrentTerm()
}

// Watch sends the status at once, again on every leadership or membership
// change, and repeats the last one as a heartbeat whenever nothing was
// sent for the interval the client asked for. It ends with the call, or
// with errs.ErrShuttingDown when the replica stops.
func (c *clusterService) Watch(req *grapnelpb.WatchRequest, st grpc.ServerStreamingServer[grapnelpb.WatchEvent]) error {
	interval := watchInterval(req.GetHeartbeatMs())
	changes, unsubscribe := c.node.Changes()
	defer unsubscribe()
	last, err := c.status()
	if err != nil {
		return err
	}
	if err := st.Send(&grapnelpb.WatchEvent{Status: last}); err != nil {
		return err
	}
	// beat is signalled at the first slot of interval after a send
	// (clock.NextSlot): every watch with the same interval beats at the
	// same instants, and with the leader's Raft heartbeats, so a replica
	// with many watchers wakes once per interval for all of them rather
	// than once for each; the gap after a send stays at most one interval.
	// The timer is re-armed after every send.
	beat := make(chan struct{}, 1)
	arm := func() clock.Timer {
		now := c.clk.Now()
		return c.clk.AfterFunc(clock.UntilSlot(now, interval), func() {
			select {
			case beat <- struct{}{}:
			default:
			}
		})
	}
	timer := arm()
	defer func() { timer.Stop() }()
	for {
		ev := &grapnelpb.WatchEvent{Status: last, Heartbeat: true}
		select {
		case <-changes:
			if last, err = c.status(); err != nil {
				return err
			}
			ev = &grapnelpb.WatchEvent{Status: last}
		case <-beat:
		case <-st.Context().Done():
			return nil
		case <-c.shutdown:
			return fmt.Errorf("%w: replica %s stops", errs.ErrShuttingDown, c.node.ID())
		}
		timer.Stop()
		select {
		case <-beat: // fired while we were busy: this send covers it
		default:
		}
		if err := st.Send(ev); err != nil {
			return err
		}
		timer = arm()
	}
}

// watchInterval turns the requested heartbeat into an interval: 0 takes
// the default, anything under the minimum the minimum.
func watchInterval(ms uint32) time.Duration {
	d := time.Duration(ms) * time.Millisecond
	switch {
	case ms == 0:
		return DefaultWatchHeartbeat
	case d < MinWatchHeartbeat:
		return MinWatchHeartbeat
	}
	return d
}

// RemoveReplica takes a replica out of the Raft configuration (leader
// only).
func (c *clusterService) RemoveReplica(ctx context.Context, req *grapnelpb.RemoveReplicaRequest) (*grapnelpb.RemoveReplicaResponse, error) {
	if req.GetId() == "" {
		return nil, fmt.Errorf("%w: id: the replica to remove must be named", state.ErrInvalid)
	}
	if err := c.requireLeader(ctx); err != nil {
		return nil, err
	}
	already, err := c.node.RemoveReplica(req.GetId(), opTimeout(ctx))
	if err != nil {
		return nil, c.clusterErr(err)
	}
	return &grapnelpb.RemoveReplicaResponse{AlreadyRemoved: already}, nil
}

// AddReplica is an operator's approval of a replica (leader only; see
// cluster.Node.AddReplica). Who may call it is the authorization's
// concern: it is cluster administration, for operators only.
func (c *clusterService) AddReplica(ctx context.Context, req *grapnelpb.AddReplicaRequest) (*grapnelpb.AddReplicaResponse, error) {
	if !state.ValidName(req.GetId()) {
		return nil, fmt.Errorf("%w: id: %q: a replica id uses only [a-zA-Z0-9_-]", state.ErrInvalid, req.GetId())
	}
	if host, port, err := net.SplitHostPort(req.GetRaftAddress()); err != nil || host == "" || port == "" {
		return nil, fmt.Errorf("%w: raftAddress: %q is not host:port (the replica's --raft-address)", state.ErrInvalid, req.GetRaftAddress())
	}
	if err := c.requireLeader(ctx); err != nil {
		return nil, err
	}
	if err := c.node.AddReplica(req.GetId(), req.GetRaftAddress(), opTimeout(ctx)); err != nil {
		return nil, c.clusterErr(err)
	}
	return &grapnelpb.AddReplicaResponse{}, nil
}

// ResyncAgent asks an agent for a drift repair round (leader only); it
// answers once the request is queued on the agent's stream.
func (c *clusterService) ResyncAgent(ctx context.Context, req *grapnelpb.ResyncAgentRequest) (*grapnelpb.ResyncAgentResponse, error) {
	if !state.ValidName(req.GetAgent()) {
		return nil, fmt.Errorf("%w: agent %q: name the agent ([a-zA-Z0-9_-])", state.ErrInvalid, req.GetAgent())
	}
	if err := c.requireLeader(ctx); err != nil {
		return nil, err
	}
	if err := c.resync(ctx, req.GetAgent()); err != nil {
		return nil, err
	}
	return &grapnelpb.ResyncAgentResponse{}, nil
}

// TransferLeadership hands leadership to another voter (leader only) and
// answers once a new leader is known, naming it.
func (c *clusterService) TransferLeadership(ctx context.Context, req *grapnelpb.TransferLeadershipRequest) (*grapnelpb.TransferLeadershipResponse, error) {
	if err := c.requireLeader(ctx); err != nil {
		return nil, err
	}
	self := c.node.ID()
	if err := c.node.TransferLeadership(req.GetTo()); err != nil {
		return nil, c.clusterErr(err)
	}
	if req.GetTo() == self {
		return &grapnelpb.TransferLeadershipResponse{NewLeaderId: self}, nil
	}
	var newLeader string
	err := holdFor(ctx, c.node, c.clk, c.hold, c.shutdown, nil, func() bool {
		id, _, _ := c.node.LeaderInfo()
		newLeader = id
		return id != "" && id != self
	})
	if errors.Is(err, errHoldExpired) {
		return nil, fmt.Errorf("%w: %s handed leadership over, but no new leader was seen; waited %v", errs.ErrNoLeader, self, c.hold)
	}
	if err != nil {
		return nil, err
	}
	return &grapnelpb.TransferLeadershipResponse{NewLeaderId: newLeader}, nil
}

// SnapshotSave streams a fresh snapshot of the replicated state in chunks.
// Any replica answers, so that the state of a surviving replica can be
// saved even when the quorum is lost; the leader's is the newest.
func (c *clusterService) SnapshotSave(_ *grapnelpb.SnapshotSaveRequest, st grpc.ServerStreamingServer[grapnelpb.SnapshotChunk]) error {
	w := &chunkWriter{send: st.Send}
	if _, err := c.node.SaveSnapshot(w); err != nil {
		return c.clusterErr(err)
	}
	return w.flush()
}

// chunkWriter cuts what is written to it into SnapshotChunks.
type chunkWriter struct {
	send func(*grapnelpb.SnapshotChunk) error
	buf  []byte
}

func (w *chunkWriter) Write(p []byte) (int, error) {
	n := len(p)
	for len(p) > 0 {
		if w.buf == nil {
			w.buf = make([]byte, 0, snapshotChunkSize)
		}
		k := min(len(p), snapshotChunkSize-len(w.buf))
		w.buf = append(w.buf, p[:k]...)
		p = p[k:]
		if len(w.buf) == snapshotChunkSize {
			if err := w.flush(); err != nil {
				return n - len(p), err
			}
		}
	}
	return n, nil
}

// flush sends what is buffered. Every chunk gets its own buffer: a sent
// message must not change afterwards.
func (w *chunkWriter) flush() error {
	if len(w.buf) == 0 {
		return nil
	}
	chunk := &grapnelpb.SnapshotChunk{Data: w.buf}
	w.buf = nil
	return w.send(chunk)
}

// SnapshotRestore collects a saved snapshot in the data directory's
// restore spool, checks all of it, then replaces the replicated state with
// it on every replica (leader only). It answers the index of the restored
// snapshot. An upload over the cap or not a whole, undamaged snapshot is
// refused before Raft sees it: the replica keeps its state and snapshots.
func (c *clusterService) SnapshotRestore(st grpc.ClientStreamingServer[grapnelpb.SnapshotChunk, grapnelpb.SnapshotRestoreResponse]) error {
	ctx := st.Context()
	if err := c.requireLeader(ctx); err != nil {
		return err
	}
	err := c.spool.restore(ctx, st.Recv, func(r io.Reader, size int64) error {
		if err := c.node.RestoreSnapshot(r, size, opTimeout(ctx)); err != nil {
			return fmt.Errorf("snapshot restore: %w", err)
		}
		return nil
	})
	if err != nil {
		return c.clusterErr(err)
	}
	return st.SendAndClose(&grapnelpb.SnapshotRestoreResponse{Index: statUint(c.node.Stats(), "last_snapshot_index")})
}

// requireLeader holds while no leader is known, then lets the call run if
// this replica leads, and otherwise names the leader.
func (c *clusterService) requireLeader(ctx context.Context) error {
	err := holdFor(ctx, c.node, c.clk, c.hold, c.shutdown, nil, func() bool {
		if c.node.IsLeader() {
			return true
		}
		id, _, addr := c.node.LeaderInfo()
		return id != "" && id != c.node.ID() && addr != ""
	})
	if errors.Is(err, errHoldExpired) {
		return noLeader(c.node, c.hold)
	}
	if err != nil {
		return err
	}
	if c.node.IsLeader() {
		return nil
	}
	id, _, addr := c.node.LeaderInfo()
	return &errs.NotLeaderError{LeaderID: id, LeaderAddress: addr}
}

// clusterErr prepares an error of the cluster package for the client. The
// sentinels are shared (internal/errs) and need no translation; what is
// left: a not-leader error names the leader this replica sees, when it
// knows one, so that the client goes there directly; and fsm's
// ErrBadSnapshot, which fsm declares itself because it may import only
// state, becomes errs.ErrBadSnapshot with its text kept.
func (c *clusterService) clusterErr(err error) error {
	var nl *errs.NotLeaderError
	switch {
	case errors.Is(err, errs.ErrNotLeader) && !errors.As(err, &nl):
		if id, _, addr := c.node.LeaderInfo(); id != "" && id != c.node.ID() && addr != "" {
			return &errs.NotLeaderError{LeaderID: id, LeaderAddress: addr}
		}
	case errors.Is(err, fsm.ErrBadSnapshot):
		return errs.WithText(errs.ErrBadSnapshot, err.Error())
	}
	return err
}

// opTimeout is what is left of the caller's deadline, or defaultOpTimeout.
// A context's deadline is on the system clock.
func opTimeout(ctx context.Context) time.Duration {
	if d, ok := ctx.Deadline(); ok {
		return max(clock.Until(clock.Real(), d), time.Millisecond)
	}
	return defaultOpTimeout
}

func statUint(stats map[string]string, key string) uint64 {
	v, _ := strconv.ParseUint(stats[key], 10, 64)
	return v
}
