package agent

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	"github.com/grapnel-io/grapnel/agent/storage"
	"github.com/grapnel-io/grapnel/agent/workload"
	"github.com/grapnel-io/grapnel/internal/buildinfo"
	"github.com/grapnel-io/grapnel/internal/clock"
	"github.com/grapnel-io/grapnel/internal/errs"
	"github.com/grapnel-io/grapnel/internal/formats"
	"github.com/grapnel-io/grapnel/internal/sdnotify"
	"github.com/grapnel-io/grapnel/rpc"
	"github.com/grapnel-io/grapnel/rpc/ankbase"
	"github.com/grapnel-io/grapnel/rpc/client"
	"github.com/grapnel-io/grapnel/rpc/grpcapi"
	"github.com/grapnel-io/grapnel/rpc/wire"
	"github.com/grapnel-io/grapnel/state"
)

// ErrNotConnected is returned by sends while no stream is open.
var ErrNotConnected = errors.New("agent not connected to the server")

// workloads is what the connection needs of the workload Manager.
type workloads interface {
	ServerHello(ctx context.Context, added []workload.Added)
	Update(added []workload.Added, deleted []workload.Deleted)
	// Resync asks for a drift repair round.
	Resync()
	States(ws []state.WorkloadState)
	Current() []state.WorkloadState
}

// answers routes the server's answers to control interface requests.
type answers interface {
	Deliver(r *ankbase.Response) bool
	// ServerGone tells that the stream ended, and with it the log
	// campaigns the workloads opened.
	ServerGone()
}

// logSources runs the log campaigns the server asks for.
type logSources interface {
	Start(req *grpcapi.LogsRequest)
	Cancel(requestID string)
	StopAll()
}

// conn is the agent's side of the agent stream, across reconnections.
type conn struct {
	name        string
	tags        map[string]string
	incarnation uint64
	loadEvery   time.Duration
	log         *slog.Logger
	resolver    *client.Resolver
	clock       clock.Clock // nil is the system clock

	work workloads
	ctl  answers
	logs logSources

	out *outbox
	// generation numbers the state reports of this incarnation; only the
	// sender of the current session advances it.
	generation atomic.Uint64

	mu  sync.Mutex
	cur *session // nil while disconnected
	// notify tells systemd whether a stream is open; nil tells nothing.
	notify *sdnotify.Notifier
	// storage is the run folder's health: a fault goes to the leader in
	// the hello and the load reports, and to systemd in STATUS. Nil: no
	// fault is ever told.
	storage *storage.Guard
	// abrupt makes the end of ctx cut the stream without Goodbye, as the
	// server sees an agent killed (SIGKILL): the in-process tests' kill.
	abrupt atomic.Bool
}

// clk is the agent's clock, or the system clock.
func (c *conn) clk() clock.Clock {
	if c.clock == nil {
		return clock.Real()
	}
	return c.clock
}

// session is one agent stream.
type session struct {
	st     *client.Stream
	sendMu sync.Mutex // one sender at a time, as gRPC streams require
	ended  bool       // this side ended the stream (CloseSend); guarded by sendMu
	// ready is closed once the ServerHello was handled: state reports and
	// load reports flow from then on.
	ready     chan struct{}
	readyOnce sync.Once
	// moved says why the agent closed the stream itself (the gossip named
	// another leader); nil otherwise.
	moved atomic.Pointer[string]
	// storageTold is the run folder's fault the hello told ("" none).
	storageTold string
}

func (s *session) send(m *grpcapi.ToServer) error {
	s.sendMu.Lock()
	defer s.sendMu.Unlock()
	if s.ended {
		return ErrNotConnected
	}
	return s.st.Send(m)
}

// goodbye sends Goodbye and ends this side of the stream; nothing is sent
// after it.
func (s *session) goodbye() {
	s.sendMu.Lock()
	defer s.sendMu.Unlock()
	if s.ended {
		return
	}
	s.ended = true
	_ = s.st.Send(&grpcapi.ToServer{ToServerEnum: &grpcapi.ToServer_Goodbye{Goodbye: &grpcapi.Goodbye{}}})
	_ = s.st.CloseSend()
}

func (s *session) markReady() { s.readyOnce.Do(func() { close(s.ready) }) }

// goodbyeWait bounds the wait for the server to end the stream after the
// agent's Goodbye.
const goodbyeWait = time.Second

// errProtocol wraps the server's refusal of the agent's protocol version;
// it ends Run.
var errProtocol = errors.New("the server refused the agent's protocol version")

