package cli

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/grapnel-io/grapnel/internal/clock"
	"github.com/grapnel-io/grapnel/internal/syncbuf"
	"github.com/grapnel-io/grapnel/internal/testwait"
	"github.com/grapnel-io/grapnel/rpc"
	"github.com/grapnel-io/grapnel/rpc/ankbase"
	"github.com/grapnel-io/grapnel/rpc/client"
	"github.com/grapnel-io/grapnel/state"
)

// fakeConn is a scripted server behind the Conn interface: answer gives
// the response to each Request, onSubscribe feeds a new subscription, and
// the test pushes broadcasts on states.
type fakeConn struct {
	answer      func(req *ankbase.Request) *ankbase.Response
	onSubscribe func(req *ankbase.Request, ch chan<- *ankbase.Response)
	states      chan []*ankbase.WorkloadState

	mu       sync.Mutex
	requests []*ankbase.Request
}

func newFakeConn() *fakeConn {
	return &fakeConn{states: make(chan []*ankbase.WorkloadState, 16)}
}

func (f *fakeConn) Request(ctx context.Context, req *ankbase.Request) (*ankbase.Response, error) {
	if req.RequestId == "" {
		req.RequestId = client.NewRequestID()
	}
	f.mu.Lock()
	f.requests = append(f.requests, req)
	f.mu.Unlock()
	var resp *ankbase.Response
	if f.answer != nil {
		resp = f.answer(req)
	}
	if resp == nil {
		return nil, fmt.Errorf("fake: no answer to %T", req.GetRequestContent())
	}
	if e := resp.GetError(); e != nil {
		return nil, &client.ServerError{Message: e.GetMessage()}
	}
	return resp, nil
}

func (f *fakeConn) Subscribe(ctx context.Context, req *ankbase.Request) (<-chan *ankbase.Response, func(), error) {
	if req.RequestId == "" {
		req.RequestId = client.NewRequestID()
	}
	f.mu.Lock()
	f.requests = append(f.requests, req)
	f.mu.Unlock()
	ch := make(chan *ankbase.Response, 64)
	if f.onSubscribe != nil {
		go f.onSubscribe(req, ch)
	}
	return ch, func() {}, nil
}

func (f *fakeConn) WorkloadStates() <-chan []*ankbase.WorkloadState { return f.states }

func (f *fakeConn) Err() error { return nil }

// kinds lists the kinds of the requests sent so far.
func (f *fakeConn) kinds() []string {
	f.mu.Lock()
	defer f.mu.Unlock()
	var out []string
	for _, r := range f.requests {
		out = append(out, strings.TrimPrefix(fmt.Sprintf("%T", r.GetRequestContent()), "*ankbase.Request_"))
	}
	return out
}

func (f *fakeConn) last(kind string) *ankbase.Request {
	f.mu.Lock()
	defer f.mu.Unlock()
	for i := len(f.requests) - 1; i >= 0; i-- {
		if strings.HasSuffix(fmt.Sprintf("%T", f.requests[i].GetRequestContent()), kind) {
			return f.requests[i]
		}
	}
	return nil
}

func session(c Conn) (*Session, *bytes.Buffer, *bytes.Buffer) {
	var out, errOut bytes.Buffer
	return &Session{Conn: c, Out: &out, Err: &errOut, Timeout: time.Second, Tick: time.Millisecond}, &out, &errOut
}

// liveSession is session with an output the test may read while the
// session writes it.
func liveSession(c Conn) (*Session, *syncbuf.Buffer) {
	s, _, _ := session(c)
	out := &syncbuf.Buffer{}
	s.Out = out
	return s, out
}

func stateResponse(t *testing.T, y string) *ankbase.Response {
	t.Helper()
	cs, err := rpc.CompleteStateFromTree(tree(t, y))
	if err != nil {
		t.Fatal(err)
	}
	return &ankbase.Response{ResponseContent: &ankbase.Response_CompleteStateResponse{CompleteStateResponse: &ankbase.CompleteStateResponse{CompleteState: cs}}}
}

func broadcast(t *testing.T, ws ...state.WorkloadState) []*ankbase.WorkloadState {
	t.Helper()
	return rpc.WorkloadStatesToProto(ws)
}

