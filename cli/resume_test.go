package cli

import (
	"context"
	"errors"
	"io"
	"strings"
	"sync"
	"testing"

	"github.com/grapnel-io/grapnel/rpc/ankbase"
)

// endingConn is a fakeConn whose stream can end, named for the resume
// notice.
type endingConn struct {
	*fakeConn
	id  string
	mu  sync.Mutex
	err error
}

func (e *endingConn) ReplicaID() string { return e.id }

func (e *endingConn) Err() error {
	e.mu.Lock()
	defer e.mu.Unlock()
	return e.err
}

// end ends the stream: Err says so, then ch closes.
func (e *endingConn) end(ch chan<- *ankbase.Response) {
	e.mu.Lock()
	e.err = errors.New("connection to the server lost: leadership moved")
	e.mu.Unlock()
	close(ch)
}

func (e *endingConn) Close() error { return nil }

func TestLogsFollowResumesWithoutLossOrDouble(t *testing.T) {
	web := inst("web.1111.agent_A")
	for _, tt := range []struct {
		name string
		opts LogsOptions
		// first campaign on r1 (follow), then the one on r2; before is
		// the log read without following (--tail with -f only).
		before, first, second []string
		want                  string
	}{
		{name: "all lines", opts: LogsOptions{Workloads: []string{"web"}, Follow: true, Tail: -1},
			first: []string{"1", "2", "3"}, second: []string{"1", "2", "3", "4", "5"}, want: "1\n2\n3\n4\n5\n"},
		{name: "tail 2", opts: LogsOptions{Workloads: []string{"web"}, Follow: true, Tail: 2},
			before: []string{"1", "2", "3", "4"}, first: []string{"1", "2", "3", "4", "5"},
			second: []string{"1", "2", "3", "4", "5", "6"}, want: "3\n4\n5\n6\n"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			r1 := &endingConn{fakeConn: newFakeConn(), id: "r1"}
			r2 := &endingConn{fakeConn: newFakeConn(), id: "r2"}
			r1.answer = func(req *ankbase.Request) *ankbase.Response { return stateResponse(t, clusterYAML) }
			r1.onSubscribe = func(req *ankbase.Request, ch chan<- *ankbase.Response) {
				ch <- accepted(web)
				if !req.GetLogsRequest().GetFollow() {
					ch <- logEntries(web, tt.before...)
					ch <- logsStop(web)
					return
				}
				if req.GetLogsRequest().Tail != nil {
					t.Errorf("the followed campaign asks for a tail: %v", req)
				}
				ch <- logEntries(web, tt.first...)
				r1.end(ch)
			}
			r2.onSubscribe = func(req *ankbase.Request, ch chan<- *ankbase.Response) {
				if lr := req.GetLogsRequest(); !lr.GetFollow() || lr.Tail != nil {
					t.Errorf("resumed campaign %v: want follow, no tail", lr)
				}
				ch <- accepted(web)
				ch <- logEntries(web, tt.second...)
				ch <- logsStop(web)
			}
			s, out, errOut := session(r1)
			s.Reconnect = func(context.Context) (Conn, error) { return r2, nil }
			if err := s.Logs(context.Background(), tt.opts); err != nil {
				t.Fatal(err)
			}
			if out.String() != tt.want {
				t.Fatalf("output %q, want %q", out.String(), tt.want)
			}
			if errOut.String() != "leader changed: r1 -> r2; resumed\n" {
				t.Fatalf("stderr %q", errOut.String())
			}
		})
	}
}

func TestLogsWithoutReconnectEndsWithTheStream(t *testing.T) {
	web := inst("web.1111.agent_A")
	r1 := &endingConn{fakeConn: newFakeConn(), id: "r1"}
	r1.answer = func(req *ankbase.Request) *ankbase.Response { return stateResponse(t, clusterYAML) }
	r1.onSubscribe = func(req *ankbase.Request, ch chan<- *ankbase.Response) {
		ch <- accepted(web)
		r1.end(ch)
	}
	s, _, _ := session(r1)
	if err := s.Logs(context.Background(), LogsOptions{Workloads: []string{"web"}, Follow: true, Tail: -1}); err == nil {
		t.Fatal("logs -f without a way to reconnect ended without an error")
	}
}

func TestEventsResumeWithoutRepeating(t *testing.T) {
	r1 := &endingConn{fakeConn: newFakeConn(), id: "r1"}
	r2 := &endingConn{fakeConn: newFakeConn(), id: "r2"}
	ctx, interrupt := context.WithCancel(context.Background())
	event := func(path string) *ankbase.Response {
		return &ankbase.Response{ResponseContent: &ankbase.Response_CompleteStateResponse{CompleteStateResponse: &ankbase.CompleteStateResponse{
			CompleteState: &ankbase.CompleteState{}, AlteredFields: &ankbase.AlteredFields{AddedFields: []string{path}}}}}
	}
	r1.onSubscribe = func(req *ankbase.Request, ch chan<- *ankbase.Response) {
		ch <- stateResponse(t, clusterYAML)
		ch <- event("desiredState.workloads.a")
		r1.end(ch)
	}
	r2.answer = func(req *ankbase.Request) *ankbase.Response { return &ankbase.Response{} }
	r2.onSubscribe = func(req *ankbase.Request, ch chan<- *ankbase.Response) {
		ch <- stateResponse(t, clusterYAML) // the state now: not an event
		ch <- event("desiredState.workloads.b")
	}
	s, out, errOut := session(r1)
	s.Out = interruptAt{w: out, at: "desiredState.workloads.b", interrupt: interrupt}
	s.Reconnect = func(context.Context) (Conn, error) { return r2, nil }
	if err := s.GetEvents(ctx, nil, FormatJSON, false); err != nil {
		t.Fatal(err)
	}
	want := "desiredState.workloads.a" + "desiredState.workloads.b"
	got := ""
	for _, p := range []string{"desiredState.workloads.a", "desiredState.workloads.b"} {
		if n := countSubstr(out.String(), p); n == 1 {
			got += p
		}
	}
	if got != want || countSubstr(out.String(), "\n") != 2 {
		t.Fatalf("events printed:\n%s", out.String())
	}
	if errOut.String() != "leader changed: r1 -> r2; resumed\n" {
		t.Fatalf("stderr %q", errOut.String())
	}
}

// interruptAt is Ctrl-C once the output shows at.
type interruptAt struct {
	w         io.Writer
	at        string
	interrupt func()
}

func (i interruptAt) Write(p []byte) (int, error) {
	n, err := i.w.Write(p)
	if strings.Contains(string(p), i.at) {
		i.interrupt()
	}
	return n, err
}

func countSubstr(s, sub string) int {
	n := 0
	for i := 0; i+len(sub) <= len(s); i++ {
		if s[i:i+len(sub)] == sub {
			n++
		}
	}
	return n
}
