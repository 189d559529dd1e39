package server

import (
	"bytes"
	"context"
	"errors"
	"io"
	"testing"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"

	"github.com/grapnel-io/grapnel/internal/errs"
	"github.com/grapnel-io/grapnel/internal/testwait"
	"github.com/grapnel-io/grapnel/rpc"
	"github.com/grapnel-io/grapnel/rpc/client"
	"github.com/grapnel-io/grapnel/rpc/grapnelpb"
	"github.com/grapnel-io/grapnel/state"
)

func clusterClient(t *testing.T, addr string) grapnelpb.ClusterClient {
	return grapnelpb.NewClusterClient(dialRaw(t, addr))
}

func TestStatusOfASingleReplica(t *testing.T) {
	ts := startServer(t, nil)
	var (
		st  *grapnelpb.StatusResponse
		err error
	)
	// Raft's applied_index statistic trails the first commit a moment.
	testwait.For(t, 10*time.Second, func() bool {
		st, err = clusterClient(t, ts.addr).Status(context.Background(), &grapnelpb.StatusRequest{})
		return err != nil || st.GetAppliedIndex() > 0
	}, "an applied entry")
	if err != nil {
		t.Fatal(err)
	}
	if st.GetReplicaId() != "test-1" || st.GetLeaderId() != "test-1" || st.GetTerm() == 0 || st.GetCommitIndex() == 0 || st.GetAppliedIndex() == 0 {
		t.Fatalf("status %v", st)
	}
	if len(st.GetMembers()) != 1 {
		t.Fatalf("members %v", st.GetMembers())
	}
	m := st.GetMembers()[0]
	if m.GetId() != "test-1" || m.GetRole() != "leader" || !m.GetVoter() || !m.GetLeader() || !m.GetHealthy() || m.GetRaftAddress() == "" {
		t.Fatalf("member %v", m)
	}
}

// Status names the agents attached to the leader, so that an operator (and
// the failover measurement) sees which agents follow it; a departed agent
// leaves the list.
func TestStatusListsAttachedAgents(t *testing.T) {
	ts := startServer(t, nil)
	cc := clusterClient(t, ts.addr)
	a := ts.agent("agent_A", nil)
	ts.agent("agent_B", nil)
	st, err := cc.Status(context.Background(), &grapnelpb.StatusRequest{})
	if err != nil {
		t.Fatal(err)
	}
	if got := st.GetAttachedAgents(); len(got) != 2 || got[0] != "agent_A" || got[1] != "agent_B" {
		t.Fatalf("attached agents %v, want [agent_A agent_B]", got)
	}
	a.close()
	testwait.For(t, 10*time.Second, func() bool {
		st, err := cc.Status(context.Background(), &grapnelpb.StatusRequest{})
		return err == nil && len(st.GetAttachedAgents()) == 1 && st.GetAttachedAgents()[0] == "agent_B"
	}, "agent_A detached")
}

func TestStatusOfAReplicaSet(t *testing.T) {
	rs := startReplicaSet(t, 3, 0)
	l := rs.leader()
	for _, r := range rs.running() {
		st, err := clusterClient(t, r.addr).Status(context.Background(), &grapnelpb.StatusRequest{})
		if err != nil {
			t.Fatal(err)
		}
		if st.GetReplicaId() != r.id || st.GetLeaderId() != l.id || st.GetLeaderGrpcAddress() != l.addr {
			t.Fatalf("%s says leader %s at %s, want %s at %s", r.id, st.GetLeaderId(), st.GetLeaderGrpcAddress(), l.id, l.addr)
		}
		if len(st.GetMembers()) != 3 {
			t.Fatalf("%s lists %d members", r.id, len(st.GetMembers()))
		}
		for _, m := range st.GetMembers() {
			want := rs.rep(m.GetId())
			if want == nil || m.GetGrpcAddress() != want.addr || !m.GetVoter() || m.GetLeader() != (m.GetId() == l.id) {
				t.Fatalf("%s: member %v", r.id, m)
			}
		}
	}
}

