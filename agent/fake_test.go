package agent

import (
	"context"
	"errors"
	"net"
	"sync"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/metadata"

	"github.com/grapnel-io/grapnel/agent/workload"
	"github.com/grapnel-io/grapnel/internal/errs"
	"github.com/grapnel-io/grapnel/internal/testwait"
	"github.com/grapnel-io/grapnel/rpc"
	"github.com/grapnel-io/grapnel/rpc/ankbase"
	"github.com/grapnel-io/grapnel/rpc/client"
	"github.com/grapnel-io/grapnel/rpc/grapnelpb"
	"github.com/grapnel-io/grapnel/rpc/grpcapi"
	"github.com/grapnel-io/grapnel/rpc/wire"
	"github.com/grapnel-io/grapnel/state"
)

// fakeReplicas are scripted Grapnel replicas for the connection tests:
// each serves Cluster.Status and Watch and the agent stream the way a
// replica does (the one the test names leader accepts with its replica-id
// header, the others answer NotLeader), and hands every accepted stream
// to the test.
type fakeReplicas struct {
	mu     sync.Mutex
	leader string            // the leader every replica accepts streams for
	claims map[string]string // replica id -> the leader its Status and Watch name
	reps   []*fakeReplica
}

type fakeReplica struct {
	grapnelpb.UnimplementedClusterServer
	grpcapi.UnimplementedAgentConnectionServer
	set     *fakeReplicas
	id      string
	addr    string
	refuse  error // returned after the hello instead of serving
	streams chan *fakeStream
}

// fakeStream is one accepted agent stream, seen from the server side.
type fakeStream struct {
	replica string
	hello   *grpcapi.AgentHello
	in      chan *grpcapi.ToServer   // what the agent sent after its hello
	out     chan *grpcapi.FromServer // what the test sends to the agent
	end     chan error               // ends the stream with this status
	done    chan struct{}            // closed when the agent's side ended
}

func newFakeReplicas(t *testing.T, n int) *fakeReplicas {
	t.Helper()
	set := &fakeReplicas{claims: map[string]string{}}
	for i := range n {
		r := &fakeReplica{set: set, id: "r" + string(rune('1'+i)), streams: make(chan *fakeStream, 8)}
		lis, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		r.addr = lis.Addr().String()
		g := grpc.NewServer()
		grapnelpb.RegisterClusterServer(g, r)
		grpcapi.RegisterAgentConnectionServer(g, r)
		go func() { _ = g.Serve(lis) }()
		t.Cleanup(g.Stop)
		set.reps = append(set.reps, r)
	}
	return set
}

// setLeader makes id the leader, in what every replica accepts and says.
func (s *fakeReplicas) setLeader(id string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.leader = id
	for _, r := range s.reps {
		s.claims[r.id] = id
	}
}

func (s *fakeReplicas) rep(id string) *fakeReplica {
	for _, r := range s.reps {
		if r.id == id {
			return r
		}
	}
	return nil
}

func (s *fakeReplicas) addrs() []string {
	var out []string
	for _, r := range s.reps {
		out = append(out, r.addr)
	}
	return out
}

func (r *fakeReplica) status() *grapnelpb.StatusResponse {
	r.set.mu.Lock()
	defer r.set.mu.Unlock()
	claim := r.set.claims[r.id]
	st := &grapnelpb.StatusResponse{ReplicaId: r.id, LeaderId: claim, Term: 1}
	for _, m := range r.set.reps {
		st.Members = append(st.Members, &grapnelpb.Member{Id: m.id, GrpcAddress: m.addr, Leader: m.id == claim})
		if m.id == claim {
			st.LeaderGrpcAddress = m.addr
		}
	}
	return st
}

func (r *fakeReplica) Status(context.Context, *grapnelpb.StatusRequest) (*grapnelpb.StatusResponse, error) {
	return r.status(), nil
}

func (r *fakeReplica) Watch(req *grapnelpb.WatchRequest, st grpc.ServerStreamingServer[grapnelpb.WatchEvent]) error {
	tick := time.NewTicker(time.Duration(req.GetHeartbeatMs()) * time.Millisecond)
	defer tick.Stop()
	for {
		if err := st.Send(&grapnelpb.WatchEvent{Status: r.status(), Heartbeat: true}); err != nil {
			return err
		}
		select {
		case <-tick.C:
		case <-st.Context().Done():
			return nil
		}
	}
}

