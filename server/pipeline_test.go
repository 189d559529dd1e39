package server

import (
	"fmt"
	"strings"
	"sync"
	"testing"

	"github.com/grapnel-io/grapnel/fsm"
	"github.com/grapnel-io/grapnel/internal/testwait"
	"github.com/grapnel-io/grapnel/rpc"
	"github.com/grapnel-io/grapnel/rpc/ankbase"
	"github.com/grapnel-io/grapnel/rpc/grpcapi"
	"github.com/grapnel-io/grapnel/rpc/wire"
	"github.com/grapnel-io/grapnel/state"
)

// workloadUpdate is an UpdateStateRequest that sets one workload on
// agent_A to a runtimeConfig.
func workloadUpdate(t testing.TB, id, name, runtimeConfig string) *grpcapi.ToServer {
	t.Helper()
	tree := state.Tree{"desiredState": state.Tree{"apiVersion": "v1", "workloads": state.Tree{name: map[string]any{
		"runtime": "podman", "agent": "agent_A", "runtimeConfig": runtimeConfig}}}}
	cs, err := rpc.CompleteStateFromTree(tree)
	if err != nil {
		t.Fatal(err)
	}
	return &grpcapi.ToServer{ToServerEnum: &grpcapi.ToServer_Request{Request: &ankbase.Request{RequestId: id,
		RequestContent: &ankbase.Request_UpdateStateRequest{UpdateStateRequest: &ankbase.UpdateStateRequest{
			NewState: cs, UpdateMask: []string{"desiredState.workloads." + name}}}}}}
}

func isResponse(m *grpcapi.FromServer) bool { return m.GetResponse() != nil }

// responses takes the next n responses in the order they arrived.
func (c *testConn) responses(n int) []*ankbase.Response {
	c.t.Helper()
	out := make([]*ankbase.Response, n)
	for i := range out {
		out[i] = c.expect(fmt.Sprintf("response %d of %d", i+1, n), isResponse).GetResponse()
	}
	return out
}

// Several CLIs send many updates at once without waiting for answers. The
// leader plans each on the state that includes the ones proposed before it,
// so every answer and every message to the agent is what sequential
// application gives: each update replaces exactly the instance the one
// before it added. Answers come in request order.
//
// swdd~server-provides-update-desired-state-interface~1
// swdd~server-update-state-success-response~1
// swdd~server-detects-changed-workload~1
func TestPipelinedUpdatesAcknowledgedInOrder(t *testing.T) {
	ts := startServer(t, nil)
	agent := ts.agent("agent_A", nil)
	const clients, perClient = 8, 25
	clis := make([]*testConn, clients)
	for i := range clis {
		clis[i] = ts.cli()
	}
	inst := func(i, k int) state.InstanceName {
		return state.NewInstanceName(fmt.Sprintf("w%d", i), "agent_A", fmt.Sprintf("v%d", k))
	}
	for k := 0; k < perClient; k++ {
		for i, c := range clis {
			c.send(workloadUpdate(t, fmt.Sprintf("u%d", k), fmt.Sprintf("w%d", i), fmt.Sprintf("v%d", k)))
		}
	}
	for i, c := range clis {
		for k, r := range c.responses(perClient) {
			if r.GetRequestId() != fmt.Sprintf("u%d", k) {
				t.Fatalf("client %d: answer %d is for %s", i, k, r.GetRequestId())
			}
			ok := r.GetUpdateStateSuccess()
			if ok == nil {
				t.Fatalf("client %d update %d: %v", i, k, r)
			}
			wantDeleted := []string{}
			if k > 0 {
				wantDeleted = []string{inst(i, k-1).String()}
			}
			if fmt.Sprint(ok.GetAddedWorkloads()) != fmt.Sprint([]string{inst(i, k).String()}) ||
				fmt.Sprint(ok.GetDeletedWorkloads()) != fmt.Sprint(wantDeleted) {
				t.Fatalf("client %d update %d: added %v deleted %v", i, k, ok.GetAddedWorkloads(), ok.GetDeletedWorkloads())
			}
		}
	}
	// The agent is told every step, in order, for every workload.
	next := make([]int, clients)
	for n := 0; n < clients*perClient; n++ {
		uw := agent.expect("UpdateWorkload", isUpdateWorkload).GetUpdateWorkload()
		if len(uw.GetAddedWorkloads()) != 1 {
			t.Fatalf("agent got %v", uw)
		}
		added := rpc.InstanceNameFromProto(uw.GetAddedWorkloads()[0].GetInstanceName())
		var i int
		if _, err := fmt.Sscanf(added.WorkloadName, "w%d", &i); err != nil {
			t.Fatal(err)
		}
		if added != inst(i, next[i]) {
			t.Fatalf("agent got %v, want step %d of w%d", added, next[i], i)
		}
		if k := next[i]; k > 0 && (len(uw.GetDeletedWorkloads()) != 1 ||
			rpc.InstanceNameFromProto(uw.GetDeletedWorkloads()[0].GetInstanceName()) != inst(i, k-1)) {
			t.Fatalf("agent got deletions %v with step %d of w%d", uw.GetDeletedWorkloads(), k, i)
		}
		next[i]++
	}
	ts.store(func(s *state.Store) {
		if s.DesiredSeq != clients*perClient {
			t.Errorf("desired seq %d, want %d", s.DesiredSeq, clients*perClient)
		}
		for i := 0; i < clients; i++ {
			if r := s.Rendered[fmt.Sprintf("w%d", i)]; r.Instance != inst(i, perClient-1) {
				t.Errorf("w%d rendered as %v", i, r.Instance)
			}
		}
	})
}