// serve runs sessions one after the other until ctx ends or the server
// refuses the protocol version, which only another agent (or server)
// version can fix: it ends the agent, as it ends the Ankaios agent. A
// broken stream is replaced at once. Any other refusal (a certificate that
// does not allow the name, a state too large to greet with, a malformed
// hello) may be fixed on the replicas' side while the agent runs, so the
// agent tries again, the resolver spacing the attempts from 1 s up to
// 30 s (client.IsRefusal); each attempt logs one line.
func (c *conn) serve(ctx context.Context) error {
	for {
		err := c.session(ctx)
		if ctx.Err() != nil {
			return nil
		}
		if errors.Is(err, errProtocol) {
			return err
		}
		if client.IsRefusal(err) {
			wait, n := c.resolver.Refused()
			c.log.Warn("the server refused the agent stream; trying again later", "error", err,
				"refusals", n, "retry_in", wait.Round(time.Millisecond))
			continue
		}
		c.log.Warn("connection to the server lost; reconnecting", "error", err)
	}
}

// session opens a stream at the leader, greets it and serves it until it
// breaks or ctx ends; on ctx it says Goodbye first. Open gives up only when
// ctx ends or a replica refused the stream; it waits out earlier refusals
// itself.
func (c *conn) session(ctx context.Context) error {
	st, err := c.resolver.Open(ctx, wire.KindAgent)
	if err != nil {
		return err
	}
	s := &session{st: st, ready: make(chan struct{}), storageTold: c.storage.Short()}
	hello := &grpcapi.ToServer{ToServerEnum: &grpcapi.ToServer_AgentHello{AgentHello: &grpcapi.AgentHello{
		AgentName: c.name, ProtocolVersion: rpc.ProtocolVersion, Tags: &ankbase.Tags{Tags: c.tags},
		GrapnelIncarnation: c.incarnation, GrapnelRelease: buildinfo.Version,
		GrapnelClusterVersion: formats.ClusterVersion, GrapnelStorageFailed: s.storageTold,
	}}}
	if err := s.send(hello); err != nil {
		if errors.Is(err, io.EOF) {
			// The server ended the stream; its status says why.
			_, err = st.Recv()
		}
		st.Close()
		return c.why(s, err)
	}
	c.log.Debug("agent stream open", "server", st.Addr(), "replica", st.ReplicaID())
	c.setCurrent(s)

	sctx, cancel := context.WithCancel(ctx)
	var wg sync.WaitGroup
	wg.Add(2)
	go func() { defer wg.Done(); c.sendStates(sctx, s) }()
	go func() { defer wg.Done(); c.reportLoad(sctx, s) }()
	recvErr := make(chan error, 1)
	go func() { recvErr <- c.receive(ctx, s) }()

	select {
	case err = <-recvErr:
		c.setCurrent(nil)
	case <-ctx.Done():
		c.setCurrent(nil)
		if c.abrupt.Load() {
			st.Close()
			err = <-recvErr
			break
		}
		// Stopping on purpose: say Goodbye, end this side, and give the
		// server a moment to end the stream before cutting it.
		s.goodbye()
		wait := clock.NewTimer(c.clk(), goodbyeWait)
		select {
		case err = <-recvErr:
		case <-wait.C:
			st.Close()
			err = <-recvErr
		}
		wait.Stop()
	}
	cancel()
	st.Close()
	wg.Wait()
	// Ankaios ServerGone: the campaigns belong to the old stream, those
	// the agent runs and those its workloads opened (the server ended
	// them when the stream broke).
	c.logs.StopAll()
	c.ctl.ServerGone()
	return c.why(s, err)
}

// why classifies a stream error: a protocol-version refusal, the agent's
// own move to another leader, or the stream's error as it is.
func (c *conn) why(s *session, err error) error {
	if m := s.moved.Load(); m != nil {
		return fmt.Errorf("%w: %s", client.ErrLeaderMoved, *m)
	}
	if errors.Is(rpc.FromStatus(err), errs.ErrUnsupportedProtocol) {
		return fmt.Errorf("%w: %w", errProtocol, err)
	}
	return err
}

