package client

import (
	"context"
	"net"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/metadata"

	"github.com/grapnel-io/grapnel/cluster/faultnet"
	"github.com/grapnel-io/grapnel/internal/errs"
	"github.com/grapnel-io/grapnel/rpc"
	"github.com/grapnel-io/grapnel/rpc/ankbase"
	"github.com/grapnel-io/grapnel/rpc/grapnelpb"
	"github.com/grapnel-io/grapnel/rpc/grpcapi"
	"github.com/grapnel-io/grapnel/rpc/wire"
)

// fakeCluster is a set of fake Grapnel replicas that agree on a leader the
// test sets. Each serves Cluster (Status, Watch, RemoveReplica), and the
// CLI and agent streams the way a Grapnel replica does: the leader accepts
// with its replica-id header, a follower answers with a NotLeaderError.
type fakeCluster struct {
	t *testing.T

	mu      sync.Mutex // guards the following fields
	leader  string     // id; "" while none
	term    uint64     // grows with every setLeader, as a Raft term does
	changed chan struct{}
	reps    []*fakeReplica
}

type fakeReplica struct {
	grapnelpb.UnimplementedClusterServer
	grpcapi.UnimplementedCliConnectionServer
	grpcapi.UnimplementedAgentConnectionServer
	fc   *fakeCluster
	id   string
	addr string

	// claimsLead makes Status and Watch say this replica leads whatever
	// the cluster says: a stale view.
	claimsLead atomic.Bool
	// silent stops Watch from sending anything, as a hung replica.
	silent atomic.Bool
	// names, when set, is the leader id this replica's Status names
	// whatever the cluster says ("-" for none): a follower that still
	// names the leader it last heard of, or an old leader that stepped
	// down.
	names atomic.Pointer[string]
	// statusDelay holds Status answers back, so that others come first.
	statusDelay atomic.Int64

	statusCalls atomic.Int32
	watchCalls  atomic.Int32
	accepted    chan accepted
	removed     chan string
}

type accepted struct {
	kind string
	md   metadata.MD
}

func newFakeCluster(t *testing.T, n int) *fakeCluster {
	lis := make([]net.Listener, n)
	for i := range n {
		var err error
		if lis[i], err = net.Listen("tcp", "127.0.0.1:0"); err != nil {
			t.Fatal(err)
		}
	}
	return newFakeClusterOn(t, lis...)
}

// newFakeClusterOn serves one fake replica on each listener.
func newFakeClusterOn(t *testing.T, listeners ...net.Listener) *fakeCluster {
	fc := &fakeCluster{t: t, changed: make(chan struct{})}
	for i, lis := range listeners {
		r := &fakeReplica{fc: fc, id: "r" + string(rune('1'+i)), accepted: make(chan accepted, 16), removed: make(chan string, 4)}
		r.addr = lis.Addr().String()
		g := grpc.NewServer()
		grapnelpb.RegisterClusterServer(g, r)
		grpcapi.RegisterCliConnectionServer(g, r)
		grpcapi.RegisterAgentConnectionServer(g, r)
		go func() { _ = g.Serve(lis) }()
		t.Cleanup(g.Stop)
		fc.reps = append(fc.reps, r)
	}
	return fc
}

// setLeader makes every replica see id as the leader ("" for none) and
// wakes their watches.
func (fc *fakeCluster) setLeader(id string) {
	fc.mu.Lock()
	fc.leader = id
	fc.term++
	close(fc.changed)
	fc.changed = make(chan struct{})
	fc.mu.Unlock()
}

func (fc *fakeCluster) rep(id string) *fakeReplica {
	for _, r := range fc.reps {
		if r.id == id {
			return r
		}
	}
	return nil
}

// touch wakes every watch without changing the leader or the term: each
// sends its status again.
func (fc *fakeCluster) touch() {
	fc.mu.Lock()
	close(fc.changed)
	fc.changed = make(chan struct{})
	fc.mu.Unlock()
}

// view is what replica r sees: the leader's id and address, and a channel
// closed at the next change.
func (r *fakeReplica) view() (string, string, <-chan struct{}) {
	r.fc.mu.Lock()
	defer r.fc.mu.Unlock()
	id := r.fc.leader
	if r.claimsLead.Load() {
		id = r.id
	}
	addr := ""
	if l := r.fc.rep(id); l != nil {
		addr = l.addr
	}
	return id, addr, r.fc.changed
}

func (r *fakeReplica) status() *grapnelpb.StatusResponse {
	id, addr, _ := r.view()
	r.fc.mu.Lock()
	term := r.fc.term
	r.fc.mu.Unlock()
	st := &grapnelpb.StatusResponse{ReplicaId: r.id, LeaderId: id, LeaderGrpcAddress: addr, Term: term}
	for _, m := range r.fc.reps {
		st.Members = append(st.Members, &grapnelpb.Member{Id: m.id, GrpcAddress: m.addr, Leader: m.id == id})
	}
	return st
}