func (r *fakeReplica) ConnectAgent(st grpcapi.AgentConnection_ConnectAgentServer) error {
	r.set.mu.Lock()
	leader := r.set.leader
	r.set.mu.Unlock()
	if leader != r.id {
		l := r.set.rep(leader)
		return rpc.ToStatus(&errs.NotLeaderError{LeaderID: leader, LeaderAddress: l.addr})
	}
	if err := st.SendHeader(metadata.Pairs(wire.ReplicaIDKey, r.id)); err != nil {
		return err
	}
	m, err := st.Recv()
	if err != nil {
		return err
	}
	if r.refuse != nil {
		return r.refuse
	}
	fs := &fakeStream{
		replica: r.id, hello: m.GetAgentHello(),
		in: make(chan *grpcapi.ToServer, 256), out: make(chan *grpcapi.FromServer, 16),
		end: make(chan error, 1), done: make(chan struct{}),
	}
	go func() {
		defer close(fs.done)
		for {
			m, err := st.Recv()
			if err != nil {
				return
			}
			fs.in <- m
		}
	}()
	r.streams <- fs
	for {
		select {
		case m := <-fs.out:
			if err := st.Send(m); err != nil {
				return err
			}
		case err := <-fs.end:
			return err
		case <-fs.done:
			return nil
		}
	}
}

// accepted waits for the next stream the replica accepts.
func (r *fakeReplica) accepted(t *testing.T) *fakeStream {
	t.Helper()
	select {
	case fs := <-r.streams:
		return fs
	case <-time.After(connectWithin):
		t.Fatalf("%s accepted no agent stream within %v", r.id, connectWithin)
	}
	return nil
}

// next waits for the next message of the wanted kind the agent sends,
// skipping load reports unless they are wanted.
func (fs *fakeStream) next(t *testing.T, what string, want func(*grpcapi.ToServer) bool) *grpcapi.ToServer {
	t.Helper()
	timeout := time.After(connectWithin)
	for {
		select {
		case m := <-fs.in:
			if want(m) {
				return m
			}
		case <-timeout:
			t.Fatalf("the agent sent no %s within %v", what, connectWithin)
		}
	}
}

// quietFor checks that the agent sends nothing of a kind for d.
func (fs *fakeStream) quietFor(t *testing.T, d time.Duration, what string, kind func(*grpcapi.ToServer) bool) {
	t.Helper()
	timeout := time.After(d)
	for {
		select {
		case m := <-fs.in:
			if kind(m) {
				t.Fatalf("the agent sent %s too early: %v", what, m)
			}
		case <-timeout:
			return
		}
	}
}

func isStates(m *grpcapi.ToServer) bool { return m.GetUpdateWorkloadState() != nil }
func isLoad(m *grpcapi.ToServer) bool   { return m.GetAgentLoadStatus() != nil }

// fakeWork records what the connection hands the workload Manager.
type fakeWork struct {
	mu      sync.Mutex
	hellos  [][]workload.Added
	updates []workloadUpdate
	states  [][]state.WorkloadState
	current []state.WorkloadState
	resyncs int
}

type workloadUpdate struct {
	added   []workload.Added
	deleted []workload.Deleted
}

func (w *fakeWork) ServerHello(_ context.Context, added []workload.Added) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.hellos = append(w.hellos, added)
}

func (w *fakeWork) Update(added []workload.Added, deleted []workload.Deleted) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.updates = append(w.updates, workloadUpdate{added, deleted})
}

func (w *fakeWork) Resync() {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.resyncs++
}

func (w *fakeWork) resyncCount() int {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.resyncs
}

func (w *fakeWork) States(ws []state.WorkloadState) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.states = append(w.states, ws)
}

func (w *fakeWork) Current() []state.WorkloadState {
	w.mu.Lock()
	defer w.mu.Unlock()
	return append([]state.WorkloadState(nil), w.current...)
}

func (w *fakeWork) counts() (hellos, updates, states int) {
	w.mu.Lock()
	defer w.mu.Unlock()
	return len(w.hellos), len(w.updates), len(w.states)
}

// fakeAnswers records delivered responses.
type fakeAnswers struct {
	mu   sync.Mutex
	ids  []string
	gone int // ServerGone calls
}

