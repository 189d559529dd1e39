package controlif

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"google.golang.org/protobuf/proto"

	"github.com/grapnel-io/grapnel/rpc/ankbase"
	"github.com/grapnel-io/grapnel/state"
)

func newTestInterfaces(t *testing.T, f *forwarder) (*Interfaces, string) {
	t.Helper()
	run := t.TempDir()
	c := New(Config{Agent: "agent_A", RunFolder: run, Forward: f.forward, Logger: quiet})
	t.Cleanup(c.Shutdown)
	return c, run
}

func completeStateResponse(id string) *ankbase.Response {
	return &ankbase.Response{RequestId: id, ResponseContent: &ankbase.Response_CompleteStateResponse{
		CompleteStateResponse: &ankbase.CompleteStateResponse{CompleteState: &ankbase.CompleteState{}}}}
}

// TestEndToEnd drives one control interface as a workload would.
func TestEndToEnd(t *testing.T) {
	f := newForwarder()
	c, run := newTestInterfaces(t, f)

	// swdd~agent-control-interface-pipes-path-naming~2
	// swdd~agent-control-interface-creates-two-pipes-per-workload~1
	dir, err := c.Open(testInst, readAccess, nil)
	if err != nil {
		t.Fatal(err)
	}
	if want := filepath.Join(run, "agent_A_io", "dyn.0123abcd.agent_A", "control_interface"); dir != want {
		t.Fatalf("dir %s, want %s", dir, want)
	}
	isFIFO(t, filepath.Join(dir, "input"))
	isFIFO(t, filepath.Join(dir, "output"))

	w := connectBlocking(t, dir)
	// swdd~control-interface-accepted-message-on-initial-hello~1
	w.handshake()

	// swdd~agent-checks-request-for-authorization~1
	// swdd~agent-responses-to-denied-request-from-control-interface~1
	// swdd~agent-responses-to-denied-request-from-control-interface-contains-request-id~1
	w.send(requestMsg(&ankbase.Request{RequestId: "1", RequestContent: readReq("agents").RequestContent}))
	resp := w.recv().GetResponse()
	if resp.GetRequestId() != "1" || resp.GetError().GetMessage() != "Access denied" {
		t.Fatalf("denied request answered %v", resp)
	}
	w.send(requestMsg(&ankbase.Request{RequestId: "1b", RequestContent: logsReq("secret").RequestContent}))
	if resp := w.recv().GetResponse(); resp.GetRequestId() != "1b" || resp.GetError().GetMessage() != "Access denied" {
		t.Fatalf("denied logs request answered %v", resp)
	}
	f.none(t)

	// swdd~agent-forward-request-from-control-interface-pipe-to-server~2
	// swdd~agent-adds-workload-prefix-id-control-interface-request~1
	allowed := &ankbase.Request{RequestId: "2", RequestContent: readReq("desiredState.workloads.nginx").RequestContent}
	w.send(requestMsg(allowed))
	got := f.next(t)
	if got.GetRequestId() != "dyn@2" || !proto.Equal(got.GetCompleteStateRequest(), allowed.GetCompleteStateRequest()) {
		t.Fatalf("forwarded %v", got)
	}
	// Cancelling is always allowed and forwarded with the prefix too.
	w.send(requestMsg(&ankbase.Request{RequestId: "3", RequestContent: &ankbase.Request_LogsCancelRequest{LogsCancelRequest: &ankbase.LogsCancelRequest{}}}))
	if got := f.next(t); got.GetRequestId() != "dyn@3" || got.GetLogsCancelRequest() == nil {
		t.Fatalf("forwarded %v", got)
	}

	// swdd~agent-uses-id-prefix-forward-control-interface-response-correct-workload~1
	// swdd~agent-remove-id-prefix-forwarding-control-interface-response~1
	// swdd~agent-forward-responses-to-control-interface-pipe~1
	if !c.Deliver(completeStateResponse("dyn@2")) {
		t.Fatal("Deliver did not route dyn@2")
	}
	resp = w.recv().GetResponse()
	if resp.GetRequestId() != "2" || resp.GetCompleteStateResponse() == nil {
		t.Fatalf("delivered %v", resp)
	}
	// An id whose own part holds '@' keeps it.
	if !c.Deliver(completeStateResponse("dyn@x@y")) {
		t.Fatal("Deliver did not route dyn@x@y")
	}
	if resp := w.recv().GetResponse(); resp.GetRequestId() != "x@y" {
		t.Fatalf("delivered %v", resp)
	}
	for _, id := range []string{"other@2", "no-prefix", ""} {
		if c.Deliver(completeStateResponse(id)) {
			t.Fatalf("Deliver routed %q", id)
		}
	}

	// Without a server the workload hears so at once.
	f.setFail(errOffline)
	w.send(requestMsg(allowed))
	resp = w.recv().GetResponse()
	if resp.GetRequestId() != "2" || !strings.Contains(resp.GetError().GetMessage(), "not reachable") {
		t.Fatalf("offline request answered %v", resp)
	}
	f.setFail(nil)

	// A workload may close and reopen `output` between messages.
	w.reconnect()
	w.send(requestMsg(allowed))
	if got := f.next(t); got.GetRequestId() != "dyn@2" {
		t.Fatalf("forwarded after reopening %v", got)
	}

	c.Close(testInst)
	if _, err := os.Stat(dir); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("directory after Close: %v", err)
	}
	if c.Deliver(completeStateResponse("dyn@4")) {
		t.Fatal("Deliver routed to a closed instance")
	}
}