// said is the status this replica sends, in answers and in its Watch
// alike (as the server builds both the same way): its view, or the leader
// it names when names is set.
func (r *fakeReplica) said() *grapnelpb.StatusResponse {
	st := r.status()
	if n := r.names.Load(); n != nil {
		st.LeaderId, st.LeaderGrpcAddress = "", ""
		if l := r.fc.rep(*n); l != nil {
			st.LeaderId, st.LeaderGrpcAddress = l.id, l.addr
		}
	}
	return st
}

func (r *fakeReplica) Status(context.Context, *grapnelpb.StatusRequest) (*grapnelpb.StatusResponse, error) {
	r.statusCalls.Add(1)
	time.Sleep(time.Duration(r.statusDelay.Load()))
	return r.said(), nil
}

func (r *fakeReplica) Watch(req *grapnelpb.WatchRequest, st grpc.ServerStreamingServer[grapnelpb.WatchEvent]) error {
	r.watchCalls.Add(1)
	interval := time.Duration(req.GetHeartbeatMs()) * time.Millisecond
	tick := time.NewTicker(interval)
	defer tick.Stop()
	heartbeat := false
	for {
		_, _, changed := r.view()
		if !r.silent.Load() {
			if err := st.Send(&grapnelpb.WatchEvent{Status: r.said(), Heartbeat: heartbeat}); err != nil {
				return err
			}
		}
		select {
		case <-tick.C:
			heartbeat = true
		case <-changed:
			heartbeat = false
		case <-st.Context().Done():
			return nil
		}
	}
}

func (r *fakeReplica) RemoveReplica(_ context.Context, req *grapnelpb.RemoveReplicaRequest) (*grapnelpb.RemoveReplicaResponse, error) {
	if id, addr, _ := r.view(); id != r.id {
		return nil, rpc.ToStatus(&errs.NotLeaderError{LeaderID: id, LeaderAddress: addr})
	}
	r.removed <- req.GetId()
	return &grapnelpb.RemoveReplicaResponse{}, nil
}

func (r *fakeReplica) ConnectCli(st grpcapi.CliConnection_ConnectCliServer) error {
	return r.serve(st, "cli")
}

func (r *fakeReplica) ConnectAgent(st grpcapi.AgentConnection_ConnectAgentServer) error {
	return r.serve(st, "agent")
}

// serve accepts the stream if this replica leads (in the cluster's view,
// not its possibly stale claim) and answers every CompleteStateRequest.
func (r *fakeReplica) serve(st grpc.BidiStreamingServer[grpcapi.ToServer, grpcapi.FromServer], kind string) error {
	r.fc.mu.Lock()
	id := r.fc.leader
	l := r.fc.rep(id)
	r.fc.mu.Unlock()
	switch {
	case id == "":
		return rpc.ToStatus(errs.ErrNoLeader)
	case id != r.id:
		return rpc.ToStatus(&errs.NotLeaderError{LeaderID: id, LeaderAddress: l.addr})
	}
	if err := st.SendHeader(metadata.Pairs(wire.ReplicaIDKey, r.id)); err != nil {
		return err
	}
	md, _ := metadata.FromIncomingContext(st.Context())
	r.accepted <- accepted{kind: kind, md: md}
	for {
		m, err := st.Recv()
		if err != nil {
			return nil
		}
		if req := m.GetRequest(); req.GetCompleteStateRequest() != nil {
			_ = st.Send(&grpcapi.FromServer{FromServerEnum: &grpcapi.FromServer_Response{Response: &ankbase.Response{
				RequestId: req.GetRequestId(), ResponseContent: &ankbase.Response_CompleteStateResponse{
					CompleteStateResponse: &ankbase.CompleteStateResponse{CompleteState: &ankbase.CompleteState{DesiredState: &ankbase.State{ApiVersion: r.id}}},
				},
			}}})
		}
		if m.GetGoodbye() != nil {
			return nil
		}
	}
}

func (r *fakeReplica) expectAccepted(t *testing.T, kind string) accepted {
	t.Helper()
	select {
	case a := <-r.accepted:
		if a.kind != kind {
			t.Fatalf("%s accepted a %s stream, want %s", r.id, a.kind, kind)
		}
		return a
	case <-time.After(5 * time.Second):
		t.Fatalf("%s accepted no stream", r.id)
	}
	return accepted{}
}

// servedBy asks for the complete state; the fake answers with its id.
func servedBy(t *testing.T, c *Conn) string {
	t.Helper()
	resp, err := c.Request(context.Background(), completeStateReq())
	if err != nil {
		t.Fatal(err)
	}
	return resp.GetCompleteStateResponse().GetCompleteState().GetDesiredState().GetApiVersion()
}

// newFreezer puts a faultnet.Freezer in front of target for the test.
func newFreezer(t *testing.T, target string) *faultnet.Freezer {
	t.Helper()
	f, err := faultnet.NewFreezer(target)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(f.Close)
	return f
}
