package bench

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/grapnel-io/grapnel/rpc"
	"github.com/grapnel-io/grapnel/rpc/ankbase"
	"github.com/grapnel-io/grapnel/rpc/client"
	"github.com/grapnel-io/grapnel/state"
)

// ErrUnexpectedResponse means the server answered with something other
// than what the request asks for.
var ErrUnexpectedResponse = errors.New("unexpected response")

// BenchAgent is the agent every benchmark workload is assigned to. No
// agent connects: the benchmark measures the server's commit path.
const BenchAgent = "bench_agent"

// MinPayload is the smallest runtimeConfig a Writer can build.
const MinPayload = 48

// Writer is one benchmark client of Grapnel: its own leader-aware CLI
// stream (the rpc/client package the CLI and the agent use, with a
// Resolver and gRPC connections of its own) and its own workload, whose
// runtimeConfig it rewrites on every update. A broken stream is redialled
// through the Resolver on the next call, which goes straight to the new
// leader once one is known, so a Writer rides through a failover as the
// CLI would; with Lookout, as an agent would (a stream the lookout ended
// with ErrLeaderMoved is redialled at the leader the lookout named). Not
// safe for concurrent use.
type Writer struct {
	// ConfigOnly makes Update write a config item of the payload size
	// instead of the workload's runtimeConfig: a replicated write with no
	// new instance, so no Removed state is broadcast to every stream.
	ConfigOnly bool
	// Commander makes the writer a commander (CommandConnection): it
	// gets its own answers only, not every workload-state broadcast.
	Commander bool
	// Lookout makes the writer keep a lookout at another replica
	// (client.Options.Lookout), as an agent does: a leader that freezes
	// is left as soon as the lookout names the next one, not when its
	// heartbeat stops. For a writer that stands for a long-lived client.
	Lookout bool

	opts     client.Options
	workload string
	payload  int
	res      *client.Resolver
	conn     *client.Conn
}

// NewWriter returns a writer for workload over the given replica
// addresses; payload is the runtimeConfig size in bytes, timeout bounds
// one request.
func NewWriter(addrs []string, workload string, payload int, timeout time.Duration) (*Writer, error) {
	switch {
	case len(addrs) == 0:
		return nil, fmt.Errorf("%w: writer: no address", ErrBadConfig)
	case payload < MinPayload:
		return nil, fmt.Errorf("%w: payload %d: need at least %d bytes", ErrBadConfig, payload, MinPayload)
	}
	if err := state.CheckName("workload", "workload name", workload); err != nil {
		return nil, fmt.Errorf("%w: %w", ErrBadConfig, err)
	}
	o := client.Options{Addrs: addrs, Insecure: true, ResponseTimeout: timeout}
	return &Writer{opts: o, workload: workload, payload: payload}, nil
}

// RuntimeConfig is the runtimeConfig of update seq: valid YAML of exactly
// n bytes (n >= MinPayload) that carries seq.
func RuntimeConfig(n, seq int) string {
	head := fmt.Sprintf("image: bench\nseq: %d\npad: ", seq)
	return head + strings.Repeat("x", max(0, n-len(head)-1)) + "\n"
}

// ParseSeq reads the seq back out of a RuntimeConfig.
func ParseSeq(rc string) (int, bool) {
	for line := range strings.SplitSeq(rc, "\n") {
		if v, ok := strings.CutPrefix(line, "seq: "); ok {
			n, err := strconv.Atoi(v)
			return n, err == nil
		}
	}
	return 0, false
}

// Addr is the replica the stream is open to, or "" when none is.
func (w *Writer) Addr() string {
	if w.conn == nil {
		return ""
	}
	return w.conn.Addr()
}

// Close ends the stream and the Resolver's connections.
func (w *Writer) Close() {
	w.drop()
	if w.res != nil {
		w.res.Close()
		w.res = nil
	}
}

// drop ends the stream but keeps what the Resolver learned.
func (w *Writer) drop() {
	if w.conn != nil {
		w.conn.Close()
		w.conn = nil
	}
}

// ensure opens a stream to the leader unless one is up.
func (w *Writer) ensure(ctx context.Context) error {
	if w.conn != nil && w.conn.Err() == nil {
		return nil
	}
	w.drop()
	if w.res == nil {
		w.opts.Commander, w.opts.Lookout = w.Commander, w.Lookout
		r, err := client.NewResolver(w.opts)
		if err != nil {
			return err
		}
		w.res = r
	}
	c, err := w.res.Dial(ctx)
	if err != nil {
		return err
	}
	w.conn = c
	return nil
}

// request sends req on the stream (dialling first if needed). Any failure
// that is not the server's own answer drops the stream, so the next call
// starts afresh.
func (w *Writer) request(ctx context.Context, req *ankbase.Request) (*ankbase.Response, error) {
	if err := w.ensure(ctx); err != nil {
		return nil, err
	}
	resp, err := w.conn.Request(ctx, req)
	if err != nil {
		var se *client.ServerError
		if !errors.As(err, &se) {
			// The replica failed us: ask around for the leader next time
			// instead of trusting the one last learned.
			w.res.Forget(w.conn.Addr())
			w.drop()
		}
		return nil, err
	}
	return resp, nil
}