// TestBadFirstMessage: a connection must open with a compatible Hello;
// otherwise the agent says why and ignores the workload until it starts a
// new connection with a Hello.
//
// swdd~agent-closes-control-interface-on-missing-initial-hello~1
func TestBadFirstMessage(t *testing.T) {
	tests := []struct {
		name   string
		first  []byte
		reason string
	}{
		{"request first", delimited(t, requestMsg(readReq("desiredState.workloads"))), "Initial Hello missing!"},
		{"empty message", []byte{0}, "Initial Hello missing!"},
		{"undecodable", []byte{2, 0xff, 0xff}, "Could not decode protobuf data"},
		{"newer major", delimited(t, helloMsg("2.0.0")), "Unsupported protocol version '2.0.0'. Currently supported '1'"},
		{"older major", delimited(t, helloMsg("0.7.0")), "Unsupported protocol version '0.7.0'. Currently supported '1'"},
		{"not a version", delimited(t, helloMsg("one")), "Unsupported protocol version 'one'. Currently supported '1'"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f := newForwarder()
			c, _ := newTestInterfaces(t, f)
			dir, err := c.Open(testInst, readAccess, nil)
			if err != nil {
				t.Fatal(err)
			}
			w := connect(t, dir)
			w.sendRaw(tt.first)
			if got := w.recv().GetConnectionClosed().GetReason(); got != tt.reason {
				t.Fatalf("reason %q, want %q", got, tt.reason)
			}
			// Ignored: neither answered nor forwarded, until a new
			// connection starts with a Hello.
			w.send(requestMsg(readReq("desiredState.workloads")))
			w.sendRaw([]byte{2, 0xff, 0xff})
			w.handshake()
			f.none(t)
			w.send(requestMsg(&ankbase.Request{RequestId: "7", RequestContent: readReq("desiredState.workloads").RequestContent}))
			if got := f.next(t); got.GetRequestId() != "dyn@7" {
				t.Fatalf("forwarded %v", got)
			}
		})
	}
}

