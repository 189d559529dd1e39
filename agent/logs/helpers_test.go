package logs

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"time"

	"google.golang.org/protobuf/proto"

	"github.com/grapnel-io/grapnel/agent/runtime"
	"github.com/grapnel-io/grapnel/internal/clock"
	"github.com/grapnel-io/grapnel/internal/testwait"
	"github.com/grapnel-io/grapnel/rpc"
	"github.com/grapnel-io/grapnel/rpc/ankbase"
	"github.com/grapnel-io/grapnel/rpc/grpcapi"
	"github.com/grapnel-io/grapnel/state"
)

// wait bounds every wait of these tests; passing runs take milliseconds.
const wait = 5 * time.Second

var errUnused = errors.New("not used by log campaigns")

var quiet = slog.New(slog.NewTextHandler(io.Discard, nil))

// stream is a log source the test controls: the test writes its lines
// and ends it, and sees whether the campaign closed it.
type stream struct {
	r      *io.PipeReader
	w      *io.PipeWriter
	closed chan struct{}
	once   sync.Once
}

func newStream() *stream {
	r, w := io.Pipe()
	return &stream{r: r, w: w, closed: make(chan struct{})}
}

func (s *stream) Read(p []byte) (int, error) { return s.r.Read(p) }

func (s *stream) Close() error {
	s.once.Do(func() { close(s.closed) })
	return s.r.Close()
}

// line writes lines; it fails once the campaign closed the stream.
func (s *stream) line(t *testing.T, lines ...string) {
	t.Helper()
	for _, l := range lines {
		if _, err := io.WriteString(s.w, l+"\n"); err != nil {
			t.Fatalf("write %q: %v", l, err)
		}
	}
}

func (s *stream) end() { _ = s.w.Close() }

func (s *stream) waitClosed(t *testing.T) {
	t.Helper()
	select {
	case <-s.closed:
	case <-time.After(wait):
		t.Fatal("the campaign did not close the reader")
	}
}

// fakeRuntime hands out the readers of its sources and records the
// options it was asked for.
type fakeRuntime struct {
	mu      sync.Mutex
	sources map[runtime.ID]func() (io.ReadCloser, error)
	opts    []runtime.LogOptions
}

func (r *fakeRuntime) Name() string                                             { return "fake" }
func (r *fakeRuntime) Check(string) error                                       { return errUnused }
func (r *fakeRuntime) Create(context.Context, runtime.Spec) (runtime.ID, error) { return "", errUnused }
func (r *fakeRuntime) State(context.Context, runtime.ID) (state.ExecutionState, error) {
	return state.ExecutionState{}, errUnused
}
func (r *fakeRuntime) Delete(context.Context, runtime.ID) error              { return errUnused }
func (r *fakeRuntime) List(context.Context, string) ([]runtime.Found, error) { return nil, errUnused }

func (r *fakeRuntime) Logs(_ context.Context, id runtime.ID, o runtime.LogOptions) (io.ReadCloser, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.opts = append(r.opts, o)
	open, ok := r.sources[id]
	if !ok {
		return nil, runtime.ErrNotFound
	}
	return open()
}

func (r *fakeRuntime) asked() []runtime.LogOptions {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]runtime.LogOptions(nil), r.opts...)
}

// fixture is an agent with instances whose logs the test provides.
type fixture struct {
	t     *testing.T
	rt    *fakeRuntime
	known map[state.InstanceName]runtime.ID
	sent  chan *grpcapi.ToServer
	clk   *clock.Fake
	c     *Campaigns
	mu    sync.Mutex
	fail  error
}

func newFixture(t *testing.T, maxBatch int) *fixture {
	f := &fixture{
		t:     t,
		rt:    &fakeRuntime{sources: map[runtime.ID]func() (io.ReadCloser, error){}},
		known: map[state.InstanceName]runtime.ID{},
		sent:  make(chan *grpcapi.ToServer, 10000),
		clk:   clock.NewFake(time.Unix(0, 0)),
	}
	f.c = New(Config{Lookup: f.lookup, Send: f.send, MaxBatch: maxBatch, Logger: quiet, Clock: f.clk})
	t.Cleanup(func() {
		f.c.StopAll()
		f.c.wait()
	})
	return f
}

func (f *fixture) lookup(inst state.InstanceName) (runtime.Runtime, runtime.ID, bool) {
	id, ok := f.known[inst]
	return f.rt, id, ok
}

func (f *fixture) send(m *grpcapi.ToServer) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.fail != nil {
		return f.fail
	}
	f.sent <- m
	return nil
}