func TestWatchInterval(t *testing.T) {
	tests := []struct {
		ms   uint32
		want time.Duration
	}{
		{0, DefaultWatchHeartbeat},
		{1, MinWatchHeartbeat},
		{49, MinWatchHeartbeat},
		{50, 50 * time.Millisecond},
		{1000, time.Second},
	}
	for _, tc := range tests {
		if got := watchInterval(tc.ms); got != tc.want {
			t.Errorf("watchInterval(%d) = %v, want %v", tc.ms, got, tc.want)
		}
	}
}

// Watch sends the status at once, then heartbeats that repeat it at the
// interval asked for (never faster than the minimum), and a fresh status
// on every change.
func TestWatch(t *testing.T) {
	ts := startServer(t, nil)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	w, err := clusterClient(t, ts.addr).Watch(ctx, &grapnelpb.WatchRequest{HeartbeatMs: 1})
	if err != nil {
		t.Fatal(err)
	}
	first, err := w.Recv()
	if err != nil || first.GetHeartbeat() || first.GetStatus().GetLeaderId() != "test-1" {
		t.Fatalf("first event %v, %v", first, err)
	}
	const n = 5
	start := time.Now()
	last := first.GetStatus()
	for beats := 0; beats < n; {
		ev, err := w.Recv()
		if err != nil {
			t.Fatal(err)
		}
		if !ev.GetHeartbeat() {
			// A fresh status: the replica, just started, still applies
			// its first entries. It must say something new.
			if proto.Equal(ev.GetStatus(), last) {
				t.Fatalf("an event that is no heartbeat repeats the status %v", ev)
			}
			last = ev.GetStatus()
			continue
		}
		if ev.GetStatus().GetLeaderId() != "test-1" {
			t.Fatalf("heartbeat %v", ev)
		}
		last = ev.GetStatus()
		beats++
	}
	// A ticker may deliver one tick late and the next on time, so judge
	// the mean gap, against the minimum the server enforces.
	if mean := time.Since(start) / n; mean < MinWatchHeartbeat*8/10 {
		t.Fatalf("heartbeats every %v on average; the minimum is %v", mean, MinWatchHeartbeat)
	}
	// A change: a new peer address recorded by hand.
	ts.node.SetPeerAddresses("test-9", "127.0.0.1:1", "127.0.0.1:2")
	for {
		ev, err := w.Recv()
		if err != nil {
			t.Fatal(err)
		}
		if !ev.GetHeartbeat() {
			if len(ev.GetStatus().GetMembers()) != 2 {
				t.Fatalf("change event %v", ev)
			}
			break
		}
	}
	cancel()
	if _, err := w.Recv(); status.Code(err) != codes.Canceled {
		t.Fatalf("after cancel: %v", err)
	}
}

// A watch ends with SHUTTING_DOWN when the replica stops, so a client
// moves on at once instead of waiting out its heartbeat timeout.
func TestWatchEndsOnShutdown(t *testing.T) {
	rs := startReplicaSet(t, 1, 0)
	r := rs.reps[0]
	w, err := clusterClient(t, r.addr).Watch(context.Background(), &grapnelpb.WatchRequest{})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := w.Recv(); err != nil {
		t.Fatal(err)
	}
	r.srv.Shutdown()
	for {
		_, err := w.Recv()
		if err == nil {
			continue
		}
		if status.Code(err) != codes.Unavailable || !errors.Is(rpc.FromStatus(err), errs.ErrShuttingDown) {
			t.Fatalf("watch ended with %v", err)
		}
		return
	}
}

func saveSnapshot(t *testing.T, c grapnelpb.ClusterClient) []byte {
	t.Helper()
	st, err := c.SnapshotSave(context.Background(), &grapnelpb.SnapshotSaveRequest{})
	if err != nil {
		t.Fatal(err)
	}
	var buf bytes.Buffer
	for {
		ch, err := st.Recv()
		if errors.Is(err, io.EOF) {
			return buf.Bytes()
		}
		if err != nil {
			t.Fatal(err)
		}
		if len(ch.GetData()) == 0 || len(ch.GetData()) > snapshotChunkSize {
			t.Fatalf("chunk of %d bytes", len(ch.GetData()))
		}
		buf.Write(ch.GetData())
	}
}

