package client

import (
	"context"
	"errors"
	"fmt"
	"net"
	"strings"
	"sync"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/grapnel-io/grapnel/internal/errs"
	"github.com/grapnel-io/grapnel/rpc"
	"github.com/grapnel-io/grapnel/rpc/ankbase"
	"github.com/grapnel-io/grapnel/rpc/grpcapi"
)

// stub is a CLI-stream server driven by the test: handle gets every
// stream after the hello has been read and checked.
type stub struct {
	grpcapi.UnimplementedCliConnectionServer
	handle func(s grpcapi.CliConnection_ConnectCliServer) error

	mu     sync.Mutex
	hellos []*grpcapi.CommanderHello
}

func (st *stub) ConnectCli(s grpcapi.CliConnection_ConnectCliServer) error {
	first, err := s.Recv()
	if err != nil {
		return err
	}
	h := first.GetCommanderHello()
	if h == nil {
		return status.Error(codes.InvalidArgument, "No CommanderHello received.")
	}
	st.mu.Lock()
	st.hellos = append(st.hellos, h)
	st.mu.Unlock()
	return st.handle(s)
}

// serve starts st on a loopback port and returns its address.
func serve(t *testing.T, st *stub) string {
	t.Helper()
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv := grpc.NewServer()
	grpcapi.RegisterCliConnectionServer(srv, st)
	go srv.Serve(lis)
	t.Cleanup(srv.Stop)
	return lis.Addr().String()
}

// closedAddr is a loopback address nobody listens on.
func closedAddr(t *testing.T) string {
	t.Helper()
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := lis.Addr().String()
	lis.Close()
	return addr
}

