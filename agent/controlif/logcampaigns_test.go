package controlif

import (
	"fmt"
	"slices"
	"strings"
	"testing"

	"github.com/grapnel-io/grapnel/rpc/ankbase"
)

// workloadCap is DefaultMaxLogCampaigns, spelled out so that these tests
// also run against an agent without the cap (issue 27, point 5).
const workloadCap = 8

func followReq(id string, names ...string) *ankbase.Request {
	r := logsReq(names...)
	r.RequestId = id
	follow := true
	r.GetLogsRequest().Follow = &follow
	return r
}

func cancelReq(id string) *ankbase.Request {
	return &ankbase.Request{RequestId: id, RequestContent: &ankbase.Request_LogsCancelRequest{LogsCancelRequest: &ankbase.LogsCancelRequest{}}}
}

func acceptedAnswer(id string, names ...string) *ankbase.Response {
	r := &ankbase.LogsRequestAccepted{}
	for _, n := range names {
		r.WorkloadNames = append(r.WorkloadNames, &ankbase.WorkloadInstanceName{WorkloadName: n, AgentName: "agent_A", Id: "1234"})
	}
	return &ankbase.Response{RequestId: id, ResponseContent: &ankbase.Response_LogsRequestAccepted{LogsRequestAccepted: r}}
}

func stopped(id, name string) *ankbase.Response {
	return &ankbase.Response{RequestId: id, ResponseContent: &ankbase.Response_LogsStopResponse{LogsStopResponse: &ankbase.LogsStopResponse{
		WorkloadName: &ankbase.WorkloadInstanceName{WorkloadName: name, AgentName: "agent_A", Id: "1234"}}}}
}

func cancelAccepted(id string) *ankbase.Response {
	return &ankbase.Response{RequestId: id, ResponseContent: &ankbase.Response_LogsCancelAccepted{LogsCancelAccepted: &ankbase.LogsCancelAccepted{}}}
}

func errorAnswer(id, msg string) *ankbase.Response {
	return &ankbase.Response{RequestId: id, ResponseContent: &ankbase.Response_Error{Error: &ankbase.Error{Message: msg}}}
}

// openCampaigns has the workload open n follow campaigns l0..l<n-1>, each
// forwarded and accepted for the instance "nginx".
func openCampaigns(t *testing.T, c *Interfaces, f *forwarder, w *workload, n int) {
	t.Helper()
	for i := range n {
		id := fmt.Sprintf("l%d", i)
		w.send(requestMsg(followReq(id, "nginx")))
		if got := f.next(t); got.GetRequestId() != "dyn@"+id || got.GetLogsRequest() == nil {
			t.Fatalf("forwarded %v, want the LogsRequest dyn@%s", got, id)
		}
		c.Deliver(acceptedAnswer("dyn@"+id, "nginx"))
		if got := w.recv().GetResponse(); got.GetRequestId() != id || got.GetLogsRequestAccepted() == nil {
			t.Fatalf("workload got %v", got)
		}
	}
}

// cancels collects the n next forwarded requests, which must all be
// LogsCancelRequests, and returns their ids in order.
func cancels(t *testing.T, f *forwarder, n int) []string {
	t.Helper()
	var ids []string
	for range n {
		r := f.next(t)
		if r.GetLogsCancelRequest() == nil {
			t.Fatalf("forwarded %v, want a LogsCancelRequest", r)
		}
		ids = append(ids, r.GetRequestId())
	}
	slices.Sort(ids)
	return ids
}

func campaignIDs(n int) []string {
	var ids []string
	for i := range n {
		ids = append(ids, fmt.Sprintf("dyn@l%d", i))
	}
	slices.Sort(ids)
	return ids
}

func newSession(t *testing.T) (*Interfaces, *forwarder, *workload) {
	t.Helper()
	f := newForwarder()
	c, _ := newTestInterfaces(t, f)
	dir, err := c.Open(testInst, readAccess, nil)
	if err != nil {
		t.Fatal(err)
	}
	w := connect(t, dir)
	w.handshake()
	return c, f, w
}