func writeFile(t *testing.T, name, content string) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), name)
	if err := os.WriteFile(p, []byte(content), 0o600); err != nil {
		t.Fatal(err)
	}
	return p
}

// TestApplyWaitsForWorkloads drives apply through a scripted server: the
// state before, the update, the state after, then broadcasts until the
// added instance runs.
// swdd~cli-requests-update-state-with-watch~2
// swdd~cli-requests-update-state-with-watch-success~1
func TestApplyWaitsForWorkloads(t *testing.T) {
	const added = "web.new.agent_A"
	after := `
desiredState:
  apiVersion: v1
  workloads:
    web: {agent: agent_A, runtime: podman, runtimeConfig: "image: nginx"}
workloadStates:
  agent_A:
    web:
      new: {state: Pending, subState: Initial}
agents: {agent_A: {}}
`
	f := newFakeConn()
	updated := false
	f.answer = func(req *ankbase.Request) *ankbase.Response {
		switch {
		case req.GetCompleteStateRequest() != nil && !updated:
			return stateResponse(t, "agents: {agent_A: {}}")
		case req.GetCompleteStateRequest() != nil:
			f.states <- broadcast(t, state.WorkloadState{Instance: inst(added), State: es(state.StatePending, state.SubStarting)})
			f.states <- broadcast(t, state.WorkloadState{Instance: inst(added), State: es(state.StateRunning, state.SubOk)})
			return stateResponse(t, after)
		case req.GetUpdateStateRequest() != nil:
			updated = true
			return &ankbase.Response{ResponseContent: &ankbase.Response_UpdateStateSuccess{UpdateStateSuccess: &ankbase.UpdateStateSuccess{AddedWorkloads: []string{added}}}}
		}
		return nil
	}
	s, out, _ := session(f)
	file := writeFile(t, "web.yaml", "apiVersion: v1\nworkloads:\n  web: {agent: agent_A, runtime: podman, runtimeConfig: \"image: nginx\"}\n")
	if err := s.Apply(context.Background(), []string{file}, nil, false); err != nil {
		t.Fatal(err)
	}
	if got, want := f.kinds(), []string{"CompleteStateRequest", "UpdateStateRequest", "CompleteStateRequest"}; !reflect.DeepEqual(got, want) {
		t.Fatalf("requests %v, want %v", got, want)
	}
	upd := f.last("UpdateStateRequest").GetUpdateStateRequest()
	if !reflect.DeepEqual(upd.GetUpdateMask(), []string{"desiredState.workloads.web"}) {
		t.Fatalf("masks = %v", upd.GetUpdateMask())
	}
	if upd.GetNewState().GetDesiredState().GetWorkloads().GetWorkloads()["web"].GetRuntime() != "podman" {
		t.Fatalf("new state = %v", upd.GetNewState())
	}
	for _, want := range []string{
		"Successfully applied the manifest(s).",
		"web             agent_A   podman    Pending(Initial)",
		"web on agent_A: Pending(Starting)\n",
		"web on agent_A: Running(Ok)\n",
	} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("output lacks %q:\n%s", want, out.String())
		}
	}
}

func TestApplyOnATerminalRedrawsWithSpinner(t *testing.T) {
	const added = "web.new.agent_A"
	f := newFakeConn()
	s, out := liveSession(f)
	spun := func(o string) bool {
		for _, frame := range spinnerFrames[1:] {
			if strings.Contains(o, frame+" ") {
				return true
			}
		}
		return false
	}
	f.answer = func(req *ankbase.Request) *ankbase.Response {
		switch {
		case req.GetCompleteStateRequest() != nil:
			return stateResponse(t, "agents: {agent_A: {}}")
		case req.GetUpdateStateRequest() != nil:
			go func() {
				// Settle once the spinner turned; the test fails below
				// if it never does.
				testwait.Until(10*time.Second, func() bool { return spun(out.String()) })
				f.states <- broadcast(t, state.WorkloadState{Instance: inst(added), State: es(state.StateRunning, state.SubOk)})
			}()
			return &ankbase.Response{ResponseContent: &ankbase.Response_UpdateStateSuccess{UpdateStateSuccess: &ankbase.UpdateStateSuccess{AddedWorkloads: []string{added}}}}
		}
		return nil
	}
	s.Terminal = true
	if err := s.RunWorkload(context.Background(), RunSpec{Name: "web", Runtime: "podman", RuntimeConfig: "x", Agent: "agent_A"}); err != nil {
		t.Fatal(err)
	}
	o := out.String()
	if !strings.Contains(o, "\x1b[K") || !strings.Contains(o, "  EXECUTION STATE") {
		t.Fatalf("no live table:\n%q", o)
	}
	if !spun(o) {
		t.Fatalf("spinner never turned:\n%q", o)
	}
	// The last frame shows the instance settled: no spinner in front.
	lastFrame := o[strings.LastIndex(o, "WORKLOAD NAME"):]
	if !strings.Contains(lastFrame, "     Running(Ok)") {
		t.Fatalf("last frame:\n%q", lastFrame)
	}
}