func restoreSnapshot(c grapnelpb.ClusterClient, data []byte) (*grapnelpb.SnapshotRestoreResponse, error) {
	st, err := c.SnapshotRestore(context.Background())
	if err != nil {
		return nil, err
	}
	for len(data) > 0 {
		n := min(len(data), 1000)
		if err := st.Send(&grapnelpb.SnapshotChunk{Data: data[:n]}); err != nil {
			break // the reason comes with CloseAndRecv
		}
		data = data[n:]
	}
	return st.CloseAndRecv()
}

// A saved snapshot, restored after the state moved on, brings the saved
// state back.
func TestSnapshotSaveAndRestore(t *testing.T) {
	ts := startServer(t, nil)
	cli := ts.cli()
	if r := cli.update(manifest(t, proxyManifest), "desiredState.workloads.web"); r.GetUpdateStateSuccess() == nil {
		t.Fatalf("update: %v", r)
	}
	c := clusterClient(t, ts.addr)
	saved := saveSnapshot(t, c)
	if len(saved) == 0 {
		t.Fatal("empty snapshot")
	}
	if r := cli.update(state.Tree{"desiredState": state.Tree{"workloads": state.Tree{}}}, "desiredState.workloads.web"); r.GetUpdateStateSuccess() == nil {
		t.Fatalf("delete: %v", r)
	}
	has := func() (ok bool) {
		ts.store(func(s *state.Store) { _, ok = s.Desired.Workloads["web"] })
		return ok
	}
	if has() {
		t.Fatal("the workload is still there")
	}
	resp, err := restoreSnapshot(c, saved)
	if err != nil {
		t.Fatal(err)
	}
	if resp.GetIndex() == 0 {
		t.Fatal("no index answered")
	}
	testwait.For(t, 10*time.Second, has, "the restored workload")
}

func TestSnapshotRestoreRefusesNothing(t *testing.T) {
	ts := startServer(t, nil)
	_, err := restoreSnapshot(clusterClient(t, ts.addr), nil)
	if status.Code(err) != codes.InvalidArgument {
		t.Fatalf("err = %v, want InvalidArgument", err)
	}
}

func TestChunkWriter(t *testing.T) {
	tests := []struct {
		name   string
		writes []int
		chunks []int
	}{
		{"nothing", nil, nil},
		{"small", []int{10, 20}, []int{30}},
		{"exactly one chunk", []int{snapshotChunkSize}, []int{snapshotChunkSize}},
		{"one big write", []int{2*snapshotChunkSize + 5}, []int{snapshotChunkSize, snapshotChunkSize, 5}},
		{"across the boundary", []int{snapshotChunkSize - 1, 2, snapshotChunkSize}, []int{snapshotChunkSize, snapshotChunkSize, 1}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			var got []int
			var out, in bytes.Buffer
			w := &chunkWriter{send: func(c *grapnelpb.SnapshotChunk) error {
				got = append(got, len(c.GetData()))
				out.Write(c.GetData())
				return nil
			}}
			b := byte(0)
			for _, n := range tc.writes {
				p := make([]byte, n)
				for i := range p {
					p[i] = b
					b++
				}
				in.Write(p)
				if k, err := w.Write(p); k != n || err != nil {
					t.Fatalf("Write = %d, %v", k, err)
				}
			}
			if err := w.flush(); err != nil {
				t.Fatal(err)
			}
			if !bytes.Equal(out.Bytes(), in.Bytes()) || len(got) != len(tc.chunks) {
				t.Fatalf("chunks %v, want %v", got, tc.chunks)
			}
			for i := range got {
				if got[i] != tc.chunks[i] {
					t.Fatalf("chunks %v, want %v", got, tc.chunks)
				}
			}
		})
	}
	t.Run("send fails", func(t *testing.T) {
		boom := errors.New("client gone")
		w := &chunkWriter{send: func(*grapnelpb.SnapshotChunk) error { return boom }}
		if _, err := w.Write(make([]byte, snapshotChunkSize+1)); !errors.Is(err, boom) {
			t.Fatalf("err = %v", err)
		}
	})
}

