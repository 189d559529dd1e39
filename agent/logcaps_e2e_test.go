package agent

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"golang.org/x/sys/unix"
	"google.golang.org/protobuf/encoding/protodelim"

	"github.com/grapnel-io/grapnel/agent/controlif"
	"github.com/grapnel-io/grapnel/internal/testwait"
	"github.com/grapnel-io/grapnel/rpc"
	"github.com/grapnel-io/grapnel/rpc/ankbase"
	"github.com/grapnel-io/grapnel/rpc/controlapi"
	"github.com/grapnel-io/grapnel/server/testcluster"
	"github.com/grapnel-io/grapnel/state"
)

// logReaders: target runs quietly; reader1 and reader2 may read its logs
// through their control interfaces. Each writes its pid into dir.
func logReaders(dir string) string {
	return fmt.Sprintf(`apiVersion: v1
workloads:
  target:
    runtime: process
    agent: agent_A
    runtimeConfig: |
      command: /bin/sh
      args: ["-c", "echo $$ > %[1]s/target.pid; echo up; exec sleep 600"]
  reader1:
    runtime: process
    agent: agent_A
    runtimeConfig: |
      command: /bin/sh
      args: ["-c", "echo $$ > %[1]s/reader1.pid; exec sleep 600"]
    controlInterfaceAccess:
      allowRules:
        - type: LogRule
          workloadNames: ["target"]
  reader2:
    runtime: process
    agent: agent_A
    runtimeConfig: |
      command: /bin/sh
      args: ["-c", "echo $$ > %[1]s/reader2.pid; exec sleep 600"]
    controlInterfaceAccess:
      allowRules:
        - type: LogRule
          workloadNames: ["target"]
`, dir)
}

// ciClient is the test playing a workload on its control interface.
type ciClient struct {
	t   *testing.T
	out *os.File
	in  *os.File
	r   *bufio.Reader
}

// instanceOf is the one instance of a workload in the leader's state.
func instanceOf(t *testing.T, cl *testcluster.Cluster, name string) state.InstanceName {
	t.Helper()
	var inst state.InstanceName
	testwait.For(t, runWithin, func() bool {
		read(cl, func(st *state.Store) {
			if l := st.Instances(name); len(l) == 1 {
				inst = l[0]
			}
		})
		return inst.ID != ""
	}, "the instance of %s", name)
	return inst
}

// openCI opens a workload's FIFOs as the workload would.
func openCI(t *testing.T, ctl *controlif.Interfaces, inst state.InstanceName) *ciClient {
	t.Helper()
	dir := ctl.Dir(inst)
	var out *os.File
	testwait.For(t, runWithin, func() bool {
		var err error
		out, err = os.OpenFile(filepath.Join(dir, "output"), os.O_WRONLY|unix.O_NONBLOCK, 0)
		return err == nil
	}, "the control interface of %s", inst)
	in, err := os.OpenFile(filepath.Join(dir, "input"), os.O_RDONLY|unix.O_NONBLOCK, 0)
	if err != nil {
		t.Fatal(err)
	}
	c := &ciClient{t: t, out: out, in: in, r: bufio.NewReader(in)}
	t.Cleanup(c.close)
	c.hello()
	return c
}

// hello starts a connection; what the FIFO still held from the one
// before is skipped.
func (c *ciClient) hello() {
	c.t.Helper()
	c.send(&controlapi.ToAnkaios{ToAnkaiosEnum: &controlapi.ToAnkaios_Hello{Hello: &controlapi.Hello{ProtocolVersion: rpc.ProtocolVersion}}})
	for c.recv().GetControlInterfaceAccepted() == nil {
	}
}

func (c *ciClient) close() {
	if c.out != nil {
		_ = c.out.Close()
		_ = c.in.Close()
		c.out = nil
	}
}

func (c *ciClient) send(m *controlapi.ToAnkaios) {
	c.t.Helper()
	if _, err := protodelim.MarshalTo(c.out, m); err != nil {
		c.t.Fatalf("write output: %v", err)
	}
}

func (c *ciClient) recv() *controlapi.FromAnkaios {
	c.t.Helper()
	deadline := time.Now().Add(runWithin)
	_ = c.in.SetReadDeadline(deadline)
	var m *controlapi.FromAnkaios
	testwait.For(c.t, runWithin, func() bool {
		m = &controlapi.FromAnkaios{}
		err := protodelim.UnmarshalFrom(c.r, m)
		// EOF: no writer on `input` for a moment; keep reading.
		if err != nil && !errors.Is(err, io.EOF) {
			c.t.Fatalf("read input: %v", err)
		}
		return err == nil
	}, "a message on the input")
	return m
}

// follow asks for the logs of target under id.
func (c *ciClient) follow(id string, target state.InstanceName) {
	c.t.Helper()
	follow := true
	c.send(&controlapi.ToAnkaios{ToAnkaiosEnum: &controlapi.ToAnkaios_Request{Request: &ankbase.Request{
		RequestId: id, RequestContent: &ankbase.Request_LogsRequest{LogsRequest: &ankbase.LogsRequest{
			WorkloadNames: []*ankbase.WorkloadInstanceName{rpc.InstanceNameToProto(target)}, Follow: &follow}}}}})
}