func TestUpdateVariants(t *testing.T) {
	serverError := func(req *ankbase.Request) *ankbase.Response {
		if req.GetUpdateStateRequest() != nil {
			return &ankbase.Response{ResponseContent: &ankbase.Response_Error{Error: &ankbase.Error{Message: "workload dependency 'a' is part of a cycle."}}}
		}
		return stateResponse(t, "{}")
	}
	nothingChanged := func(req *ankbase.Request) *ankbase.Response {
		if req.GetUpdateStateRequest() != nil {
			return &ankbase.Response{ResponseContent: &ankbase.Response_UpdateStateSuccess{UpdateStateSuccess: &ankbase.UpdateStateSuccess{}}}
		}
		return stateResponse(t, "{}")
	}
	tests := []struct {
		name      string
		noWait    bool
		answer    func(*ankbase.Request) *ankbase.Response
		run       func(*Session) error
		wantKinds []string
		wantMasks []string
		wantErr   string
		wantOut   string
	}{
		{
			name:      "server error is returned with its message",
			answer:    serverError,
			run:       func(s *Session) error { return s.DeleteWorkloads(context.Background(), []string{"a"}) },
			wantKinds: []string{"CompleteStateRequest", "UpdateStateRequest"},
			wantMasks: []string{"desiredState.workloads.a"},
			wantErr:   "workload dependency 'a' is part of a cycle.",
		},
		{
			name:      "no-wait sends only the update",
			noWait:    true,
			answer:    nothingChanged,
			run:       func(s *Session) error { return s.DeleteWorkloads(context.Background(), []string{"a", "b"}) },
			wantKinds: []string{"UpdateStateRequest"},
			wantMasks: []string{"desiredState.workloads.a", "desiredState.workloads.b"},
		},
		{
			name:      "nothing changed, nothing to wait for",
			answer:    nothingChanged,
			run:       func(s *Session) error { return s.DeleteWorkloads(context.Background(), []string{"a"}) },
			wantKinds: []string{"CompleteStateRequest", "UpdateStateRequest"},
			wantMasks: []string{"desiredState.workloads.a"},
			wantOut:   "Apply successful. No workloads updated.\n",
		},
		{
			name:      "delete config never waits",
			answer:    nothingChanged,
			run:       func(s *Session) error { return s.DeleteConfigs(context.Background(), []string{"c1", "c2"}) },
			wantKinds: []string{"UpdateStateRequest"},
			wantMasks: []string{"desiredState.configs.c1", "desiredState.configs.c2"},
		},
		{
			name:    "an invalid name is refused before anything is sent",
			answer:  nothingChanged,
			run:     func(s *Session) error { return s.DeleteWorkloads(context.Background(), []string{"web.agent"}) },
			wantErr: "contains characters other than",
		},
		{
			name:      "apply -d sends an empty state",
			noWait:    true,
			answer:    nothingChanged,
			run:       func(s *Session) error { return s.Apply(context.Background(), []string{"-"}, nil, true) },
			wantKinds: []string{"UpdateStateRequest"},
			wantMasks: []string{"desiredState.workloads.web"},
		},
		{
			name:   "apply of an empty manifest sends nothing",
			answer: nothingChanged,
			run: func(s *Session) error {
				return s.Apply(context.Background(), []string{writeFile(t, "e.yaml", "")}, nil, false)
			},
			wantOut: "Nothing to update.\n",
		},
		{
			name:   "apply of a missing file",
			answer: nothingChanged,
			run: func(s *Session) error {
				return s.Apply(context.Background(), []string{"/nonexistent/m.yaml"}, nil, false)
			},
			wantErr: "file '/nonexistent/m.yaml' not found",
		},
		{
			name:   "set state sends the file with the masks",
			noWait: true,
			answer: nothingChanged,
			run: func(s *Session) error {
				return s.SetState(context.Background(), []string{"desiredState.workloads.web.tags"}, "-")
			},
			wantKinds: []string{"UpdateStateRequest"},
			wantMasks: []string{"desiredState.workloads.web.tags"},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f := newFakeConn()
			f.answer = tt.answer
			s, out, _ := session(f)
			s.NoWait = tt.noWait
			s.In = strings.NewReader("apiVersion: v1\nworkloads:\n  web: {agent: a, runtime: podman, runtimeConfig: x}\n")
			if strings.HasPrefix(tt.name, "set state") {
				s.In = strings.NewReader("desiredState:\n  workloads:\n    web:\n      tags: {a: b}\n")
			}
			err := tt.run(s)
			if tt.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
					t.Fatalf("err = %v, want %q", err, tt.wantErr)
				}
			} else if err != nil {
				t.Fatal(err)
			}
			if !reflect.DeepEqual(f.kinds(), tt.wantKinds) {
				t.Fatalf("requests %v, want %v", f.kinds(), tt.wantKinds)
			}
			if tt.wantMasks != nil {
				upd := f.last("UpdateStateRequest").GetUpdateStateRequest()
				if !reflect.DeepEqual(upd.GetUpdateMask(), tt.wantMasks) {
					t.Fatalf("masks %v, want %v", upd.GetUpdateMask(), tt.wantMasks)
				}
				if strings.HasPrefix(tt.name, "delete") || strings.Contains(tt.name, "-d") {
					if upd.GetNewState().GetDesiredState() != nil {
						t.Fatalf("delete sent a state: %v", upd.GetNewState())
					}
				}
			}
			if tt.wantOut != "" && out.String() != tt.wantOut {
				t.Fatalf("output %q, want %q", out.String(), tt.wantOut)
			}
		})
	}
}

