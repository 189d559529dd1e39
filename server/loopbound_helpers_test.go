//go:build unix

package server

import (
	"context"
	"fmt"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/encoding"
	"google.golang.org/grpc/mem"
	"google.golang.org/protobuf/encoding/protowire"
	"google.golang.org/protobuf/proto"

	"github.com/grapnel-io/grapnel/rpc"
	"github.com/grapnel-io/grapnel/rpc/ankbase"
	"github.com/grapnel-io/grapnel/rpc/grapnelpb"
	"github.com/grapnel-io/grapnel/rpc/grpcapi"
	"github.com/grapnel-io/grapnel/rpc/wire"
	"github.com/grapnel-io/grapnel/state"
)

// The helpers of the leader-loop benchmarks (loopbound_bench_test.go):
// streams that read everything the leader sends and keep only what a
// benchmark waits for, and a record of how long each event held the
// leader loop (Server.observeLoop).

// holdLog records the leader loop's events while a benchmark runs.
type holdLog struct {
	mu     sync.Mutex
	events []heldEvent
}

type heldEvent struct {
	event string
	held  time.Duration
}

func (h *holdLog) add(event string, d time.Duration) {
	h.mu.Lock()
	h.events = append(h.events, heldEvent{event, d})
	h.mu.Unlock()
}

// take returns the events recorded since the last take.
func (h *holdLog) take() []heldEvent {
	h.mu.Lock()
	defer h.mu.Unlock()
	out := h.events
	h.events = nil
	return out
}

// watchLoop records every event of ts's leader loop from now on.
func watchLoop(tb testing.TB, ts *testServer) *holdLog {
	h := &holdLog{}
	ts.srv.observeLoop(h.add)
	tb.Cleanup(func() { ts.srv.observeLoop(nil) })
	return h
}

// quiesce returns once the leader loop has nothing left from what was
// sent before: the proposals queued, the entries they cause (a layout, a
// problems entry) and their commits. A revision call is answered after
// every proposal before it; a ping is taken only between two events, so
// the event that answered has been recorded. It repeats until three
// rounds in a row see nothing but themselves: a batch of reports
// proposed in one step commits a moment later and lets the next step
// propose the next.
func quiesce(tb testing.TB, ts *testServer, pc grapnelpb.PlanClient, h *holdLog) []heldEvent {
	tb.Helper()
	var all []heldEvent
	quietRounds := 0
	for round := 0; round < 1000; round++ {
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		if _, err := pc.Revision(ctx, &grapnelpb.RevisionRequest{}); err != nil {
			cancel()
			tb.Fatal(err)
		}
		if err := ts.srv.Alive(ctx); err != nil {
			cancel()
			tb.Fatal(err)
		}
		cancel()
		evs := h.take()
		all = append(all, evs...)
		quiet := true
		for _, e := range evs {
			if e.event != "plan_revision" {
				quiet = false
			}
		}
		if !quiet {
			quietRounds = 0
			continue
		}
		if quietRounds++; quietRounds == 3 {
			return all
		}
	}
	tb.Fatal("the leader loop did not settle")
	return nil
}

// maxHeld is the longest hold of event among evs (0 if none).
func maxHeld(evs []heldEvent, event string) time.Duration {
	var m time.Duration
	for _, e := range evs {
		if e.event == event {
			m = max(m, e.held)
		}
	}
	return m
}

// longest is the event that held the loop longest among evs.
func longest(evs []heldEvent) heldEvent {
	var m heldEvent
	for _, e := range evs {
		if e.held > m.held {
			m = e
		}
	}
	return m
}

// holdStats collects one figure per operation and reports its median
// and maximum in milliseconds.
type holdStats struct{ per []time.Duration }

func (s *holdStats) add(d time.Duration) { s.per = append(s.per, d) }

func (s *holdStats) report(b *testing.B, name string) {
	if len(s.per) == 0 {
		return
	}
	v := slices.Clone(s.per)
	slices.Sort(v)
	ms := func(d time.Duration) float64 { return float64(d.Microseconds()) / 1000 }
	b.ReportMetric(ms(v[len(v)/2]), name+"-p50-ms")
	b.ReportMetric(ms(v[len(v)-1]), name+"-max-ms")
}