// TestWorkloadLogCampaignCap: a workload that opens more log campaigns
// than the cap gets each one past it refused at once with an error naming
// itself and the cap, and nothing is forwarded; a campaign that ends (its
// instances stopped, cancelled, refused by the server) frees its slot.
func TestWorkloadLogCampaignCap(t *testing.T) {
	c, f, w := newSession(t)
	openCampaigns(t, c, f, w, workloadCap)
	for i := range 3 {
		id := fmt.Sprintf("over%d", i)
		w.send(requestMsg(followReq(id, "nginx")))
		resp := w.recv().GetResponse()
		want := fmt.Sprintf("Log campaign refused: workload 'dyn' has %d log campaigns open, as many as the agent allows a workload (--max-log-campaigns-per-workload %d)", workloadCap, workloadCap)
		if resp.GetRequestId() != id || !strings.HasPrefix(resp.GetError().GetMessage(), want) {
			t.Fatalf("request past the cap answered %v, want an error %q", resp, want)
		}
	}
	f.none(t)

	// Every instance of l0 stopped: l0 is over.
	c.Deliver(stopped("dyn@l0", "nginx"))
	w.recv()
	w.send(requestMsg(followReq("a", "nginx")))
	if got := f.next(t); got.GetRequestId() != "dyn@a" {
		t.Fatalf("after a campaign ended: forwarded %v", got)
	}
	// The workload cancels l1: forwarded, its slot free.
	w.send(requestMsg(cancelReq("l1")))
	if got := f.next(t); got.GetRequestId() != "dyn@l1" || got.GetLogsCancelRequest() == nil {
		t.Fatalf("forwarded %v", got)
	}
	w.send(requestMsg(followReq("b", "nginx")))
	if got := f.next(t); got.GetRequestId() != "dyn@b" {
		t.Fatalf("after a cancel: forwarded %v", got)
	}
	// The server refuses b: its slot is free again, and the workload
	// hears the server's error.
	c.Deliver(errorAnswer("dyn@b", "too many"))
	if got := w.recv().GetResponse(); got.GetRequestId() != "b" || got.GetError().GetMessage() != "too many" {
		t.Fatalf("workload got %v", got)
	}
	w.send(requestMsg(followReq("c", "nginx")))
	if got := f.next(t); got.GetRequestId() != "dyn@c" {
		t.Fatalf("after the server's refusal: forwarded %v", got)
	}
	// Full again.
	w.send(requestMsg(followReq("d", "nginx")))
	if got := w.recv().GetResponse(); got.GetRequestId() != "d" || got.GetError() == nil {
		t.Fatalf("past the cap again: %v", got)
	}
	f.none(t)
}

// TestLogCampaignsEndWithTheConnection: a new Hello starts a new
// connection; the campaigns of the one before are cancelled at the server,
// and the answers to those cancels are not the workload's.
func TestLogCampaignsEndWithTheConnection(t *testing.T) {
	c, f, w := newSession(t)
	openCampaigns(t, c, f, w, 3)
	w.send(helloMsg("1.0.0"))
	if got := cancels(t, f, 3); !slices.Equal(got, campaignIDs(3)) {
		t.Fatalf("cancelled %v, want %v", got, campaignIDs(3))
	}
	if m := w.recv(); m.GetControlInterfaceAccepted() == nil {
		t.Fatalf("the new Hello answered %v", m)
	}
	// Late entries of a cancelled campaign and the answers to the
	// cancels are dropped; the workload, restarted, may use the same ids
	// again and gets their answers.
	c.Deliver(logEntries("dyn@l0", 10))
	for i := range 3 {
		c.Deliver(cancelAccepted(fmt.Sprintf("dyn@l%d", i)))
	}
	w.send(requestMsg(followReq("l0", "nginx")))
	if got := f.next(t); got.GetRequestId() != "dyn@l0" || got.GetLogsRequest() == nil {
		t.Fatalf("forwarded %v", got)
	}
	c.Deliver(acceptedAnswer("dyn@l0", "nginx"))
	if got := w.recv().GetResponse(); got.GetRequestId() != "l0" || got.GetLogsRequestAccepted() == nil {
		t.Fatalf("the workload got %v, want the acceptance of its new l0", got)
	}
}

// TestLogCampaignsEndWhenTheWorkloadGoes: a workload that closes both its
// FIFOs is gone; its campaigns are cancelled. One that closes `output`
// but still reads `input` keeps them.
func TestLogCampaignsEndWhenTheWorkloadGoes(t *testing.T) {
	c, f, w := newSession(t)
	openCampaigns(t, c, f, w, 2)
	// Closing and reopening `output` while reading `input`: kept. The
	// request after it is read after the end of the first writer.
	w.reconnect()
	w.send(requestMsg(&ankbase.Request{RequestId: "q", RequestContent: readReq("desiredState.workloads.nginx").RequestContent}))
	if got := f.next(t); got.GetRequestId() != "dyn@q" {
		t.Fatalf("forwarded %v, want only the request", got)
	}
	f.none(t)
	// Both closed: the workload is gone.
	w.closeInput()
	_ = w.out.Close()
	w.out = nil
	if got := cancels(t, f, 2); !slices.Equal(got, campaignIDs(2)) {
		t.Fatalf("cancelled %v", got)
	}
}