func TestGetCommands(t *testing.T) {
	f := newFakeConn()
	f.answer = func(req *ankbase.Request) *ankbase.Response { return stateResponse(t, clusterYAML) }
	tests := []struct {
		name      string
		run       func(*Session) error
		wantMasks []string
		wantOut   []string
	}{
		{"state", func(s *Session) error {
			return s.GetState(context.Background(), []string{"desiredState.workloads.web"}, FormatYAML)
		},
			[]string{"desiredState.workloads.web"}, []string{"desiredState:\n  apiVersion: v1\n"}},
		{"workloads", func(s *Session) error {
			return s.GetWorkloads(context.Background(), WorkloadFilter{Agent: "agent_B"}, "")
		},
			nil, []string{"WORKLOAD NAME", "db              agent_B   containerd   Pending(StartingFailed)"}},
		{"agents", func(s *Session) error { return s.GetAgents(context.Background(), "") },
			nil, []string{"agent_A   2           7%          1048576B"}},
		{"configs", func(s *Session) error { return s.GetConfigs(context.Background(), "") },
			[]string{"desiredState.configs"}, []string{"CONFIG\nalpha \nzeta  \n"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s, out, _ := session(f)
			if err := tt.run(s); err != nil {
				t.Fatal(err)
			}
			if got := f.last("CompleteStateRequest").GetCompleteStateRequest().GetFieldMask(); !reflect.DeepEqual(got, tt.wantMasks) {
				t.Fatalf("masks %v, want %v", got, tt.wantMasks)
			}
			for _, w := range tt.wantOut {
				if !strings.Contains(out.String(), w) {
					t.Fatalf("output lacks %q:\n%s", w, out.String())
				}
			}
		})
	}
}