func dial(t *testing.T, addrs ...string) *Conn {
	t.Helper()
	c, err := Dial(context.Background(), Options{Addrs: addrs, Insecure: true, ResponseTimeout: 2 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return c
}

func respond(s grpcapi.CliConnection_ConnectCliServer, r *ankbase.Response) error {
	return s.Send(&grpcapi.FromServer{FromServerEnum: &grpcapi.FromServer_Response{Response: r}})
}

func completeStateReq() *ankbase.Request {
	return &ankbase.Request{RequestContent: &ankbase.Request_CompleteStateRequest{CompleteStateRequest: &ankbase.CompleteStateRequest{}}}
}

// answerer answers every CompleteStateRequest with a state whose
// apiVersion is the request id, so a test can tell answers apart; it
// answers in reverse order of arrival once n requests are in.
func answerer(n int) func(s grpcapi.CliConnection_ConnectCliServer) error {
	return func(s grpcapi.CliConnection_ConnectCliServer) error {
		var ids []string
		for len(ids) < n {
			m, err := s.Recv()
			if err != nil {
				return err
			}
			ids = append(ids, m.GetRequest().GetRequestId())
		}
		for i := len(ids) - 1; i >= 0; i-- {
			if err := respond(s, &ankbase.Response{RequestId: ids[i], ResponseContent: &ankbase.Response_CompleteStateResponse{
				CompleteStateResponse: &ankbase.CompleteStateResponse{CompleteState: &ankbase.CompleteState{DesiredState: &ankbase.State{ApiVersion: ids[i]}}},
			}}); err != nil {
				return err
			}
		}
		<-s.Context().Done()
		return nil
	}
}

func TestDialSendsCommanderHelloWithProtocolVersion(t *testing.T) {
	st := &stub{handle: func(s grpcapi.CliConnection_ConnectCliServer) error { <-s.Context().Done(); return nil }}
	c := dial(t, serve(t, st))
	c.Close()
	st.mu.Lock()
	defer st.mu.Unlock()
	if len(st.hellos) != 1 || st.hellos[0].GetProtocolVersion() != rpc.ProtocolVersion {
		t.Fatalf("hellos = %v, want one with protocol version %s", st.hellos, rpc.ProtocolVersion)
	}
}

func TestRequestMatchesResponsesByID(t *testing.T) {
	const n = 5
	c := dial(t, serve(t, &stub{handle: answerer(n)}))
	var wg sync.WaitGroup
	errs := make(chan error, n)
	for i := 0; i < n; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			req := completeStateReq()
			resp, err := c.Request(context.Background(), req)
			if err != nil {
				errs <- err
				return
			}
			if got := resp.GetCompleteStateResponse().GetCompleteState().GetDesiredState().GetApiVersion(); got != req.RequestId {
				errs <- errors.New("request " + req.RequestId + " got the answer of " + got)
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
}

func TestRequestResults(t *testing.T) {
	tests := []struct {
		name    string
		answer  func(id string) *ankbase.Response // nil: never answer
		wantErr error
		wantMsg string
	}{
		{
			name: "error response carries the server's message",
			answer: func(id string) *ankbase.Response {
				return &ankbase.Response{RequestId: id, ResponseContent: &ankbase.Response_Error{Error: &ankbase.Error{Message: "Unsupported API version. Received 'v9', expected 'v1'"}}}
			},
			wantMsg: "Unsupported API version. Received 'v9', expected 'v1'",
		},
		{
			name:    "no answer times out",
			answer:  nil,
			wantErr: ErrTimeout,
		},
		{
			name: "answer with another id is not taken",
			answer: func(id string) *ankbase.Response {
				return &ankbase.Response{RequestId: "other", ResponseContent: &ankbase.Response_UpdateStateSuccess{UpdateStateSuccess: &ankbase.UpdateStateSuccess{}}}
			},
			wantErr: ErrTimeout,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			addr := serve(t, &stub{handle: func(s grpcapi.CliConnection_ConnectCliServer) error {
				m, err := s.Recv()
				if err != nil {
					return err
				}
				if tt.answer != nil {
					if err := respond(s, tt.answer(m.GetRequest().GetRequestId())); err != nil {
						return err
					}
				}
				<-s.Context().Done()
				return nil
			}})
			c, err := Dial(context.Background(), Options{Addrs: []string{addr}, Insecure: true, ResponseTimeout: 300 * time.Millisecond})
			if err != nil {
				t.Fatal(err)
			}
			defer c.Close()
			_, err = c.Request(context.Background(), &ankbase.Request{RequestContent: &ankbase.Request_UpdateStateRequest{UpdateStateRequest: &ankbase.UpdateStateRequest{}}})
			if tt.wantErr != nil && !errors.Is(err, tt.wantErr) {
				t.Fatalf("err = %v, want %v", err, tt.wantErr)
			}
			if tt.wantMsg != "" {
				var se *ServerError
				if !errors.As(err, &se) || se.Message != tt.wantMsg {
					t.Fatalf("err = %v, want a ServerError %q", err, tt.wantMsg)
				}
			}
		})
	}
}

func TestStreamErrorFailsPendingRequest(t *testing.T) {
	tests := []struct {
		name    string
		status  error
		wantErr error
		wantMsg string
	}{
		{"protocol version", status.Error(codes.FailedPrecondition, "Unsupported protocol version '0.9.0'. Currently supported '1'"), ErrRejected, "Unsupported protocol version '0.9.0'"},
		{"credentials", status.Error(codes.Unauthenticated, "agent name not in certificate"), ErrRejected, "credentials not accepted"},
		{"role lacks the right", rpc.ToStatus(fmt.Errorf("%w: agent 'agent_A' may not ConnectCli: reading the state needs the operator or commander role", errs.ErrPermissionDenied)),
			ErrRejected, "connection: permission denied: agent 'agent_A' may not ConnectCli"},
		{"server gone", status.Error(codes.Unavailable, "shutting down"), ErrConnectionLost, "shutting down"},
		{"clean end", nil, ErrConnectionLost, "closed the stream"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := dial(t, serve(t, &stub{handle: func(s grpcapi.CliConnection_ConnectCliServer) error {
				if _, err := s.Recv(); err != nil {
					return err
				}
				return tt.status
			}}))
			_, err := c.Request(context.Background(), completeStateReq())
			if !errors.Is(err, tt.wantErr) || !strings.Contains(err.Error(), tt.wantMsg) {
				t.Fatalf("err = %v, want %v containing %q", err, tt.wantErr, tt.wantMsg)
			}
			if !errors.Is(c.Err(), tt.wantErr) {
				t.Fatalf("Err() = %v, want %v", c.Err(), tt.wantErr)
			}
			if _, err := c.Request(context.Background(), completeStateReq()); !errors.Is(err, tt.wantErr) {
				t.Fatalf("request after the end: err = %v, want %v", err, tt.wantErr)
			}
		})
	}
}

func TestDialTriesAddressesInOrder(t *testing.T) {
	up := serve(t, &stub{handle: answerer(1)})
	down1, down2 := closedAddr(t), closedAddr(t)

	c := dial(t, down1, up)
	if c.Addr() != up {
		t.Fatalf("connected to %s, want %s", c.Addr(), up)
	}
	if _, err := c.Request(context.Background(), completeStateReq()); err != nil {
		t.Fatal(err)
	}

	_, err := Dial(context.Background(), Options{Addrs: []string{down1, down2}, Insecure: true, ResponseTimeout: time.Second})
	if !errors.Is(err, ErrNoServer) || !strings.Contains(err.Error(), down1) || !strings.Contains(err.Error(), down2) {
		t.Fatalf("err = %v, want ErrNoServer naming %s and %s", err, down1, down2)
	}
}

func TestDialNeedsAnAddress(t *testing.T) {
	if _, err := Dial(context.Background(), Options{Insecure: true}); !errors.Is(err, ErrNoServer) {
		t.Fatalf("err = %v, want ErrNoServer", err)
	}
}

// TestSubscribeAndCancel runs a log campaign: the subscription gets the
// acceptance and the entries, and a cancel request with the same id gets
// its LogsCancelAccepted although entries of the campaign keep coming.
func TestSubscribeAndCancel(t *testing.T) {
	entry := func(id, msg string) *ankbase.Response {
		return &ankbase.Response{RequestId: id, ResponseContent: &ankbase.Response_LogEntriesResponse{LogEntriesResponse: &ankbase.LogEntriesResponse{
			LogEntries: []*ankbase.LogEntry{{Message: msg}},
		}}}
	}
	c := dial(t, serve(t, &stub{handle: func(s grpcapi.CliConnection_ConnectCliServer) error {
		m, err := s.Recv()
		if err != nil {
			return err
		}
		id := m.GetRequest().GetRequestId()
		_ = respond(s, &ankbase.Response{RequestId: id, ResponseContent: &ankbase.Response_LogsRequestAccepted{LogsRequestAccepted: &ankbase.LogsRequestAccepted{}}})
		_ = respond(s, entry(id, "one"))
		_ = respond(s, entry(id, "two"))
		m, err = s.Recv()
		if err != nil {
			return err
		}
		if m.GetRequest().GetLogsCancelRequest() == nil || m.GetRequest().GetRequestId() != id {
			return status.Error(codes.InvalidArgument, "expected the cancel with the campaign's id")
		}
		_ = respond(s, entry(id, "late"))
		_ = respond(s, &ankbase.Response{RequestId: id, ResponseContent: &ankbase.Response_LogsCancelAccepted{LogsCancelAccepted: &ankbase.LogsCancelAccepted{}}})
		<-s.Context().Done()
		return nil
	}}))
	req := &ankbase.Request{RequestContent: &ankbase.Request_LogsRequest{LogsRequest: &ankbase.LogsRequest{}}}
	ch, cancel, err := c.Subscribe(context.Background(), req)
	if err != nil {
		t.Fatal(err)
	}
	defer cancel()
	if req.RequestId == "" {
		t.Fatal("Subscribe left the request id empty")
	}
	var got []string
	for len(got) < 3 {
		r := <-ch
		switch {
		case r.GetLogsRequestAccepted() != nil:
			got = append(got, "accepted")
		case r.GetLogEntriesResponse() != nil:
			got = append(got, r.GetLogEntriesResponse().GetLogEntries()[0].GetMessage())
		}
	}
	resp, err := c.Request(context.Background(), &ankbase.Request{RequestId: req.RequestId, RequestContent: &ankbase.Request_LogsCancelRequest{LogsCancelRequest: &ankbase.LogsCancelRequest{}}})
	if err != nil || resp.GetLogsCancelAccepted() == nil {
		t.Fatalf("cancel: %v, %v", resp, err)
	}
	if r := <-ch; r.GetLogEntriesResponse().GetLogEntries()[0].GetMessage() != "late" {
		t.Fatalf("the late entry went elsewhere: %v", r)
	}
	got = append(got, "late")
	want := "accepted one two late"
	if strings.Join(got, " ") != want {
		t.Fatalf("got %q, want %q", got, want)
	}
	cancel()
	if _, ok := <-ch; ok {
		t.Fatal("channel still open after cancel")
	}
}

func TestSubscriptionEndsWithStream(t *testing.T) {
	c := dial(t, serve(t, &stub{handle: func(s grpcapi.CliConnection_ConnectCliServer) error {
		m, err := s.Recv()
		if err != nil {
			return err
		}
		_ = respond(s, &ankbase.Response{RequestId: m.GetRequest().GetRequestId(), ResponseContent: &ankbase.Response_CompleteStateResponse{CompleteStateResponse: &ankbase.CompleteStateResponse{}}})
		return status.Error(codes.Unavailable, "leader lost")
	}}))
	ch, cancel, err := c.Subscribe(context.Background(), &ankbase.Request{RequestContent: &ankbase.Request_CompleteStateRequest{
		CompleteStateRequest: &ankbase.CompleteStateRequest{SubscribeForEvents: true},
	}})
	if err != nil {
		t.Fatal(err)
	}
	defer cancel()
	n := 0
	for range ch {
		n++
	}
	if n != 1 {
		t.Fatalf("got %d responses before the end, want 1 (queued responses are delivered)", n)
	}
	if !errors.Is(c.Err(), ErrConnectionLost) || !strings.Contains(c.Err().Error(), "leader lost") {
		t.Fatalf("Err() = %v", c.Err())
	}
}

func TestSubscriptionEndsWithContext(t *testing.T) {
	c := dial(t, serve(t, &stub{handle: func(s grpcapi.CliConnection_ConnectCliServer) error { <-s.Context().Done(); return nil }}))
	ctx, cancelCtx := context.WithCancel(context.Background())
	ch, cancel, err := c.Subscribe(ctx, completeStateReq())
	if err != nil {
		t.Fatal(err)
	}
	defer cancel()
	cancelCtx()
	select {
	case _, ok := <-ch:
		if ok {
			t.Fatal("unexpected response")
		}
	case <-time.After(2 * time.Second):
		t.Fatal("channel not closed after the context ended")
	}
}

func TestWorkloadStateBroadcasts(t *testing.T) {
	broadcast := func(s grpcapi.CliConnection_ConnectCliServer, wl string) error {
		return s.Send(&grpcapi.FromServer{FromServerEnum: &grpcapi.FromServer_UpdateWorkloadState{UpdateWorkloadState: &grpcapi.UpdateWorkloadState{
			WorkloadStates: []*ankbase.WorkloadState{{InstanceName: &ankbase.WorkloadInstanceName{WorkloadName: wl}}},
		}}})
	}
	c := dial(t, serve(t, &stub{handle: func(s grpcapi.CliConnection_ConnectCliServer) error {
		// Before anyone listens: dropped.
		_ = broadcast(s, "early")
		m, err := s.Recv()
		if err != nil {
			return err
		}
		_ = respond(s, &ankbase.Response{RequestId: m.GetRequest().GetRequestId(), ResponseContent: &ankbase.Response_CompleteStateResponse{CompleteStateResponse: &ankbase.CompleteStateResponse{}}})
		// The client listens by now: kept, in order.
		if _, err := s.Recv(); err != nil {
			return err
		}
		_ = broadcast(s, "a")
		_ = broadcast(s, "b")
		// Agents' business: ignored.
		_ = s.Send(&grpcapi.FromServer{FromServerEnum: &grpcapi.FromServer_LogsCancelRequest{LogsCancelRequest: &grpcapi.LogsCancelRequest{RequestId: "x"}}})
		_ = broadcast(s, "c")
		<-s.Context().Done()
		return nil
	}}))
	if _, err := c.Request(context.Background(), completeStateReq()); err != nil {
		t.Fatal(err)
	}
	states := c.WorkloadStates()
	if c.WorkloadStates() != states {
		t.Fatal("WorkloadStates returned a second channel")
	}
	// Tell the server we listen: a request it reads but never answers.
	go c.Request(context.Background(), completeStateReq())
	var got []string
	for len(got) < 3 {
		ws := <-states
		got = append(got, ws[0].GetInstanceName().GetWorkloadName())
	}
	if strings.Join(got, "") != "abc" {
		t.Fatalf("broadcasts = %v, want a b c", got)
	}
}

func TestCloseSendsGoodbyeAndFailsRequests(t *testing.T) {
	goodbye := make(chan bool, 1)
	c := dial(t, serve(t, &stub{handle: func(s grpcapi.CliConnection_ConnectCliServer) error {
		for {
			m, err := s.Recv()
			if err != nil {
				goodbye <- false
				return nil
			}
			if m.GetGoodbye() != nil {
				goodbye <- true
				return nil
			}
		}
	}}))
	if err := c.Close(); err != nil {
		t.Fatal(err)
	}
	if !<-goodbye {
		t.Fatal("server saw no Goodbye")
	}
	if _, err := c.Request(context.Background(), completeStateReq()); !errors.Is(err, ErrClosed) {
		t.Fatalf("request after Close: %v, want ErrClosed", err)
	}
	if err := c.Close(); err != nil {
		t.Fatalf("second Close: %v", err)
	}
}

func TestNewRequestIDIsAUUID(t *testing.T) {
	seen := map[string]bool{}
	for i := 0; i < 100; i++ {
		id := NewRequestID()
		if len(id) != 36 || id[14] != '4' || strings.Count(id, "-") != 4 || seen[id] {
			t.Fatalf("bad or repeated id %q", id)
		}
		seen[id] = true
	}
}

func TestQueueDeliversBacklogThenCloses(t *testing.T) {
	q := newQueue[int]()
	for i := 0; i < 1000; i++ {
		q.push(i)
	}
	q.end()
	q.push(-1) // after end: dropped
	n := 0
	for v := range q.out {
		if v != n {
			t.Fatalf("got %d at position %d", v, n)
		}
		n++
	}
	if n != 1000 {
		t.Fatalf("delivered %d, want 1000", n)
	}
}