// receive serves the stream's messages until Recv fails.
func (c *conn) receive(ctx context.Context, s *session) error {
	for {
		m, err := s.st.Recv()
		if err != nil {
			return err
		}
		switch m := m.GetFromServerEnum().(type) {
		case *grpcapi.FromServer_ServerHello:
			// Only the ServerHello tells that the server took the hello:
			// a refusal comes after the stream opened.
			c.log.Info("connected to the server", "server", s.st.Addr(), "replica", s.st.ReplicaID())
			added := c.added(m.ServerHello.GetAddedWorkloads())
			c.work.ServerHello(ctx, added)
			// The new leader may have missed changes reported to the old
			// one: report every instance's current state again, unless a
			// newer report is pending already.
			c.out.putMissing(c.work.Current())
			s.markReady()
		case *grpcapi.FromServer_UpdateWorkload:
			u := m.UpdateWorkload
			if len(u.GetAddedWorkloads()) == 0 && len(u.GetDeletedWorkloads()) == 0 {
				// A Grapnel leader's drift repair request (`grapnel
				// agent resync`); an update never comes empty.
				c.log.Info("the server asks for a drift repair round")
				c.work.Resync()
				continue
			}
			c.work.Update(c.added(u.GetAddedWorkloads()), deletedFromProto(u.GetDeletedWorkloads()))
		case *grpcapi.FromServer_UpdateWorkloadState:
			ws, err := rpc.WorkloadStatesFromProto(m.UpdateWorkloadState.GetWorkloadStates())
			if err != nil {
				c.log.Warn("ignoring a bad workload state broadcast", "error", err)
				continue
			}
			c.work.States(ws)
		case *grpcapi.FromServer_Response:
			if !c.ctl.Deliver(m.Response) {
				c.log.Debug("no control interface waits for this response", "request", m.Response.GetRequestId())
			}
		case *grpcapi.FromServer_LogsRequest:
			c.logs.Start(m.LogsRequest)
		case *grpcapi.FromServer_LogsCancelRequest:
			c.logs.Cancel(m.LogsCancelRequest.GetRequestId())
		}
	}
}

// added converts the workloads the server hands over. One that does not
// convert never reaches the Manager: it is reported Pending(StartingFailed)
// with the reason.
func (c *conn) added(ps []*grpcapi.AddedWorkload) []workload.Added {
	out := make([]workload.Added, 0, len(ps))
	var failed []state.WorkloadState
	for _, p := range ps {
		inst := rpc.InstanceNameFromProto(p.GetInstanceName())
		w, err := rpc.WorkloadFromProto(p.GetWorkload(), "workload")
		if err != nil {
			c.log.Warn("cannot start a workload the server sent", "instance", inst.String(), "error", err)
			failed = append(failed, state.WorkloadState{Instance: inst, State: state.ExecutionState{
				State: state.StatePending, SubState: state.SubStartingFailed, AdditionalInfo: err.Error()}})
			continue
		}
		out = append(out, workload.Added{Instance: inst, Workload: w})
	}
	c.out.put(failed)
	return out
}

// deletedFromProto converts deletions; a delete condition the agent does
// not know is taken as the stricter DEL_COND_NOT_PENDING_NOR_RUNNING.
func deletedFromProto(ps []*grpcapi.DeletedWorkload) []workload.Deleted {
	out := make([]workload.Deleted, 0, len(ps))
	for _, p := range ps {
		d := workload.Deleted{Instance: rpc.InstanceNameFromProto(p.GetInstanceName())}
		if len(p.GetDependencies()) > 0 {
			d.Dependencies = make(map[string]state.DeleteCondition, len(p.GetDependencies()))
			for name, cond := range p.GetDependencies() {
				dc := state.DelCondNotPendingNorRunning
				if n, ok := grpcapi.DeleteCondition_name[int32(cond)]; ok {
					dc = state.DeleteCondition(n)
				}
				d.Dependencies[name] = dc
			}
		}
		out = append(out, d)
	}
	return out
}

// sendStates sends the pending state reports once the session is ready,
// each report with the next generation. A failed send puts the states back
// and ends the stream.
func (c *conn) sendStates(ctx context.Context, s *session) {
	select {
	case <-s.ready:
	case <-ctx.Done():
		return
	}
	for {
		if ws := c.out.take(); len(ws) > 0 {
			m := &grpcapi.ToServer{ToServerEnum: &grpcapi.ToServer_UpdateWorkloadState{UpdateWorkloadState: &grpcapi.UpdateWorkloadState{
				WorkloadStates: rpc.WorkloadStatesToProto(ws), GrapnelGeneration: c.generation.Add(1),
			}}}
			if err := s.send(m); err != nil {
				c.out.putBack(ws)
				s.st.Close()
				return
			}
		}
		select {
		case <-c.out.wake:
		case <-ctx.Done():
			return
		}
	}
}

