package clients

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"strings"
	"time"

	"github.com/grapnel-io/grapnel/chaos/history"
	"github.com/grapnel-io/grapnel/rpc"
	"github.com/grapnel-io/grapnel/rpc/ankbase"
	"github.com/grapnel-io/grapnel/rpc/client"
	"github.com/grapnel-io/grapnel/state"
)

// ErrUnexpectedResponse means the server answered with something that
// does not answer the request.
var ErrUnexpectedResponse = errors.New("unexpected response")

// Runtime is the runtime of the written workloads.
const Runtime = "process"

// openPause spaces out attempts to open a stream that failed at once, so
// a cluster that refuses every stream is not hammered.
const openPause = 50 * time.Millisecond

// worker is one client: its Resolver, its stream, its choices.
type worker struct {
	id  int
	cfg Config
	rec *history.Recorder
	res *client.Resolver
	// direct is the one replica a Direct client talks to; nil otherwise.
	direct *direct
	rng    *rand.Rand
	seq    int64
	s      *session // nil until opened, and after it broke
}

func (w *worker) run(ctx context.Context) {
	defer w.drop()
	var next time.Time
	for ctx.Err() == nil {
		if w.cfg.Rate > 0 {
			if d := time.Until(next); d > 0 {
				t := time.NewTimer(d)
				select {
				case <-ctx.Done():
					t.Stop()
					return
				case <-t.C:
				}
			}
			next = time.Now().Add(time.Duration(float64(time.Second) / w.cfg.Rate))
		}
		w.step(ctx)
	}
}

// drop ends the stream, if any, and forgets its replica as the leader.
func (w *worker) drop() {
	if w.s != nil {
		if w.res != nil {
			w.res.Forget(w.s.st.Addr())
		}
		w.s.close()
		w.s = nil
	}
}

// close releases the worker's connections.
func (w *worker) close() {
	if w.res != nil {
		w.res.Close()
	}
	if w.direct != nil {
		w.direct.close()
	}
}

// open opens the worker's stream: at the leader, or at its own replica
// for a Direct client.
func (w *worker) open(ctx context.Context) (*session, error) {
	if w.direct != nil {
		return w.direct.open(ctx)
	}
	return open(ctx, w.res)
}

// choose picks the next operation.
func (w *worker) choose() (history.Kind, string) {
	key := w.cfg.Keys[w.rng.IntN(len(w.cfg.Keys))]
	switch p := w.rng.Float64(); {
	case p < w.cfg.ReadShare:
		return history.Read, ""
	case p < w.cfg.ReadShare+w.cfg.DeleteShare:
		return history.Delete, key
	}
	return history.Write, key
}

// step runs one operation and records it.
func (w *worker) step(ctx context.Context) {
	kind, key := w.choose()
	var value string
	if kind == history.Write {
		w.seq++
		value = Value(w.id, w.seq)
	}
	req := w.request(kind, key, value)
	id := w.rec.Begin(w.id, kind, key, value)
	octx, cancel := context.WithTimeout(ctx, w.cfg.timeout())
	defer cancel()
	if w.s == nil {
		s, err := w.open(octx)
		if err != nil {
			// Nothing was sent: the operation certainly did not happen.
			w.rec.End(id, history.Fail, nil, "", err.Error())
			pause(ctx, openPause)
			return
		}
		w.s = s
	}
	replica := w.s.st.ReplicaID()
	a := w.s.request(octx, req)
	if a.broken {
		w.drop()
	}
	outcome, read, err := w.judge(kind, a)
	msg := ""
	if err != nil {
		msg = err.Error()
	}
	w.rec.End(id, outcome, read, replica, msg)
	if outcome == history.OK && kind != history.Read && w.cfg.Acks != nil {
		w.cfg.Acks.Add(time.Now())
	}
}

// judge turns an answer into the outcome the client can prove.
func (w *worker) judge(kind history.Kind, a answer) (history.Outcome, map[string]string, error) {
	var se *client.ServerError
	switch {
	case a.err == nil:
	case errors.As(a.err, &se) && kind == history.Read:
		return history.Fail, nil, a.err
	case errors.As(a.err, &se) && strings.HasPrefix(se.Message, "Update rejected"):
		// Refused while planning, before anything was proposed.
		return history.Fail, nil, a.err
	case !a.sent:
		return history.Fail, nil, a.err
	default:
		// A timeout, a broken stream, or "Update failed" from a leader
		// that lost its leadership with the entry in Raft.
		return history.Unknown, nil, a.err
	}
	if kind != history.Read {
		if a.resp.GetUpdateStateSuccess() == nil {
			return history.Unknown, nil, fmt.Errorf("%w to UpdateState: %v", ErrUnexpectedResponse, a.resp)
		}
		return history.OK, nil, nil
	}
	cs := a.resp.GetCompleteStateResponse()
	if cs == nil {
		return history.Fail, nil, fmt.Errorf("%w to CompleteStateRequest: %v", ErrUnexpectedResponse, a.resp)
	}
	read := map[string]string{}
	for name, wl := range cs.GetCompleteState().GetDesiredState().GetWorkloads().GetWorkloads() {
		v, err := ParseValue(wl.GetRuntimeConfig())
		if err != nil {
			// Not written by a client: keep it visible, so a checker
			// sees a value no write produced.
			v = "unparsable: " + wl.GetRuntimeConfig()
		}
		read[name] = v
	}
	return history.OK, read, nil
}

// request builds the request of one operation.
func (w *worker) request(kind history.Kind, key, value string) *ankbase.Request {
	if kind == history.Read {
		masks := make([]string, len(w.cfg.Keys))
		for i, k := range w.cfg.Keys {
			masks[i] = "desiredState.workloads." + k
		}
		return &ankbase.Request{RequestContent: &ankbase.Request_CompleteStateRequest{
			CompleteStateRequest: &ankbase.CompleteStateRequest{FieldMask: masks},
		}}
	}
	cs := state.CompleteState{DesiredState: state.State{APIVersion: state.APIVersion}}
	if kind == history.Write {
		cs.DesiredState.Workloads = map[string]*state.Workload{key: {
			Agent: w.cfg.Agent, Runtime: Runtime, RestartPolicy: state.RestartNever,
			RuntimeConfig: RuntimeConfig(value),
		}}
	}
	return &ankbase.Request{RequestContent: &ankbase.Request_UpdateStateRequest{UpdateStateRequest: &ankbase.UpdateStateRequest{
		NewState:   rpc.CompleteStateToProto(&cs),
		UpdateMask: []string{"desiredState.workloads." + key},
	}}}
}

// pause waits d or until ctx ends.
func pause(ctx context.Context, d time.Duration) {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
	case <-t.C:
	}
}