// TestRepeatedHello: a second Hello of a compatible version changes
// nothing; one of another major closes the connection.
func TestRepeatedHello(t *testing.T) {
	f := newForwarder()
	c, _ := newTestInterfaces(t, f)
	dir, err := c.Open(testInst, readAccess, nil)
	if err != nil {
		t.Fatal(err)
	}
	w := connect(t, dir)
	w.handshake()
	w.send(helloMsg("1.2.0"))
	// A workload restarted under the same session says Hello again and
	// waits for the answer.
	if w.recv().GetControlInterfaceAccepted() == nil {
		t.Fatal("a repeated compatible Hello is not accepted")
	}
	w.send(requestMsg(&ankbase.Request{RequestId: "a", RequestContent: readReq("agents").RequestContent}))
	if resp := w.recv().GetResponse(); resp.GetError().GetMessage() != "Access denied" {
		t.Fatalf("after a compatible Hello: %v", resp)
	}
	w.send(helloMsg("3.0.0"))
	if got := w.recv().GetConnectionClosed().GetReason(); got != "Unsupported protocol version '3.0.0'. Currently supported '1'" {
		t.Fatalf("reason %q", got)
	}
}

// TestReopen: opening an instance again keeps the connection when the
// rules are the same and starts a new one when they changed; FIFOs left by
// an earlier agent are re-used.
func TestReopen(t *testing.T) {
	f := newForwarder()
	run := t.TempDir()
	c := New(Config{Agent: "agent_A", RunFolder: run, Forward: f.forward, Logger: quiet})
	dir, err := c.Open(testInst, readAccess, nil)
	if err != nil {
		t.Fatal(err)
	}
	before := isFIFO(t, filepath.Join(dir, "output"))
	w := connect(t, dir)
	w.handshake()

	same := readAccess.Clone()
	if d, err := c.Open(testInst, same, nil); err != nil || d != dir {
		t.Fatalf("Open again: %s, %v", d, err)
	}
	w.send(requestMsg(&ankbase.Request{RequestId: "1", RequestContent: readReq("desiredState.workloads").RequestContent}))
	if got := f.next(t); got.GetRequestId() != "dyn@1" {
		t.Fatalf("forwarded %v", got)
	}

	wider := state.ControlInterfaceAccess{AllowRules: []state.AccessRule{stateRuleOf(state.RWRead, "*")}}
	if _, err := c.Open(testInst, wider, nil); err != nil {
		t.Fatal(err)
	}
	w.send(requestMsg(&ankbase.Request{RequestId: "2", RequestContent: readReq().RequestContent}))
	if got := w.recv().GetConnectionClosed().GetReason(); got != "Initial Hello missing!" {
		t.Fatalf("new rules, no Hello: %q", got)
	}
	w.handshake()
	w.send(requestMsg(&ankbase.Request{RequestId: "3", RequestContent: readReq().RequestContent}))
	if got := f.next(t); got.GetRequestId() != "dyn@3" {
		t.Fatalf("forwarded under the new rules %v", got)
	}

	// An agent restart: the FIFOs stay, the workload keeps its ends and
	// says Hello to the new agent.
	within(t, "Shutdown", c.Shutdown)
	if _, err := c.Open(testInst, readAccess, nil); !errors.Is(err, ErrShutdown) {
		t.Fatalf("Open after Shutdown: %v", err)
	}
	c2 := New(Config{Agent: "agent_A", RunFolder: run, Forward: f.forward, Logger: quiet})
	t.Cleanup(c2.Shutdown)
	if d, err := c2.Open(testInst, readAccess, nil); err != nil || d != dir {
		t.Fatalf("Open after restart: %s, %v", d, err)
	}
	if after := isFIFO(t, filepath.Join(dir, "output")); !os.SameFile(before, after) {
		t.Fatal("the FIFO was replaced")
	}
	w.handshake()
}