// Update sets the workload's runtimeConfig to RuntimeConfig(payload, seq)
// and returns once the server acknowledged it (after the commit).
func (w *Writer) Update(ctx context.Context, seq int) error {
	if w.ConfigOnly {
		return w.updateConfig(ctx, seq)
	}
	cs := state.CompleteState{DesiredState: state.State{
		APIVersion: state.APIVersion,
		Workloads: map[string]*state.Workload{w.workload: {
			Agent: BenchAgent, Runtime: "podman", RestartPolicy: state.RestartNever,
			RuntimeConfig: RuntimeConfig(w.payload, seq),
		}},
	}}
	return w.updateState(ctx, &cs, "desiredState.workloads."+w.workload)
}

// updateState sends one UpdateState and checks it was acknowledged.
func (w *Writer) updateState(ctx context.Context, cs *state.CompleteState, mask string) error {
	req := &ankbase.Request{RequestContent: &ankbase.Request_UpdateStateRequest{UpdateStateRequest: &ankbase.UpdateStateRequest{
		NewState:   rpc.CompleteStateToProto(cs),
		UpdateMask: []string{mask},
	}}}
	resp, err := w.request(ctx, req)
	if err != nil {
		return err
	}
	if resp.GetUpdateStateSuccess() == nil {
		return fmt.Errorf("%w to UpdateState: %v", ErrUnexpectedResponse, resp)
	}
	return nil
}

// updateConfig sets config item <workload> to RuntimeConfig(payload, seq).
func (w *Writer) updateConfig(ctx context.Context, seq int) error {
	cs := state.CompleteState{DesiredState: state.State{
		APIVersion: state.APIVersion,
		Configs:    map[string]any{w.workload: RuntimeConfig(w.payload, seq)},
	}}
	return w.updateState(ctx, &cs, "desiredState.configs."+w.workload)
}

// ReadSeq reads the workload back and returns the seq its runtimeConfig
// carries; ok is false when the workload does not exist.
func (w *Writer) ReadSeq(ctx context.Context) (seq int, ok bool, err error) {
	req := &ankbase.Request{RequestContent: &ankbase.Request_CompleteStateRequest{CompleteStateRequest: &ankbase.CompleteStateRequest{
		FieldMask: []string{"desiredState.workloads." + w.workload},
	}}}
	resp, err := w.request(ctx, req)
	if err != nil {
		return 0, false, err
	}
	cs := resp.GetCompleteStateResponse()
	if cs == nil {
		return 0, false, fmt.Errorf("%w to CompleteStateRequest: %v", ErrUnexpectedResponse, resp)
	}
	wl := cs.GetCompleteState().GetDesiredState().GetWorkloads().GetWorkloads()[w.workload]
	if wl == nil {
		return 0, false, nil
	}
	seq, ok = ParseSeq(wl.GetRuntimeConfig())
	if !ok {
		return 0, false, fmt.Errorf("%w: runtimeConfig of %s carries no seq: %q", ErrUnexpectedResponse, w.workload, wl.GetRuntimeConfig())
	}
	return seq, true, nil
}

// Secure makes the writer connect with base's security settings
// (Insecure or TLS) instead of insecurely; call it before the first
// Update.
func (w *Writer) Secure(base client.Options) {
	w.opts.Insecure, w.opts.TLS, w.opts.Certs = base.Insecure, base.TLS, base.Certs
}

// GrapnelOp returns an OpFunc for RunLoad over one Writer per client, and
// the writers (the caller closes them). Client c updates workload
// bench_c<c>. security gives the clients' Insecure or TLS setting.
func GrapnelOp(addrs []string, security client.Options, clients, payload int, timeout time.Duration, configOnly, commanders bool) (OpFunc, []*Writer, error) {
	ws := make([]*Writer, clients)
	for c := range ws {
		w, err := NewWriter(addrs, fmt.Sprintf("bench_c%03d", c), payload, timeout)
		if err != nil {
			return nil, nil, err
		}
		w.Secure(security)
		w.ConfigOnly = configOnly
		w.Commander = commanders
		ws[c] = w
	}
	op := func(ctx context.Context, c, seq int) error { return ws[c].Update(ctx, seq) }
	return op, ws, nil
}

// GrowPayload is the size of what GrowLog writes, as grapnel-bench's
// default payload.
const GrowPayload = 256

// GrowLog writes n updates to the cluster at addrs, one after the other,
// so that each is a log entry of its own: what a drive leaves in the
// replicas' logs. configOnly writes a config item, which changes no
// workload; otherwise a workload's runtimeConfig. timeout bounds each.
func GrowLog(ctx context.Context, addrs []string, n int, configOnly bool, timeout time.Duration) error {
	if n == 0 {
		return nil
	}
	w, err := NewWriter(addrs, "grown", GrowPayload, timeout)
	if err != nil {
		return err
	}
	defer w.Close()
	w.ConfigOnly = configOnly
	for i := range n {
		if err := w.Update(ctx, i+1); err != nil {
			return fmt.Errorf("growing the log, update %d: %w", i+1, err)
		}
	}
	return nil
}