// A Raft apply timeout of 1 ns makes proposals fail at random (Raft's
// enqueue timeout) while others commit. However they fall, the answers
// form one chain: every acknowledged update deletes exactly the instance
// the previously acknowledged one added, so none was planned on top of a
// failed one. Updates that the FSM refused because an earlier one failed
// say so.
func TestFailedEntryDoesNotLetLaterOnesBuildOnIt(t *testing.T) {
	ts := startServerCfg(t, t.TempDir(), nil, func(c *Config) { c.ApplyTimeout = 1 })
	cli := ts.cli()
	var (
		last                          string // instance added by the last acknowledged update
		failedSinceAck                bool
		acked, failed, refusedEarlier int
	)
	const perRound = 30
	for round := 0; round < 200 && (acked < 5 || failed == 0 || refusedEarlier == 0); round++ {
		for k := 0; k < perRound; k++ {
			cli.send(workloadUpdate(t, fmt.Sprintf("r%d-%d", round, k), "w", fmt.Sprintf("v%d-%d", round, k)))
		}
		for k, r := range cli.responses(perRound) {
			if want := fmt.Sprintf("r%d-%d", round, k); r.GetRequestId() != want {
				t.Fatalf("answer for %s, want %s", r.GetRequestId(), want)
			}
			if ok := r.GetUpdateStateSuccess(); ok != nil {
				wantDeleted := []string{}
				if last != "" {
					wantDeleted = []string{last}
				}
				if fmt.Sprint(ok.GetDeletedWorkloads()) != fmt.Sprint(wantDeleted) {
					t.Fatalf("update %s deleted %v, but the last acknowledged one added %q", r.GetRequestId(), ok.GetDeletedWorkloads(), last)
				}
				last = ok.GetAddedWorkloads()[0]
				acked++
				failedSinceAck = false
				continue
			}
			msg := r.GetError().GetMessage()
			switch {
			case !strings.HasPrefix(msg, "Update failed: "):
				t.Fatalf("update %s: %v", r.GetRequestId(), r)
			case strings.Contains(msg, errEarlierFailed.Error()):
				if !failedSinceAck {
					t.Fatalf("update %s blames an earlier failure, but none happened since the last acknowledged one", r.GetRequestId())
				}
				refusedEarlier++
			default:
				failed++
			}
			failedSinceAck = true
		}
	}
	if acked < 5 || failed == 0 || refusedEarlier == 0 {
		t.Fatalf("the run did not cover every outcome: %d acknowledged, %d failed, %d refused after a failure", acked, failed, refusedEarlier)
	}
	ts.store(func(s *state.Store) {
		if got := s.Rendered["w"].Instance.String(); got != last {
			t.Errorf("stored instance %s, last acknowledged %s", got, last)
		}
		if s.DesiredSeq != uint64(acked) {
			t.Errorf("desired seq %d, %d updates acknowledged", s.DesiredSeq, acked)
		}
	})
	t.Logf("%d acknowledged, %d failed, %d refused after a failure", acked, failed, refusedEarlier)
}

// An entry the leader did not plan (proposed behind its back) takes the
// sequence number the leader's next update expected: the FSM refuses that
// update, the leader answers with the reason, rebuilds its speculative
// state from the FSM, and the update after it builds on the foreign one.
func TestUpdateOutOfSequenceRefused(t *testing.T) {
	ts := startServer(t, nil)
	cli := ts.cli()
	if r := cli.update(manifest(t, nginx), "desiredState.workloads.nginx"); r.GetUpdateStateSuccess() == nil {
		t.Fatalf("first update: %v", r)
	}
	var seq uint64
	ts.store(func(s *state.Store) { seq = s.DesiredSeq })
	buf, err := fsm.Encode(&fsm.UpdateDesiredStateRequest{Seq: seq + 1,
		Update: state.DesiredUpdate{PutConfigs: map[string]any{"foreign": "x"}}})
	if err != nil {
		t.Fatal(err)
	}
	if _, _, err := ts.node.Apply(buf, 5e9); err != nil {
		t.Fatal(err)
	}
	config := func(v string) state.Tree {
		return state.Tree{"desiredState": state.Tree{"configs": state.Tree{"mine": v}}}
	}
	r := cli.update(config("y"), "desiredState.configs.mine")
	if msg := r.GetError().GetMessage(); !strings.Contains(msg, "Update failed") || !strings.Contains(msg, fsm.ErrOutOfSequence.Error()) {
		t.Fatalf("update after the foreign entry: %v", r)
	}
	if r := cli.update(config("z"), "desiredState.configs.mine"); r.GetUpdateStateSuccess() == nil {
		t.Fatalf("update after the rebuild: %v", r)
	}
	cfgs := cli.get("desiredState.configs").GetDesiredState().GetConfigs().GetConfigs()
	if cfgs["foreign"].GetString_() != "x" || cfgs["mine"].GetString_() != "z" {
		t.Fatalf("configs %v", cfgs)
	}
	ts.store(func(s *state.Store) {
		if s.DesiredSeq != seq+2 {
			t.Errorf("desired seq %d, want %d", s.DesiredSeq, seq+2)
		}
	})
}