// TestShutdownWithoutWorkload: nothing waits for a workload that never
// opened its FIFOs.
func TestShutdownWithoutWorkload(t *testing.T) {
	c, _ := newTestInterfaces(t, newForwarder())
	var dirs []string
	for _, name := range []string{"a", "b", "c"} {
		inst := testInst
		inst.WorkloadName = name
		dir, err := c.Open(inst, readAccess, nil)
		if err != nil {
			t.Fatal(err)
		}
		dirs = append(dirs, dir)
		// An answer waits for a reader that never comes.
		c.Deliver(completeStateResponse(name + "@1"))
	}
	within(t, "Shutdown", c.Shutdown)
	for _, d := range dirs {
		isFIFO(t, filepath.Join(d, "input"))
		isFIFO(t, filepath.Join(d, "output"))
	}
	inst := testInst
	inst.WorkloadName = "a"
	within(t, "Close after Shutdown", func() { c.Close(inst) })
}

func TestOpenErrors(t *testing.T) {
	c, run := newTestInterfaces(t, newForwarder())
	blocked := testInst
	blocked.WorkloadName = "blocked"
	dir := c.Dir(blocked)
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "output"), nil, 0o600); err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name string
		inst state.InstanceName
		want error
		text string
	}{
		{"no workload name", state.InstanceName{AgentName: "agent_A", ID: "1"}, ErrInstance, "instanceName.workloadName: required"},
		{"path in id", state.InstanceName{WorkloadName: "w", AgentName: "agent_A", ID: "../x"}, ErrInstance, "instanceName.id"},
		{"dot-dot agent", state.InstanceName{WorkloadName: "w", AgentName: "..", ID: "1"}, ErrInstance, "instanceName.agentName"},
		{"file in the way", blocked, ErrFIFO, "not a FIFO"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := c.Open(tt.inst, readAccess, nil)
			if !errors.Is(err, tt.want) || !strings.Contains(err.Error(), tt.text) {
				t.Fatalf("err %v, want %v with %q", err, tt.want, tt.text)
			}
		})
	}
	if entries, _ := os.ReadDir(run); len(entries) != 1 {
		t.Fatalf("run folder holds %d entries", len(entries))
	}
}

// TestWildcardPastDenyRule is issue 17's attack through the FIFO: allowed
// to read the configs but not the secret one, a workload asked for
// desiredState.configs.* (and subscribed to it); the agent forwarded both
// and the server's answer held the secret. Now both are refused and
// nothing reaches the server, while a config the deny rule does not
// reach is still forwarded.
//
// swdd~agent-checks-request-for-authorization~1
// swdd~agent-authorizing-matching-deny-rules~1
func TestWildcardPastDenyRule(t *testing.T) {
	f := newForwarder()
	c, _ := newTestInterfaces(t, f)
	rules := state.ControlInterfaceAccess{
		AllowRules: []state.AccessRule{stateRuleOf(state.RWRead, "desiredState.configs")},
		DenyRules:  []state.AccessRule{stateRuleOf(state.RWRead, "desiredState.configs.secret")},
	}
	dir, err := c.Open(testInst, rules, nil)
	if err != nil {
		t.Fatal(err)
	}
	w := connect(t, dir)
	w.handshake()
	for i, cs := range []*ankbase.CompleteStateRequest{
		{FieldMask: []string{"desiredState.configs.*"}},
		{FieldMask: []string{"desiredState.configs.*"}, SubscribeForEvents: true},
		{FieldMask: []string{"desiredState.configs"}},
	} {
		id := string(rune('a' + i))
		w.send(requestMsg(&ankbase.Request{RequestId: id, RequestContent: &ankbase.Request_CompleteStateRequest{CompleteStateRequest: cs}}))
		if resp := w.recv().GetResponse(); resp.GetRequestId() != id || resp.GetError().GetMessage() != "Access denied" {
			t.Fatalf("request %d (%v) answered %v", i, cs, resp)
		}
	}
	f.none(t)
	w.send(requestMsg(&ankbase.Request{RequestId: "ok", RequestContent: readReq("desiredState.configs.public").RequestContent}))
	if got := f.next(t); got.GetRequestId() != "dyn@ok" {
		t.Fatalf("forwarded %v", got)
	}
}