func TestGetEventsUntilInterrupted(t *testing.T) {
	// swdd~cli-provides-get-events-command~2
	// swdd~cli-subscribes-for-events~1
	// swdd~cli-receives-events~1
	f := newFakeConn()
	ctx, interrupt := context.WithCancel(context.Background())
	s, out := liveSession(f)
	f.onSubscribe = func(req *ankbase.Request, ch chan<- *ankbase.Response) {
		ch <- stateResponse(t, "workloadStates: {}")
		for i := 0; i < 2; i++ {
			ch <- &ankbase.Response{ResponseContent: &ankbase.Response_CompleteStateResponse{CompleteStateResponse: &ankbase.CompleteStateResponse{
				CompleteState: &ankbase.CompleteState{}, AlteredFields: &ankbase.AlteredFields{AddedFields: []string{fmt.Sprintf("agents.a%d", i)}},
			}}}
		}
		// Interrupt once the three events are out; the test fails below
		// if they never are.
		testwait.Until(10*time.Second, func() bool { return strings.Count(out.String(), "---\n") >= 3 })
		interrupt()
	}
	f.answer = func(req *ankbase.Request) *ankbase.Response {
		return &ankbase.Response{ResponseContent: &ankbase.Response_EventsCancelAccepted{EventsCancelAccepted: &ankbase.EventsCancelAccepted{}}}
	}
	s.Now = func() time.Time { return time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC) }
	if err := s.GetEvents(ctx, []string{"agents"}, FormatYAML, true); err != nil {
		t.Fatal(err)
	}
	sub := f.last("CompleteStateRequest")
	if !sub.GetCompleteStateRequest().GetSubscribeForEvents() || !reflect.DeepEqual(sub.GetCompleteStateRequest().GetFieldMask(), []string{"agents"}) {
		t.Fatalf("subscription request %v", sub)
	}
	cancelReq := f.last("EventsCancelRequest")
	if cancelReq == nil || cancelReq.GetRequestId() != sub.GetRequestId() {
		t.Fatalf("cancel %v does not carry the subscription id %s", cancelReq, sub.GetRequestId())
	}
	docs := strings.Split(out.String(), "---\n")
	if len(docs) != 4 || docs[0] != "" {
		t.Fatalf("want 3 YAML documents, got:\n%s", out.String())
	}
	if strings.Contains(docs[1], "addedFields") || !strings.Contains(docs[1], "timestamp: 2026-01-02T03:04:05+00:00\n") {
		t.Fatalf("current state event:\n%s", docs[1])
	}
	if !strings.Contains(docs[3], "addedFields:\n  - agents.a1\n") {
		t.Fatalf("second event:\n%s", docs[3])
	}
}

func TestGetEventsSubscriptionError(t *testing.T) {
	// swdd~cli-handles-event-subscription-errors~1
	f := newFakeConn()
	f.onSubscribe = func(req *ankbase.Request, ch chan<- *ankbase.Response) {
		ch <- &ankbase.Response{ResponseContent: &ankbase.Response_Error{Error: &ankbase.Error{Message: "Access denied"}}}
	}
	s, _, _ := session(f)
	err := s.GetEvents(context.Background(), nil, FormatJSON, false)
	if err == nil || err.Error() != "event subscription failed: Access denied" {
		t.Fatalf("err = %v", err)
	}
}

func logEntries(n state.InstanceName, msgs ...string) *ankbase.Response {
	var es []*ankbase.LogEntry
	for _, m := range msgs {
		es = append(es, &ankbase.LogEntry{WorkloadName: rpc.InstanceNameToProto(n), Message: m})
	}
	return &ankbase.Response{ResponseContent: &ankbase.Response_LogEntriesResponse{LogEntriesResponse: &ankbase.LogEntriesResponse{LogEntries: es}}}
}

func logsStop(n state.InstanceName) *ankbase.Response {
	return &ankbase.Response{ResponseContent: &ankbase.Response_LogsStopResponse{LogsStopResponse: &ankbase.LogsStopResponse{WorkloadName: rpc.InstanceNameToProto(n)}}}
}

func accepted(ns ...state.InstanceName) *ankbase.Response {
	a := &ankbase.LogsRequestAccepted{}
	for _, n := range ns {
		a.WorkloadNames = append(a.WorkloadNames, rpc.InstanceNameToProto(n))
	}
	return &ankbase.Response{ResponseContent: &ankbase.Response_LogsRequestAccepted{LogsRequestAccepted: a}}
}