// An agent that connects while an update adding its workload commits
// learns of the workload exactly once: its ServerHello shows the committed
// state, and the update, settled on the leader loop after the hello, is
// not dispatched to it again.
//
// swdd~server-sends-all-workloads-on-start~2
func TestAgentHelloDuringCommitGetsWorkloadOnce(t *testing.T) {
	ts := startServer(t, nil)
	cli := ts.cli()
	cli.get()
	// The FSM applies the update, then waits in the observer, holding its
	// lock: the loop cannot settle the update yet, and a hello it handles
	// meanwhile waits to read the state with the update in it.
	applied, resume := make(chan struct{}), make(chan struct{})
	var once sync.Once
	ts.fsm.SetObserver(func(typ fsm.MessageType, _ uint64) {
		if typ == fsm.UpdateDesiredStatePackedType {
			once.Do(func() {
				close(applied)
				<-resume
			})
		}
	})
	cli.send(workloadUpdate(t, "add", "w", "x"))
	<-applied
	agent := ts.dial(wire.KindAgent)
	agent.send(&grpcapi.ToServer{ToServerEnum: &grpcapi.ToServer_AgentHello{AgentHello: &grpcapi.AgentHello{
		AgentName: "agent_A", ProtocolVersion: rpc.ProtocolVersion}}})
	testwait.For(t, 5e9, func() bool { return ts.srv.conns.agent("agent_A") != nil }, "agent stream registered")
	close(resume)
	hello := agent.expect("ServerHello", func(m *grpcapi.FromServer) bool { return m.GetServerHello() != nil }).GetServerHello()
	if r := cli.expect("answer", isResponse).GetResponse(); r.GetUpdateStateSuccess() == nil {
		t.Fatalf("update: %v", r)
	}
	cli.get()                // after the update settled
	agent.sync("dispatched") // after anything sent to the agent then
	times := len(hello.GetAddedWorkloads())
	for {
		m, ok := agent.tryExpect(0, isUpdateWorkload)
		if !ok {
			break
		}
		times += len(m.GetUpdateWorkload().GetAddedWorkloads())
	}
	if times != 1 {
		t.Fatalf("the agent was told %d times about its workload", times)
	}
}

// An update that changes nothing in the state the updates proposed before
// it will make is acknowledged only once they all committed: each update
// is sent twice in a row, and Raft's enqueue timeout of 1 ns fails
// proposals at random. A second copy acknowledged as a no-op (nothing
// added) while its first copy failed would acknowledge a state that never
// came to be; it must fail with the reason instead.
func TestUnchangedUpdateAfterAFailedOneFails(t *testing.T) {
	ts := startServerCfg(t, t.TempDir(), nil, func(c *Config) { c.ApplyTimeout = 1 })
	cli := ts.cli()
	refused, noops := 0, 0
	const perRound = 20
	for round := 0; round < 300 && (refused == 0 || noops == 0); round++ {
		for k := 0; k < perRound; k++ {
			for copyN := 0; copyN < 2; copyN++ {
				cli.send(workloadUpdate(t, fmt.Sprintf("r%d-%d-%d", round, k, copyN), "w", fmt.Sprintf("v%d-%d", round, k)))
			}
		}
		answers := cli.responses(2 * perRound)
		for k := 0; k < perRound; k++ {
			first, second := answers[2*k], answers[2*k+1]
			ok := second.GetUpdateStateSuccess()
			switch {
			case ok != nil && len(ok.GetAddedWorkloads()) == 0:
				if first.GetUpdateStateSuccess() == nil {
					t.Fatalf("%s acknowledged as unchanged, but %s, which was to make that state, failed: %v",
						second.GetRequestId(), first.GetRequestId(), first.GetError().GetMessage())
				}
				noops++
			case ok == nil && strings.Contains(second.GetError().GetMessage(), errPlannedOnFailed.Error()):
				if first.GetUpdateStateSuccess() != nil {
					t.Fatalf("%s blames a failed update, but %s was acknowledged", second.GetRequestId(), first.GetRequestId())
				}
				refused++
			}
		}
	}
	if refused == 0 || noops == 0 {
		t.Fatalf("the run did not cover both outcomes: %d unchanged acknowledged, %d refused after a failure", noops, refused)
	}
	t.Logf("%d unchanged acknowledged, %d refused after a failure", noops, refused)
}