func (a *fakeAnswers) Deliver(r *ankbase.Response) bool {
	a.mu.Lock()
	defer a.mu.Unlock()
	a.ids = append(a.ids, r.GetRequestId())
	return true
}

func (a *fakeAnswers) ServerGone() {
	a.mu.Lock()
	defer a.mu.Unlock()
	a.gone++
}

func (a *fakeAnswers) goneCount() int {
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.gone
}

func (a *fakeAnswers) delivered() []string {
	a.mu.Lock()
	defer a.mu.Unlock()
	return append([]string(nil), a.ids...)
}

// fakeLogs records the log campaign calls.
type fakeLogs struct {
	mu              sync.Mutex
	started, cancel []string
	stopAll         int
}

func (l *fakeLogs) Start(req *grpcapi.LogsRequest) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.started = append(l.started, req.GetRequestId())
}

func (l *fakeLogs) Cancel(id string) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.cancel = append(l.cancel, id)
}

func (l *fakeLogs) StopAll() {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.stopAll++
}

func (l *fakeLogs) get() (started, cancel []string, stopAll int) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return append([]string(nil), l.started...), append([]string(nil), l.cancel...), l.stopAll
}

// fakeConn is a conn to the fake replicas with fake collaborators,
// served until the test ends.
type fakeConn struct {
	*conn
	work *fakeWork
	ans  *fakeAnswers
	logs *fakeLogs
	done chan error
	stop context.CancelFunc
}