// reportLoad sends CPU usage and free memory every loadEvery once the
// session is ready, at multiples of loadEvery on the wall clock: the
// agents of a vehicle then report together, and the leader wakes once
// for all of their reports instead of once for each. Each report also
// says whether the run folder's storage failed, and a change of that is
// reported at once, so that the leader's problem opens and closes with
// it.
func (c *conn) reportLoad(ctx context.Context, s *session) {
	select {
	case <-s.ready:
	case <-ctx.Done():
		return
	}
	var changed <-chan struct{}
	if c.storage != nil {
		ch, cancel := c.storage.Changes()
		defer cancel()
		changed = ch
	}
	told := s.storageTold
	prev, _ := readCPU()
	t := clock.NewTimer(c.clk(), clock.UntilSlot(c.clk().Now(), c.loadEvery))
	defer t.Stop()
	for {
		// A change since the hello, or since the last report, goes out
		// at once.
		if c.storage.Short() == told {
			select {
			case <-ctx.Done():
				return
			case <-t.C:
				t.Reset(clock.UntilSlot(c.clk().Now(), c.loadEvery))
			case <-changed:
				continue
			}
		}
		cur, ok := readCPU()
		var pct uint32
		if ok {
			pct = cpuPercent(prev, cur)
			prev = cur
		}
		told = c.storage.Short()
		m := &grpcapi.ToServer{ToServerEnum: &grpcapi.ToServer_AgentLoadStatus{AgentLoadStatus: &grpcapi.AgentLoadStatus{
			AgentName: c.name, CpuUsage: &ankbase.CpuUsage{CpuUsage: pct}, FreeMemory: &ankbase.FreeMemory{FreeMemory: freeMemory()},
			GrapnelStorageFailed: told}}}
		if err := s.send(m); err != nil {
			return
		}
	}
}

// report takes the Manager's state changes; it never blocks.
func (c *conn) report(ws []state.WorkloadState) { c.out.put(ws) }

// send sends m on the current stream, for the log campaigns.
func (c *conn) send(m *grpcapi.ToServer) error {
	c.mu.Lock()
	s := c.cur
	c.mu.Unlock()
	if s == nil {
		return ErrNotConnected
	}
	return s.send(m)
}

// forward sends a control interface request to the server.
func (c *conn) forward(r *ankbase.Request) error {
	return c.send(&grpcapi.ToServer{ToServerEnum: &grpcapi.ToServer_Request{Request: r}})
}

func (c *conn) setCurrent(s *session) {
	c.mu.Lock()
	c.cur = s
	c.mu.Unlock()
	c.showStatus()
}

// showStatus tells systemd whom the agent is connected to and, while the
// run folder's storage failed, that too.
func (c *conn) showStatus() {
	c.mu.Lock()
	s := c.cur
	c.mu.Unlock()
	text := statusWaiting
	if s != nil {
		text = statusConnected + s.st.ReplicaID()
	}
	if f := c.storage.Short(); f != "" {
		text += statusStorage + f + statusStorageEnd
	}
	c.notify.Status(text)
}

// followStorage keeps STATUS in step with the run folder's health until
// the returned function is called.
func (c *conn) followStorage() (stop func()) {
	if c.storage == nil {
		return func() {}
	}
	changed, cancel := c.storage.Changes()
	done, ended := make(chan struct{}), make(chan struct{})
	go func() {
		defer close(ended)
		for {
			select {
			case <-changed:
				c.showStatus()
			case <-done:
				return
			}
		}
	}()
	return func() {
		cancel()
		close(done)
		<-ended
	}
}

// The STATUS= texts systemd shows for an agent.
const (
	statusWaiting    = "waiting for the leader"
	statusConnected  = "connected to leader "
	statusStorage    = "; run folder failed: "
	statusStorageEnd = "; workloads keep running, probing it"
)

// replica is the id of the replica the current stream is open to; "" when
// disconnected or unknown.
func (c *conn) replica() string {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.cur == nil {
		return ""
	}
	return c.cur.st.ReplicaID()
}

// hint takes the leader the replicas' gossip names. When the current
// stream is open to another replica, the agent moves at once: it ends the
// stream and the next session opens at the hinted leader.
func (c *conn) hint(id, addr string) {
	c.resolver.Hint(id, addr)
	c.mu.Lock()
	s := c.cur
	c.mu.Unlock()
	if s == nil || s.st.ReplicaID() == "" || s.st.ReplicaID() == id {
		return
	}
	why := fmt.Sprintf("gossip names %s the leader, the stream is open to %s", id, s.st.ReplicaID())
	if s.moved.CompareAndSwap(nil, &why) {
		c.log.Info("moving to the leader named by gossip", "leader", id, "address", addr, "from", s.st.ReplicaID())
		s.st.Close()
	}
}