func TestLogs(t *testing.T) {
	// swdd~cli-provides-workload-logs~1
	// swdd~cli-streams-logs-from-the-server~1
	// swdd~cli-handles-log-responses-from-server~1
	web, db1, db2 := inst("web.1111.agent_A"), inst("db.2222.agent_A"), inst("db.3333.agent_B")
	tests := []struct {
		name    string
		opts    LogsOptions
		script  func(ch chan<- *ankbase.Response)
		want    string
		wantErr string
	}{
		{
			name: "one workload, plain lines, ends when its source stops",
			opts: LogsOptions{Workloads: []string{"web"}, Tail: -1},
			script: func(ch chan<- *ankbase.Response) {
				ch <- accepted(web)
				ch <- logEntries(web, "one", "two")
				ch <- logsStop(web)
			},
			want: "one\ntwo\n",
		},
		{
			name: "-n prefixes the workload name",
			opts: LogsOptions{Workloads: []string{"web"}, Tail: -1, Names: true},
			script: func(ch chan<- *ankbase.Response) {
				ch <- accepted(web)
				ch <- logEntries(web, "one")
				ch <- logsStop(web)
			},
			want: "web one\n",
		},
		{
			name: "several instances get names and end when all stopped",
			opts: LogsOptions{Workloads: []string{"db"}, Tail: -1},
			script: func(ch chan<- *ankbase.Response) {
				ch <- accepted(db1, db2)
				ch <- logEntries(db1, "a")
				ch <- logsStop(db1)
				ch <- logEntries(db2, "b")
				ch <- logsStop(db2)
				ch <- logEntries(db2, "never printed")
			},
			want: "db a\ndb b\n",
		},
		{
			name:    "a source the server did not accept",
			opts:    LogsOptions{Workloads: []string{"db"}, Tail: -1},
			script:  func(ch chan<- *ankbase.Response) { ch <- accepted(db1) },
			wantErr: "workload 'db' is not accepted by the server to receive logs from",
		},
		{
			name: "server error",
			opts: LogsOptions{Workloads: []string{"web"}, Tail: -1},
			script: func(ch chan<- *ankbase.Response) {
				ch <- &ankbase.Response{ResponseContent: &ankbase.Response_Error{Error: &ankbase.Error{Message: "boom"}}}
			},
			wantErr: "logs request failed: boom",
		},
		{
			name:    "unknown workload",
			opts:    LogsOptions{Workloads: []string{"nope"}, Tail: -1},
			wantErr: "workload 'nope' does not exist",
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f := newFakeConn()
			f.answer = func(req *ankbase.Request) *ankbase.Response { return stateResponse(t, clusterYAML) }
			f.onSubscribe = func(req *ankbase.Request, ch chan<- *ankbase.Response) { tt.script(ch) }
			s, out, _ := session(f)
			err := s.Logs(context.Background(), tt.opts)
			if tt.wantErr != "" {
				if err == nil || err.Error() != tt.wantErr {
					t.Fatalf("err = %v, want %q", err, tt.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if out.String() != tt.want {
				t.Fatalf("output %q, want %q", out.String(), tt.want)
			}
			if got := f.last("CompleteStateRequest").GetCompleteStateRequest().GetFieldMask(); !reflect.DeepEqual(got, []string{"workloadStates"}) {
				t.Fatalf("instances resolved with masks %v", got)
			}
		})
	}
}

func TestLogsFollowCancelsOnInterrupt(t *testing.T) {
	// swdd~cli-sends-logs-cancel-request-upon-termination~1
	web := inst("web.1111.agent_A")
	f := newFakeConn()
	ctx, interrupt := context.WithCancel(context.Background())
	s, out := liveSession(f)
	f.answer = func(req *ankbase.Request) *ankbase.Response {
		if req.GetLogsCancelRequest() != nil {
			return &ankbase.Response{ResponseContent: &ankbase.Response_LogsCancelAccepted{LogsCancelAccepted: &ankbase.LogsCancelAccepted{}}}
		}
		return stateResponse(t, clusterYAML)
	}
	f.onSubscribe = func(req *ankbase.Request, ch chan<- *ankbase.Response) {
		ch <- accepted(web)
		ch <- logEntries(web, "tick")
		testwait.Until(10*time.Second, func() bool { return strings.Contains(out.String(), "tick\n") })
		interrupt()
	}
	if err := s.Logs(ctx, LogsOptions{Workloads: []string{"web"}, Follow: true, Tail: 5}); err != nil {
		t.Fatal(err)
	}
	lr := f.last("LogsRequest")
	if !lr.GetLogsRequest().GetFollow() || lr.GetLogsRequest().GetTail() != 5 {
		t.Fatalf("logs request %v", lr)
	}
	c := f.last("LogsCancelRequest")
	if c == nil || c.GetRequestId() != lr.GetRequestId() {
		t.Fatalf("cancel %v does not carry the campaign id %s", c, lr.GetRequestId())
	}
	if out.String() != "tick\n" {
		t.Fatalf("output %q", out.String())
	}
}

func TestWatchWorkloads(t *testing.T) {
	// swdd~cli-get-workloads-with-watch~1
	f := newFakeConn()
	ctx, interrupt := context.WithCancel(context.Background())
	s, out := liveSession(f)
	reads := 0
	f.answer = func(req *ankbase.Request) *ankbase.Response {
		reads++
		if reads == 1 {
			go func() {
				f.states <- broadcast(t, state.WorkloadState{Instance: inst("web.1111.agent_A"), State: es(state.StateFailed, state.SubLost)})
				f.states <- broadcast(t, state.WorkloadState{Instance: inst("new.5.agent_A"), State: state.PendingInitial})
				// Interrupt once the third table is out.
				testwait.Until(10*time.Second, func() bool { return strings.Count(out.String(), "\n\n") >= 3 })
				interrupt()
			}()
			return stateResponse(t, clusterYAML)
		}
		return stateResponse(t, `
workloadStates:
  agent_A:
    new:
      "5": {state: Pending, subState: Initial}
`)
	}
	if err := s.WatchWorkloads(ctx, WorkloadFilter{Agent: "agent_A"}); err != nil {
		t.Fatal(err)
	}
	blocks := strings.Split(strings.TrimSuffix(out.String(), "\n\n"), "\n\n")
	if len(blocks) != 3 {
		t.Fatalf("want 3 tables, got:\n%s", out.String())
	}
	if !strings.Contains(blocks[0], "web             agent_A   podman    Running(Ok)") || strings.Contains(blocks[0], "agent_B") {
		t.Fatalf("first table:\n%s", blocks[0])
	}
	if !strings.Contains(blocks[1], "Failed(Lost)") {
		t.Fatalf("second table:\n%s", blocks[1])
	}
	if !strings.Contains(blocks[2], "new ") || strings.Contains(blocks[2], "web ") || reads != 2 {
		t.Fatalf("third table after re-reading (%d reads):\n%s", reads, blocks[2])
	}
}

func TestCancelRequestUsesItsOwnContext(t *testing.T) {
	f := newFakeConn()
	f.answer = func(req *ankbase.Request) *ankbase.Response { return nil }
	s, _, errOut := session(f)
	s.Verbose = true
	s.cancelRequest("id-1", &ankbase.Request{RequestContent: &ankbase.Request_EventsCancelRequest{EventsCancelRequest: &ankbase.EventsCancelRequest{}}})
	if r := f.last("EventsCancelRequest"); r == nil || r.GetRequestId() != "id-1" {
		t.Fatalf("cancel not sent with its id: %v", r)
	}
	if !strings.Contains(errOut.String(), "debug: cancel request id-1") {
		t.Fatalf("failure not reported in verbose mode: %q", errOut.String())
	}
}

// The wait for a subscription's first answer runs on the session's clock:
// it ends with the timeout once the clock passes it, and not before.
func TestFirstResponseTimesOutOnTheSessionClock(t *testing.T) {
	f := newFakeConn() // subscriptions get no answer
	s, _, _ := session(f)
	fake := clock.NewFake(time.Unix(1000, 0))
	s.Clock, s.Timeout = fake, time.Minute
	done := make(chan error, 1)
	go func() { done <- s.GetEvents(context.Background(), nil, FormatYAML, false) }()
	testwait.For(t, 10*time.Second, func() bool { return fake.Pending() == 1 }, "the response timer")
	fake.Advance(time.Minute - time.Millisecond)
	select {
	case err := <-done:
		t.Fatalf("returned before the timeout: %v", err)
	default:
	}
	fake.Advance(time.Millisecond)
	var err error
	testwait.For(t, 10*time.Second, func() bool {
		select {
		case err = <-done:
			return true
		default:
			return false
		}
	}, "GetEvents to return")
	if err == nil || !strings.Contains(err.Error(), "no response from the server within 1m0s") {
		t.Fatalf("err = %v, want the response timeout", err)
	}
}