// answers reads until every id has its first answer (an acceptance or an
// error) and returns them by id; log entries and stops are collected
// apart, by id.
func (c *ciClient) answers(ids ...string) (first map[string]*ankbase.Response, later map[string][]*ankbase.Response) {
	c.t.Helper()
	first, later = map[string]*ankbase.Response{}, map[string][]*ankbase.Response{}
	for len(first) < len(ids) {
		r := c.recv().GetResponse()
		switch {
		case r == nil:
			c.t.Fatal("a message that is no response")
		case r.GetLogsRequestAccepted() != nil || r.GetError() != nil:
			first[r.GetRequestId()] = r
		default:
			later[r.GetRequestId()] = append(later[r.GetRequestId()], r)
		}
	}
	return first, later
}

func ids(prefix string, n int) []string {
	var out []string
	for i := range n {
		out = append(out, fmt.Sprintf("%s%d", prefix, i))
	}
	return out
}

// TestLogCampaignFlood replays issue 27 (point 5) against a real server
// and agent: a workload whose only right is reading logs opens follow
// campaigns without end. It gets the agent's per-workload cap, its
// campaigns end at the server and on the agent when it says Hello again
// or closes its FIFOs, and a second workload meets the agent's own cap.
func TestLogCampaignFlood(t *testing.T) {
	const agentCap = 10
	cl := testcluster.New(t, 1)
	dir := workDir(t)
	for _, w := range []string{"target", "reader1", "reader2"} {
		killAtEnd(t, filepath.Join(dir, w+".pid"))
	}
	a := startAgent(t, cl, "agent_A", filepath.Join(dir, "run"), func(c *Config) { c.MaxLogCampaigns = agentCap })
	testwait.For(t, connectWithin, func() bool { return connected(cl, "agent_A") }, "agent_A connected")
	apply(t, cl, logReaders(dir))
	for _, w := range []string{"target", "reader1", "reader2"} {
		waitState(t, cl, "agent_A", w, "Running(Ok)")
	}
	target := instanceOf(t, cl, "target")
	running := func(campaigns, open int) func() bool {
		return func() bool {
			return a.campaigns.Stats().Campaigns == campaigns && a.ctl.LogStats().Open == open
		}
	}

	// Past the workload's cap: refused by the agent at once.
	r1 := openCI(t, a.ctl, instanceOf(t, cl, "reader1"))
	for _, id := range ids("a", 12) {
		r1.follow(id, target)
	}
	first, _ := r1.answers(ids("a", 12)...)
	refused := 0
	for _, r := range first {
		if msg := r.GetError().GetMessage(); msg != "" {
			if !strings.Contains(msg, "workload 'reader1' has 8 log campaigns open") {
				t.Fatalf("refusal %q", msg)
			}
			refused++
		}
	}
	if refused != 4 {
		t.Fatalf("%d of 12 requests refused, want 4", refused)
	}
	testwait.For(t, runWithin, running(8, 8), "8 campaigns on the agent")

	// A new Hello: the campaigns end at the server, which tells the agent.
	r1.hello()
	testwait.For(t, runWithin, running(0, 0), "no campaign after the new Hello (agent: %s)", testwait.Lazy(func() string {
		return fmt.Sprint(a.campaigns.Stats())
	}))

	// The workload closes its FIFOs: gone, its campaigns end.
	for _, id := range ids("b", 3) {
		r1.follow(id, target)
	}
	r1.answers(ids("b", 3)...)
	testwait.For(t, runWithin, running(3, 3), "3 campaigns")
	r1.close()
	testwait.For(t, runWithin, running(0, 0), "no campaign after the FIFOs closed")

	// Two workloads ask for more than the agent runs: the agent's cap.
	r1 = openCI(t, a.ctl, instanceOf(t, cl, "reader1"))
	for _, id := range ids("c", 8) {
		r1.follow(id, target)
	}
	r1.answers(ids("c", 8)...)
	testwait.For(t, runWithin, running(8, 8), "reader1's 8 campaigns")
	r2 := openCI(t, a.ctl, instanceOf(t, cl, "reader2"))
	for _, id := range ids("d", 8) {
		r2.follow(id, target)
	}
	first, later := r2.answers(ids("d", 8)...)
	for id, r := range first {
		if r.GetLogsRequestAccepted() == nil {
			t.Fatalf("%s: the server accepts, the agent refuses: %v", id, r)
		}
	}
	// Six of reader2's campaigns get the agent's refusal as their line,
	// then their stop; the workload's slots are freed by the stops.
	refusedBy := map[string]bool{}
	for len(refusedBy) < 6 {
		for id, rs := range later {
			for _, r := range rs {
				if r.GetLogsStopResponse() != nil {
					refusedBy[id] = true
				}
				for _, e := range r.GetLogEntriesResponse().GetLogEntries() {
					if strings.Contains(e.GetMessage(), "log campaign refused: the agent 'agent_A' runs 10 log campaigns") {
						refusedBy[id] = true
					}
				}
			}
		}
		if len(refusedBy) < 6 {
			r := r2.recv().GetResponse()
			later[r.GetRequestId()] = append(later[r.GetRequestId()], r)
		}
	}
	testwait.For(t, runWithin, running(agentCap, 10), "the agent at its cap")
	if s := a.campaigns.Stats(); s.RefusedCampaigns != 6 || s.Sources != agentCap {
		t.Fatalf("agent %+v", s)
	}
}