// benchConn is an Ankaios stream that drains everything the server
// sends, so that a benchmark with hundreds of streams neither holds what
// they receive nor lets a send queue fill (the leader would drop the
// stream). Messages keep accepts are handed to got.
type benchConn struct {
	tb     testing.TB
	stream wire.Stream
	cancel context.CancelFunc
	keep   func(*grpcapi.FromServer) bool
	got    chan *grpcapi.FromServer
	recvd  atomic.Int64
	ended  chan struct{}
	nextID atomic.Int64
}

// benchDialer shares a few gRPC connections among many streams.
type benchDialer struct {
	tb    testing.TB
	addr  string
	conns []*grpc.ClientConn
	n     int
}

func newBenchDialer(tb testing.TB, addr string, conns int) *benchDialer {
	d := &benchDialer{tb: tb, addr: addr}
	for range conns {
		cc, err := grpc.NewClient(addr, grpc.WithTransportCredentials(insecure.NewCredentials()),
			grpc.WithDefaultCallOptions(grpc.MaxCallRecvMsgSize(2*rpc.MaxMessageBytes), grpc.MaxCallSendMsgSize(2*rpc.MaxMessageBytes)))
		if err != nil {
			tb.Fatal(err)
		}
		d.conns = append(d.conns, cc)
		tb.Cleanup(func() { _ = cc.Close() })
	}
	return d
}

// skimCodec is gRPC's proto codec for a benchmark's streams that does
// not decode the messages of the FromServer fields in skip (they arrive
// empty): the benchmark's hundreds of agents would otherwise spend the
// machine's two cores decoding the broadcasts a real agent decodes on
// its own computer, and the leader loop would wait for a core.
type skimCodec struct {
	proto encoding.CodecV2
	skip  map[protowire.Number]bool
}

func (c skimCodec) Name() string                                { return c.proto.Name() }
func (c skimCodec) Marshal(v any) (mem.BufferSlice, error)      { return c.proto.Marshal(v) }
func (c skimCodec) Unmarshal(data mem.BufferSlice, v any) error { return c.unmarshal(data, v) }

func (c skimCodec) unmarshal(data mem.BufferSlice, v any) error {
	buf := data.Materialize()
	if num, _, n := protowire.ConsumeTag(buf); n > 0 && c.skip[num] {
		proto.Reset(v.(proto.Message))
		return nil
	}
	return proto.Unmarshal(buf, v.(proto.Message))
}

// FromServer's fields (rpc/grpcapi): what the benchmark's streams skip.
const (
	fieldUpdateWorkload      protowire.Number = 1
	fieldUpdateWorkloadState protowire.Number = 2
	fieldResponse            protowire.Number = 3
)

// open opens a stream of kind; keep selects the messages a benchmark
// waits for (nil: responses); the fields in skip are not decoded.
func (d *benchDialer) open(kind wire.Kind, keep func(*grpcapi.FromServer) bool, skip ...protowire.Number) *benchConn {
	cc := d.conns[d.n%len(d.conns)]
	d.n++
	if keep == nil {
		keep = func(m *grpcapi.FromServer) bool { return m.GetResponse() != nil }
	}
	ctx, cancel := context.WithCancel(context.Background())
	codec := skimCodec{proto: encoding.GetCodecV2("proto"), skip: map[protowire.Number]bool{}}
	for _, f := range skip {
		codec.skip[f] = true
	}
	var (
		st  wire.Stream
		err error
	)
	switch kind {
	case wire.KindAgent:
		st, err = grpcapi.NewAgentConnectionClient(cc).ConnectAgent(ctx, grpc.ForceCodecV2(codec))
	default:
		st, err = grpcapi.NewCliConnectionClient(cc).ConnectCli(ctx, grpc.ForceCodecV2(codec))
	}
	if err != nil {
		cancel()
		d.tb.Fatal(err)
	}
	c := &benchConn{tb: d.tb, stream: st, cancel: cancel, keep: keep, got: make(chan *grpcapi.FromServer, 1<<16), ended: make(chan struct{})}
	go func() {
		defer close(c.ended)
		for {
			m, err := st.Recv()
			if err != nil {
				return
			}
			c.recvd.Add(1)
			if c.keep(m) {
				c.got <- m
			}
		}
	}()
	d.tb.Cleanup(cancel)
	return c
}