// The operator actions: a follower refuses a leader-only call naming the
// leader; through DialCluster the call reaches the leader; errors keep
// their codes; a transfer answers the new leader.
func TestOperatorActions(t *testing.T) {
	rs := startReplicaSet(t, 3, 0)
	l, f := rs.leader(), rs.follower()

	_, err := clusterClient(t, f.addr).RemoveReplica(context.Background(), &grapnelpb.RemoveReplicaRequest{Id: l.id})
	var nl *errs.NotLeaderError
	if status.Code(err) != codes.FailedPrecondition || !errors.As(rpc.FromStatus(err), &nl) || nl.LeaderID != l.id || nl.LeaderAddress != l.addr {
		t.Fatalf("follower: %v, want FailedPrecondition naming %s at %s", err, l.id, l.addr)
	}

	c, addr, closeFn, err := client.DialCluster(context.Background(), client.Options{Addrs: []string{f.addr}, Insecure: true})
	if err != nil {
		t.Fatal(err)
	}
	defer closeFn()
	if addr != l.addr {
		t.Fatalf("DialCluster chose %s, want the leader %s", addr, l.addr)
	}
	tests := []struct {
		name string
		id   string
		code codes.Code
		is   error
	}{
		{"unnamed", "", codes.InvalidArgument, state.ErrInvalid},
		{"the leader itself", l.id, codes.FailedPrecondition, errs.ErrQuorum},
	}
	for _, tc := range tests {
		t.Run("remove "+tc.name, func(t *testing.T) {
			_, err := c.RemoveReplica(context.Background(), &grapnelpb.RemoveReplicaRequest{Id: tc.id})
			if status.Code(err) != tc.code || !errors.Is(rpc.FromStatus(err), tc.is) {
				t.Fatalf("err = %v, want %v %v", err, tc.code, tc.is)
			}
		})
	}

	// Removal is idempotent (issue 17 point 6): an id not in the
	// configuration answers already removed, so a retry is safe.
	t.Run("remove unknown", func(t *testing.T) {
		resp, err := c.RemoveReplica(context.Background(), &grapnelpb.RemoveReplicaRequest{Id: "rs-9"})
		if err != nil || !resp.GetAlreadyRemoved() {
			t.Fatalf("remove rs-9: %v, already removed %v; want already removed", err, resp.GetAlreadyRemoved())
		}
	})

	t.Run("transfer leadership", func(t *testing.T) {
		resp, err := c.TransferLeadership(context.Background(), &grapnelpb.TransferLeadershipRequest{To: f.id})
		if err != nil {
			t.Fatal(err)
		}
		if resp.GetNewLeaderId() != f.id {
			t.Fatalf("new leader %q, want %s", resp.GetNewLeaderId(), f.id)
		}
		if now := rs.leader(); now != f {
			t.Fatalf("%s leads, want %s", now.id, f.id)
		}
	})
	t.Run("remove a follower", func(t *testing.T) {
		// The leader moved: the call meets a NotLeaderError at the old one
		// and follows it.
		_, err := c.RemoveReplica(context.Background(), &grapnelpb.RemoveReplicaRequest{Id: l.id})
		if err != nil {
			t.Fatal(err)
		}
		st, err := clusterClient(t, f.addr).Status(context.Background(), &grapnelpb.StatusRequest{})
		if err != nil {
			t.Fatal(err)
		}
		for _, m := range st.GetMembers() {
			if m.GetId() == l.id && m.GetVoter() {
				t.Fatalf("%s is still a voter: %v", l.id, m)
			}
		}
	})
}

func (rs *replicaSet) rep(id string) *replica {
	for _, r := range rs.reps {
		if r.id == id {
			return r
		}
	}
	return nil
}