// TestLogCampaignsEndWithTheInstance: stopping an instance, or serving it
// with other rules, cancels its workload's campaigns.
func TestLogCampaignsEndWithTheInstance(t *testing.T) {
	t.Run("closed", func(t *testing.T) {
		c, f, w := newSession(t)
		openCampaigns(t, c, f, w, 2)
		c.Close(testInst)
		if got := cancels(t, f, 2); !slices.Equal(got, campaignIDs(2)) {
			t.Fatalf("cancelled %v", got)
		}
	})
	t.Run("rules changed", func(t *testing.T) {
		c, f, w := newSession(t)
		openCampaigns(t, c, f, w, 2)
		other := readAccess.Clone()
		other.DenyRules = append(other.DenyRules, logRuleOf("also-secret"))
		if _, err := c.Open(testInst, other, nil); err != nil {
			t.Fatal(err)
		}
		if got := cancels(t, f, 2); !slices.Equal(got, campaignIDs(2)) {
			t.Fatalf("cancelled %v", got)
		}
	})
}

func TestDefaultWorkloadCap(t *testing.T) {
	if DefaultMaxLogCampaigns != workloadCap {
		t.Fatalf("DefaultMaxLogCampaigns %d, the tests assume %d", DefaultMaxLogCampaigns, workloadCap)
	}
}

// TestLogStats: the open campaigns and the refusals are counted, with the
// cap of the configuration.
func TestLogStats(t *testing.T) {
	f := newForwarder()
	c := New(Config{Agent: "agent_A", RunFolder: t.TempDir(), Forward: f.forward, Logger: quiet, MaxLogCampaigns: 2})
	t.Cleanup(c.Shutdown)
	dir, err := c.Open(testInst, readAccess, nil)
	if err != nil {
		t.Fatal(err)
	}
	w := connect(t, dir)
	w.handshake()
	openCampaigns(t, c, f, w, 2)
	w.send(requestMsg(followReq("x", "nginx")))
	if got := w.recv().GetResponse().GetError().GetMessage(); !strings.Contains(got, "has 2 log campaigns open") {
		t.Fatalf("refusal %q", got)
	}
	if got := c.LogStats(); got != (LogStats{Open: 2, Refused: 1}) {
		t.Fatalf("stats %+v", got)
	}
	c.Close(testInst)
	cancels(t, f, 2)
	if got := c.LogStats(); got != (LogStats{Open: 0, Refused: 1}) {
		t.Fatalf("after Close: %+v", got)
	}
}

// TestServerGone: when the agent's stream ends the server has ended the
// workloads' campaigns itself; the sessions forget them without cancels,
// and each workload gets the end of what it waited for.
func TestServerGone(t *testing.T) {
	c, f, w := newSession(t)
	w.send(requestMsg(followReq("two", "nginx", "redis")))
	f.next(t)
	c.Deliver(acceptedAnswer("dyn@two", "nginx", "redis"))
	w.recv()
	c.Deliver(stopped("dyn@two", "nginx"))
	w.recv()
	w.send(requestMsg(followReq("waiting", "nginx")))
	f.next(t)

	c.ServerGone()
	stop := w.recv().GetResponse()
	if stop.GetRequestId() != "two" || stop.GetLogsStopResponse().GetWorkloadName().GetWorkloadName() != "redis" {
		t.Fatalf("first answer %v, want the stop of redis", stop)
	}
	if e := w.recv().GetResponse(); e.GetRequestId() != "waiting" || !strings.Contains(e.GetError().GetMessage(), "lost its connection to the server") {
		t.Fatalf("second answer %v", e)
	}
	if got := c.LogStats().Open; got != 0 {
		t.Fatalf("%d campaigns left", got)
	}
	// Nothing to cancel when the session ends now.
	c.Close(testInst)
	f.none(t)
}

// TestAnswersFollowTheCampaign: during an update two instances of a
// workload are served; a campaign's answers go to the instance that
// opened it, other answers to the newer one.
func TestAnswersFollowTheCampaign(t *testing.T) {
	c, f, w := newSession(t)
	openCampaigns(t, c, f, w, 1)
	newer := testInst
	newer.ID = "4567cdef"
	dir, err := c.Open(newer, readAccess, nil)
	if err != nil {
		t.Fatal(err)
	}
	w2 := connect(t, dir)
	w2.handshake()
	c.Deliver(logEntries("dyn@l0", 10))
	if got := w.recv().GetResponse(); got.GetRequestId() != "l0" || got.GetLogEntriesResponse() == nil {
		t.Fatalf("the older instance got %v", got)
	}
	c.Deliver(completeStateResponse("dyn@q"))
	if got := w2.recv().GetResponse(); got.GetRequestId() != "q" {
		t.Fatalf("the newer instance got %v", got)
	}
}