func newFakeConn(t *testing.T, set *fakeReplicas) *fakeConn {
	t.Helper()
	r, err := client.NewResolver(client.Options{Addrs: set.addrs()[:1], Insecure: true, HeartbeatInterval: 50 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	fc := &fakeConn{work: &fakeWork{}, ans: &fakeAnswers{}, logs: &fakeLogs{}, done: make(chan error, 1)}
	fc.conn = &conn{
		name: "agent_A", tags: map[string]string{"zone": "front"}, incarnation: 7, loadEvery: 50 * time.Millisecond,
		log: quiet, resolver: r, work: fc.work, ctl: fc.ans, logs: fc.logs, out: newOutbox(),
	}
	t.Cleanup(func() { r.Close() })
	return fc
}

func (fc *fakeConn) start(t *testing.T) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	fc.stop = cancel
	go func() { fc.done <- fc.serve(ctx) }()
	t.Cleanup(func() {
		cancel()
		select {
		case <-fc.done:
		case <-time.After(stopWithin):
			t.Errorf("serve did not return within %v", stopWithin)
		}
	})
}

func running1(name string) state.WorkloadState {
	return state.WorkloadState{Instance: state.NewInstanceName(name, "agent_A", name), State: state.RunningOk}
}

// The agent greets with its name, tags, protocol version and incarnation;
// hands the server's messages to the Manager, the control interfaces and
// the log campaigns; reports states with a growing generation only after
// the ServerHello was handled, and load every interval; forwards control
// interface requests; and after a broken stream drops the log campaigns
// and opens a new stream at once.
func TestConnServesTheStream(t *testing.T) {
	set := newFakeReplicas(t, 1)
	set.setLeader("r1")
	fc := newFakeConn(t, set)
	if err := fc.forward(&ankbase.Request{RequestId: "w@1"}); err == nil {
		t.Fatal("forward succeeded while not connected")
	}
	fc.report([]state.WorkloadState{running1("early")})
	fc.work.current = []state.WorkloadState{running1("early"), running1("current")}
	fc.start(t)

	fs := set.rep("r1").accepted(t)
	h := fs.hello
	if h.GetAgentName() != "agent_A" || h.GetProtocolVersion() != rpc.ProtocolVersion || h.GetGrapnelIncarnation() != 7 ||
		h.GetTags().GetTags()["zone"] != "front" {
		t.Fatalf("hello %v", h)
	}
	// Nothing is reported before the ServerHello was handled.
	fs.quietFor(t, 200*time.Millisecond, "a state report", isStates)

	inst := state.NewInstanceName("w", "agent_A", "cfg")
	added := rpc.AddedWorkloadToProto(inst, &state.Workload{Agent: "agent_A", Runtime: "process", RuntimeConfig: "command: x"})
	fs.out <- &grpcapi.FromServer{FromServerEnum: &grpcapi.FromServer_ServerHello{ServerHello: &grpcapi.ServerHello{
		AddedWorkloads: []*grpcapi.AddedWorkload{added}}}}
	m := fs.next(t, "state report", isStates).GetUpdateWorkloadState()
	got, err := rpc.WorkloadStatesFromProto(m.GetWorkloadStates())
	if err != nil || len(got) != 2 || got[0] != running1("current") || got[1] != running1("early") || m.GetGrapnelGeneration() != 1 {
		t.Fatalf("first report %v (generation %d), %v", got, m.GetGrapnelGeneration(), err)
	}
	fc.work.mu.Lock()
	hellos := fc.work.hellos
	fc.work.mu.Unlock()
	if len(hellos) != 1 || len(hellos[0]) != 1 || hellos[0][0].Instance != inst {
		t.Fatalf("Manager.ServerHello got %+v", hellos)
	}
	fc.report([]state.WorkloadState{running1("later")})
	if m := fs.next(t, "second state report", isStates).GetUpdateWorkloadState(); m.GetGrapnelGeneration() != 2 {
		t.Fatalf("second report generation %d", m.GetGrapnelGeneration())
	}
	fs.next(t, "load report", isLoad)

	fs.out <- &grpcapi.FromServer{FromServerEnum: &grpcapi.FromServer_UpdateWorkload{UpdateWorkload: &grpcapi.UpdateWorkload{
		AddedWorkloads:   []*grpcapi.AddedWorkload{added},
		DeletedWorkloads: []*grpcapi.DeletedWorkload{rpc.DeletedWorkloadToProto(inst, nil)},
	}}}
	fs.out <- &grpcapi.FromServer{FromServerEnum: &grpcapi.FromServer_UpdateWorkloadState{UpdateWorkloadState: &grpcapi.UpdateWorkloadState{
		WorkloadStates: rpc.WorkloadStatesToProto([]state.WorkloadState{running1("other")})}}}
	fs.out <- &grpcapi.FromServer{FromServerEnum: &grpcapi.FromServer_Response{Response: &ankbase.Response{RequestId: "w@1"}}}
	fs.out <- &grpcapi.FromServer{FromServerEnum: &grpcapi.FromServer_LogsRequest{LogsRequest: &grpcapi.LogsRequest{RequestId: "logs-1"}}}
	fs.out <- &grpcapi.FromServer{FromServerEnum: &grpcapi.FromServer_LogsCancelRequest{LogsCancelRequest: &grpcapi.LogsCancelRequest{RequestId: "logs-1"}}}
	// An empty UpdateWorkload is the leader's drift repair request, not
	// an update.
	fs.out <- &grpcapi.FromServer{FromServerEnum: &grpcapi.FromServer_UpdateWorkload{UpdateWorkload: &grpcapi.UpdateWorkload{}}}
	testwait.For(t, connectWithin, func() bool {
		_, u, s := fc.work.counts()
		started, cancelled, _ := fc.logs.get()
		return u == 1 && s == 1 && len(fc.ans.delivered()) == 1 && len(started) == 1 && len(cancelled) == 1 && fc.work.resyncCount() == 1
	}, "every message handed over")
	fc.work.mu.Lock()
	u := fc.work.updates[0]
	fc.work.mu.Unlock()
	if len(u.added) != 1 || len(u.deleted) != 1 || u.deleted[0].Instance != inst {
		t.Fatalf("Manager.Update got %+v", u)
	}

	if err := fc.forward(&ankbase.Request{RequestId: "w@2"}); err != nil {
		t.Fatal(err)
	}
	if m := fs.next(t, "forwarded request", func(m *grpcapi.ToServer) bool { return m.GetRequest() != nil }); m.GetRequest().GetRequestId() != "w@2" {
		t.Fatalf("forwarded %v", m)
	}

	// A broken stream: the campaigns are dropped and the agent is back at
	// once, greeting again with the same incarnation.
	fs.end <- rpc.ToStatus(errs.ErrShuttingDown)
	again := set.rep("r1").accepted(t)
	if again.hello.GetGrapnelIncarnation() != 7 {
		t.Fatalf("second hello %v", again.hello)
	}
	if _, _, stopped := fc.logs.get(); stopped != 1 {
		t.Fatalf("StopAll called %d times after the stream broke", stopped)
	}
	// The workloads' campaigns ended with the stream too.
	if n := fc.ans.goneCount(); n != 1 {
		t.Fatalf("ServerGone called %d times after the stream broke", n)
	}
	// After the next ServerHello every instance's state is reported
	// again, with the next generation.
	again.out <- &grpcapi.FromServer{FromServerEnum: &grpcapi.FromServer_ServerHello{ServerHello: &grpcapi.ServerHello{}}}
	if m := again.next(t, "state report after reconnect", isStates).GetUpdateWorkloadState(); m.GetGrapnelGeneration() != 3 || len(m.GetWorkloadStates()) != 2 {
		t.Fatalf("report after reconnect %v", m)
	}
}

// Stopping the agent says Goodbye to the server.
func TestConnSaysGoodbye(t *testing.T) {
	set := newFakeReplicas(t, 1)
	set.setLeader("r1")
	fc := newFakeConn(t, set)
	fc.start(t)
	fs := set.rep("r1").accepted(t)
	fc.stop()
	fs.next(t, "Goodbye", func(m *grpcapi.ToServer) bool { return m.GetGoodbye() != nil })
	select {
	case err := <-fc.done:
		if err != nil {
			t.Fatalf("serve: %v", err)
		}
		fc.done <- nil
	case <-time.After(stopWithin):
		t.Fatal("serve did not return")
	}
}

// A killed agent (the tests' stand-in for SIGKILL, running.kill) cuts
// its stream without Goodbye: the server sees a crash, not a clean stop.
func TestKilledConnSaysNoGoodbye(t *testing.T) {
	set := newFakeReplicas(t, 1)
	set.setLeader("r1")
	fc := newFakeConn(t, set)
	fc.start(t)
	fs := set.rep("r1").accepted(t)
	fc.conn.abrupt.Store(true)
	fc.stop()
	select {
	case <-fs.done:
	case <-time.After(stopWithin):
		t.Fatal("the stream did not end")
	}
	for len(fs.in) > 0 {
		if m := <-fs.in; m.GetGoodbye() != nil {
			t.Fatal("a killed agent said Goodbye")
		}
	}
}

// A refusal of the protocol version ends the agent, as it ends the Ankaios
// agent, instead of reconnecting.
func TestConnEndsOnProtocolRefusal(t *testing.T) {
	set := newFakeReplicas(t, 1)
	set.setLeader("r1")
	set.rep("r1").refuse = rpc.ToStatus(rpc.CheckProtocolVersion("99.0.0"))
	fc := newFakeConn(t, set)
	fc.start(t)
	select {
	case err := <-fc.done:
		if !errors.Is(err, errProtocol) {
			t.Fatalf("serve ended with %v, want the protocol refusal", err)
		}
		fc.done <- nil
	case <-time.After(connectWithin):
		t.Fatal("the agent kept reconnecting after a protocol refusal")
	}
}

// A gossip hint that names another leader than the stream's moves the
// agent at once, although the replica it is attached to still claims to
// lead (its heartbeat would not end the stream).
func TestConnMovesOnGossipHint(t *testing.T) {
	set := newFakeReplicas(t, 2)
	set.setLeader("r1")
	fc := newFakeConn(t, set)
	fc.start(t)
	set.rep("r1").accepted(t)
	testwait.For(t, connectWithin, func() bool { return fc.replica() == "r1" }, "attached to r1")

	set.mu.Lock()
	set.leader = "r2" // r1 still claims to lead in its status and heartbeat
	set.claims["r2"] = "r2"
	set.mu.Unlock()
	start := time.Now()
	f := &follower{c: fc.conn}
	f.onChange(gossipView{Addrs: set.addrs(), LeaderID: "r2", LeaderAddr: set.rep("r2").addr})
	set.rep("r2").accepted(t)
	testwait.For(t, connectWithin, func() bool { return fc.replica() == "r2" }, "attached to r2")
	if d := time.Since(start); d > client.DefaultHeartbeatTimeout {
		t.Fatalf("moving took %v, longer than a heartbeat timeout", d)
	}
	// The same view again does not move the agent anywhere.
	f.onChange(gossipView{Addrs: set.addrs(), LeaderID: "r2", LeaderAddr: set.rep("r2").addr})
	select {
	case fs := <-set.rep("r2").streams:
		t.Fatalf("a repeated hint opened another stream at %s", fs.replica)
	case <-time.After(200 * time.Millisecond):
	}
}