func instance(name string) state.InstanceName {
	return state.InstanceName{WorkloadName: name, AgentName: "agent_A", ID: "id-" + name}
}

// add makes name an instance whose logs are r.
func (f *fixture) add(name string, r io.ReadCloser) {
	inst := instance(name)
	f.known[inst] = runtime.ID(name)
	f.rt.sources[runtime.ID(name)] = func() (io.ReadCloser, error) { return r, nil }
}

func request(id string, req *ankbase.LogsRequest, names ...string) *grpcapi.LogsRequest {
	if req == nil {
		req = &ankbase.LogsRequest{}
	}
	for _, n := range names {
		req.WorkloadNames = append(req.WorkloadNames, rpc.InstanceNameToProto(instance(n)))
	}
	return &grpcapi.LogsRequest{RequestId: id, LogsRequest: req}
}

func (f *fixture) next() *grpcapi.ToServer {
	f.t.Helper()
	select {
	case m := <-f.sent:
		return m
	case <-time.After(wait):
		f.t.Fatal("nothing sent")
		return nil
	}
}

// nextFlushing waits for a message, moving the clock when a batch waits
// for its flush.
func (f *fixture) nextFlushing() *grpcapi.ToServer {
	f.t.Helper()
	var m *grpcapi.ToServer
	testwait.For(f.t, wait, func() bool {
		select {
		case m = <-f.sent:
			return true
		default:
		}
		if f.clk.Pending() > 0 {
			f.clk.Advance(flushAfter)
		}
		return false
	}, "a message sent")
	return m
}

func (f *fixture) none() {
	f.t.Helper()
	select {
	case m := <-f.sent:
		f.t.Fatalf("unexpected %v", m)
	default:
	}
}

// collect reads messages until every named source has stopped and
// returns the entries per source and the order of the stops.
func (f *fixture) collect(requestID string, names ...string) (map[string][]string, []string) {
	f.t.Helper()
	return f.collectAlso(requestID, nil, names...)
}

// collectAlso is collect while the sources in others may send lines too.
func (f *fixture) collectAlso(requestID string, others []string, names ...string) (map[string][]string, []string) {
	f.t.Helper()
	entries := map[string][]string{}
	var stops []string
	open := map[string]bool{}
	waiting := len(names)
	for _, n := range names {
		open[n] = true
	}
	for _, n := range others {
		open[n] = true
	}
	for waiting > 0 {
		m := f.nextFlushing()
		switch {
		case m.GetLogEntriesResponse() != nil:
			r := m.GetLogEntriesResponse()
			if r.GetRequestId() != requestID {
				f.t.Fatalf("request id %q", r.GetRequestId())
			}
			if size := proto.Size(r.GetLogEntriesResponse()); size > f.c.cfg.MaxBatch {
				f.t.Fatalf("batch of %d bytes over %d", size, f.c.cfg.MaxBatch)
			}
			for _, e := range r.GetLogEntriesResponse().GetLogEntries() {
				n := e.GetWorkloadName().GetWorkloadName()
				if !open[n] {
					f.t.Fatalf("entry of %q after its stop or never requested", n)
				}
				entries[n] = append(entries[n], e.GetMessage())
			}
		case m.GetLogsStopResponse() != nil:
			r := m.GetLogsStopResponse()
			n := r.GetLogsStopResponse().GetWorkloadName().GetWorkloadName()
			if r.GetRequestId() != requestID || !open[n] {
				f.t.Fatalf("unexpected stop %v", r)
			}
			if got := rpc.InstanceNameFromProto(r.GetLogsStopResponse().GetWorkloadName()); got != instance(n) {
				f.t.Fatalf("stop names %v", got)
			}
			delete(open, n)
			stops = append(stops, n)
			waiting--
		default:
			f.t.Fatalf("unexpected message %v", m)
		}
	}
	return entries, stops
}

// readerOf is a finished source.
func readerOf(lines ...string) io.ReadCloser {
	return io.NopCloser(strings.NewReader(strings.Join(lines, "")))
}

// nextFlushingOrClosed moves the clock until the campaign closes s, and
// fails the test if it does not.
func (f *fixture) nextFlushingOrClosed(s *stream) {
	f.t.Helper()
	testwait.For(f.t, wait, func() bool {
		select {
		case <-s.closed:
			return true
		default:
		}
		if f.clk.Pending() > 0 {
			f.clk.Advance(flushAfter)
		}
		return false
	}, "the campaign to close the reader")
}