// agent opens an agent stream, says hello with tags and waits for the
// ServerHello.
func (d *benchDialer) agent(name string, tags map[string]string) *benchConn {
	c := d.open(wire.KindAgent, func(m *grpcapi.FromServer) bool {
		return m.GetServerHello() != nil || m.GetResponse() != nil || m.GetLogsRequest() != nil
	},
		fieldUpdateWorkload, fieldUpdateWorkloadState)
	c.send(&grpcapi.ToServer{ToServerEnum: &grpcapi.ToServer_AgentHello{AgentHello: &grpcapi.AgentHello{
		AgentName: name, ProtocolVersion: rpc.ProtocolVersion, Tags: &ankbase.Tags{Tags: tags}, GrapnelIncarnation: 1}}})
	c.wait("ServerHello of "+name, func(m *grpcapi.FromServer) bool { return m.GetServerHello() != nil })
	return c
}

// cli opens a CLI stream; it does not decode the workload-state
// broadcasts, nor the responses if skipResponses.
func (d *benchDialer) cli(skipResponses bool) *benchConn {
	skip := []protowire.Number{fieldUpdateWorkloadState}
	if skipResponses {
		skip = append(skip, fieldResponse)
	}
	c := d.open(wire.KindCLI, nil, skip...)
	c.send(&grpcapi.ToServer{ToServerEnum: &grpcapi.ToServer_CommanderHello{CommanderHello: &grpcapi.CommanderHello{ProtocolVersion: rpc.ProtocolVersion}}})
	return c
}

func (c *benchConn) send(m *grpcapi.ToServer) {
	if err := c.stream.Send(m); err != nil {
		c.tb.Fatalf("send: %v", err)
	}
}

// wait waits for a kept message matching pred, dropping the others.
func (c *benchConn) wait(what string, pred func(*grpcapi.FromServer) bool) *grpcapi.FromServer {
	c.tb.Helper()
	timeout := time.NewTimer(2 * time.Minute)
	defer timeout.Stop()
	for {
		select {
		case m := <-c.got:
			if pred(m) {
				return m
			}
		case <-c.ended:
			c.tb.Fatalf("the stream ended waiting for %s", what)
		case <-timeout.C:
			c.tb.Fatalf("no %s", what)
		}
	}
}

// request sends req with a fresh id and waits for its response.
func (c *benchConn) request(req *ankbase.Request) *ankbase.Response {
	c.tb.Helper()
	id := fmt.Sprintf("b%d", c.nextID.Add(1))
	req.RequestId = id
	c.send(&grpcapi.ToServer{ToServerEnum: &grpcapi.ToServer_Request{Request: req}})
	return c.wait("response to "+id, func(m *grpcapi.FromServer) bool { return m.GetResponse().GetRequestId() == id }).GetResponse()
}

// update replaces the parts of the desired state the masks name.
func (c *benchConn) update(s state.State, masks ...string) *ankbase.Response {
	c.tb.Helper()
	cs, err := rpc.CompleteStateFromTree(state.Tree{"desiredState": s.ToTree()})
	if err != nil {
		c.tb.Fatal(err)
	}
	return c.request(&ankbase.Request{RequestContent: &ankbase.Request_UpdateStateRequest{
		UpdateStateRequest: &ankbase.UpdateStateRequest{NewState: cs, UpdateMask: masks}}})
}

// sync returns once the leader loop has taken everything sent on this
// stream before: a request answered at once comes back after them (for
// an agent, one naming none of its workloads, which is refused at once;
// for a client, an events cancel).
func (c *benchConn) sync() {
	c.tb.Helper()
	c.request(&ankbase.Request{RequestContent: &ankbase.Request_EventsCancelRequest{EventsCancelRequest: &ankbase.EventsCancelRequest{}}})
}

func (c *benchConn) close() { c.cancel() }
