package clients

import (
	"context"
	"errors"
	"fmt"

	"github.com/grapnel-io/grapnel/rpc"
	"github.com/grapnel-io/grapnel/rpc/ankbase"
	"github.com/grapnel-io/grapnel/rpc/client"
	"github.com/grapnel-io/grapnel/rpc/grpcapi"
	"github.com/grapnel-io/grapnel/rpc/wire"
)

// errStreamEnded means the stream ended while a request waited for its
// answer.
var errStreamEnded = errors.New("stream ended")

// session is one CommandConnection stream to the leader with its reader.
// The client owns it and sends one request at a time, so the reader hands
// over every message on one channel and the client skips answers to
// requests it gave up on.
type session struct {
	st   stream
	msgs chan *grpcapi.FromServer // closed when the stream ends
	err  error                    // why; read only after msgs closed
}

// stream is what a session needs of a stream: a client.Stream to the
// leader, or a directStream to one replica.
type stream interface {
	Send(*grpcapi.ToServer) error
	Recv() (*grpcapi.FromServer, error)
	Close()
	Addr() string
	ReplicaID() string
}

// open opens a commander stream to the leader through r and greets it.
// An error means nothing of a later request was sent.
func open(ctx context.Context, r *client.Resolver) (*session, error) {
	st, err := r.Open(ctx, wire.KindCommand)
	if err != nil {
		return nil, err
	}
	s, err := greet(st)
	if err != nil {
		r.Forget(st.Addr())
	}
	return s, err
}

// greet says CommanderHello on st and starts the session's reader; on an
// error st is closed.
func greet(st stream) (*session, error) {
	hello := &grpcapi.ToServer{ToServerEnum: &grpcapi.ToServer_CommanderHello{
		CommanderHello: &grpcapi.CommanderHello{ProtocolVersion: rpc.ProtocolVersion},
	}}
	if err := st.Send(hello); err != nil {
		st.Close()
		return nil, fmt.Errorf("%w: hello to %s: %v", client.ErrConnectionLost, st.Addr(), err)
	}
	s := &session{st: st, msgs: make(chan *grpcapi.FromServer, 16)}
	go s.read()
	return s, nil
}

func (s *session) read() {
	defer close(s.msgs)
	for {
		m, err := s.st.Recv()
		if err != nil {
			s.err = err
			return
		}
		s.msgs <- m
	}
}

// close ends the stream and waits for the reader.
func (s *session) close() {
	s.st.Close()
	for range s.msgs {
	}
}

// answer is what became of one request.
type answer struct {
	resp *ankbase.Response // nil unless answered
	sent bool              // the request may have reached the server
	err  error             // nil when answered without an error
	// broken means the session must be dropped.
	broken bool
}

// request sends req and waits for its answer until ctx ends.
func (s *session) request(ctx context.Context, req *ankbase.Request) answer {
	req.RequestId = client.NewRequestID()
	msg := &grpcapi.ToServer{ToServerEnum: &grpcapi.ToServer_Request{Request: req}}
	if err := s.st.Send(msg); err != nil {
		// gRPC cannot tell whether a failed Send left the client.
		return answer{sent: true, err: err, broken: true}
	}
	for {
		select {
		case m, ok := <-s.msgs:
			if !ok {
				return answer{sent: true, err: fmt.Errorf("%w: %v", errStreamEnded, s.err), broken: true}
			}
			r := m.GetResponse()
			if r == nil || r.GetRequestId() != req.RequestId {
				continue // a broadcast, or the answer to a request given up on
			}
			if e := r.GetError(); e != nil {
				return answer{resp: r, sent: true, err: &client.ServerError{Message: e.GetMessage()}}
			}
			return answer{resp: r, sent: true}
		case <-ctx.Done():
			return answer{sent: true, err: ctx.Err(), broken: true}
		}
	}
}
