package client

import (
	"context"
	"crypto/rand"
	"fmt"

	"github.com/grapnel-io/grapnel/internal/clock"
	"github.com/grapnel-io/grapnel/rpc/ankbase"
	"github.com/grapnel-io/grapnel/rpc/grpcapi"
)

type waitResult struct {
	resp *ankbase.Response
	err  error
}

// waiter is a request waiting for its answer. It takes only the response
// kinds that answer its request kind, so a LogsCancelRequest sent with the
// id of a running log campaign gets the LogsCancelAccepted while the log
// entries still in flight keep going to the campaign's subscription.
type waiter struct {
	accepts func(*ankbase.Response) bool
	ch      chan waitResult // capacity 1; written once
}

// answers returns the test for the responses that answer req.
func answers(req *ankbase.Request) func(*ankbase.Response) bool {
	return func(r *ankbase.Response) bool {
		if r.GetError() != nil {
			return true
		}
		switch req.GetRequestContent().(type) {
		case *ankbase.Request_UpdateStateRequest:
			return r.GetUpdateStateSuccess() != nil
		case *ankbase.Request_CompleteStateRequest:
			return r.GetCompleteStateResponse() != nil
		case *ankbase.Request_LogsRequest:
			return r.GetLogsRequestAccepted() != nil
		case *ankbase.Request_LogsCancelRequest:
			return r.GetLogsCancelAccepted() != nil
		case *ankbase.Request_EventsCancelRequest:
			return r.GetEventsCancelAccepted() != nil
		}
		return true
	}
}

// NewRequestID returns a random UUID (version 4) in its text form, as the
// ank CLI uses for request ids.
func NewRequestID() string {
	var b [16]byte
	_, _ = rand.Read(b[:])
	b[6] = b[6]&0x0f | 0x40
	b[8] = b[8]&0x3f | 0x80
	return fmt.Sprintf("%x-%x-%x-%x-%x", b[0:4], b[4:6], b[6:8], b[8:10], b[10:16])
}

// Request sends req and waits for the response with its id. An empty
// req.RequestId gets a fresh one; a set one is kept, which is how a cancel
// request reaches the campaign or subscription it ends. A Response{error}
// becomes a *ServerError with the server's message. The wait is bounded by
// ctx and by the response timeout.
func (c *Conn) Request(ctx context.Context, req *ankbase.Request) (*ankbase.Response, error) {
	if req.RequestId == "" {
		req.RequestId = NewRequestID()
	}
	id := req.RequestId
	w := &waiter{accepts: answers(req), ch: make(chan waitResult, 1)}
	c.mu.Lock()
	if c.err != nil {
		err := c.err
		c.mu.Unlock()
		return nil, err
	}
	c.waiters[id] = w
	c.mu.Unlock()
	forget := func() {
		c.mu.Lock()
		if c.waiters[id] == w {
			delete(c.waiters, id)
		}
		c.mu.Unlock()
	}
	if err := c.send(&grpcapi.ToServer{ToServerEnum: &grpcapi.ToServer_Request{Request: req}}); err != nil {
		forget()
		return nil, err
	}
	timer := clock.NewTimer(c.clock, c.timeout)
	defer timer.Stop()
	select {
	case r := <-w.ch:
		if r.err != nil {
			return nil, r.err
		}
		if e := r.resp.GetError(); e != nil {
			return nil, &ServerError{Message: e.GetMessage()}
		}
		return r.resp, nil
	case <-ctx.Done():
		forget()
		return nil, ctx.Err()
	case <-timer.C:
		forget()
		return nil, fmt.Errorf("%w within %v", ErrTimeout, c.timeout)
	}
}

// Subscribe sends req and returns every response with its id, in order,
// for requests answered more than once: a CompleteStateRequest with
// subscribeForEvents, a LogsRequest. An empty req.RequestId gets a fresh
// one, left in req so the caller can cancel with the same id. The channel
// closes when cancel is called, when ctx ends, or when the stream ends
// (then Err says why). cancel only stops delivery; ending the server side
// takes an EventsCancelRequest or LogsCancelRequest.
func (c *Conn) Subscribe(ctx context.Context, req *ankbase.Request) (<-chan *ankbase.Response, func(), error) {
	if req.RequestId == "" {
		req.RequestId = NewRequestID()
	}
	id := req.RequestId
	q := newQueue[*ankbase.Response]()
	c.mu.Lock()
	if c.err != nil {
		err := c.err
		c.mu.Unlock()
		q.stop()
		return nil, nil, err
	}
	c.subs[id] = q
	c.mu.Unlock()
	cancel := func() {
		c.mu.Lock()
		if c.subs[id] == q {
			delete(c.subs, id)
		}
		c.mu.Unlock()
		q.stop()
	}
	if err := c.send(&grpcapi.ToServer{ToServerEnum: &grpcapi.ToServer_Request{Request: req}}); err != nil {
		cancel()
		return nil, nil, err
	}
	stop := context.AfterFunc(ctx, cancel)
	return q.out, func() { stop(); cancel() }, nil
}

// WorkloadStates returns the server's unsolicited workload-state
// broadcasts, each as the list one UpdateWorkloadState carried. Buffering
// starts with the first call (earlier broadcasts are not kept), so call it
// before sending the request whose effects you want to watch. Every call
// returns the same channel; it closes when the stream ends.
func (c *Conn) WorkloadStates() <-chan []*ankbase.WorkloadState {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.states == nil {
		c.states = newQueue[[]*ankbase.WorkloadState]()
		if c.err != nil {
			c.states.end()
		}
	}
	return c.states.out
}
