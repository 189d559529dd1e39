//go:build unix

package server

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"google.golang.org/protobuf/proto"

	"github.com/grapnel-io/grapnel/placement"
	"github.com/grapnel-io/grapnel/rpc"
	"github.com/grapnel-io/grapnel/rpc/ankbase"
	"github.com/grapnel-io/grapnel/rpc/grapnelpb"
	"github.com/grapnel-io/grapnel/rpc/grpcapi"
	"github.com/grapnel-io/grapnel/rpc/wire"
	"github.com/grapnel-io/grapnel/server/problems"
	"github.com/grapnel-io/grapnel/state"
)

// The leader loop serves every request and event in turn (loop.go,
// leader.go), so the longest one event can hold it is how long any
// request may wait behind another. BenchmarkLoopHold builds, for each
// kind of request or event the loop handles, the worst case the default
// limits allow, sends it to a real one-replica leader (Raft, gRPC,
// streams) and reports how long the loop was held, as the loop measures
// it (Server.observeLoop; grapnel_leader_loop_seconds):
//
//   - hold-p50-ms / hold-max-ms: the event that handled the request,
//     including the step after it (placement, problems, the next batch
//     of reports), over the operations;
//   - any-p50-ms / any-max-ms: the longest event of any kind the
//     operation caused until the loop was quiet again (the commit that
//     answers or broadcasts, a layout entry, ...);
//   - cpu-ns/op: the process's CPU, loop, Raft and the benchmark's own
//     clients together: an upper bound of the loop's.
//
// The limits are state.DefaultLimits and the server's defaults: 1,000
// workloads, 3 MiB of desired state, 3 MiB of rendered workloads per
// agent, 4 MiB messages, 512 streams, 64 instances per placed workload.

// loopAgents is how many agents the worlds connect: the 512 streams a
// replica holds by default, less a few for the clients.
const loopAgents = 500

// placedWorkload is a small placed workload asking for k instances.
func placedWorkload(i, k int) *state.Workload {
	return &state.Workload{Runtime: "podman", RestartPolicy: state.RestartNever,
		RuntimeConfig: fmt.Sprintf("image: busybox\ncommandArgs: [sleep, \"%d\"]\n", i),
		Tags:          map[string]string{placement.TagInstances: fmt.Sprint(k)}}
}

// placedState is n placed workloads of k instances each, numbered from
// first.
func placedState(first, n, k int) state.State {
	s := state.State{APIVersion: state.APIVersion, Workloads: map[string]*state.Workload{}}
	for i := first; i < first+n; i++ {
		s.Workloads[fmt.Sprintf("wl_%04d", i)] = placedWorkload(i, k)
	}
	return s
}

// loopWorld is a leader with agents and a client connected.
type loopWorld struct {
	ts     *testServer
	d      *benchDialer
	agents map[string]*benchConn
	names  []string
	cli    *benchConn
	pc     grapnelpb.PlanClient
	h      *holdLog
	last   []heldEvent
}

// newLoopWorld starts a leader at the default limits with n agents in 8
// risk groups and one CLI stream.
func newLoopWorld(b *testing.B, n int, mod func(*Config)) *loopWorld {
	ts := startServerCfg(b, b.TempDir(), nil, func(c *Config) {
		c.AgentReconnectGrace = -1 // an agent that goes is gone at once
		if mod != nil {
			mod(c)
		}
	})
	w := &loopWorld{ts: ts, d: newBenchDialer(b, ts.addr, 8), agents: map[string]*benchConn{}, pc: planClient(b, ts.addr)}
	for i := range n {
		name := fmt.Sprintf("agent_%03d", i)
		w.agents[name] = w.d.agent(name, map[string]string{placement.TagRiskGroup: fmt.Sprintf("rack_%d", i%8)})
		w.names = append(w.names, name)
	}
	w.cli = w.d.cli(false)
	w.h = watchLoop(b, ts)
	w.settle(b)
	return w
}

// settle waits for the loop to be quiet and forgets what it recorded.
func (w *loopWorld) settle(b *testing.B) []heldEvent { return quiesce(b, w.ts, w.pc, w.h) }

// fillPlaced adds 1,000 placed workloads of 64 instances, 250 per
// update: the most instances the defaults allow (64,000, each with a
// Pending(Initial) state), laid out as each update lands.
func (w *loopWorld) fillPlaced(b *testing.B) {
	for first := 0; first < 1000; first += 250 {
		s := placedState(first, 250, placement.MaxInstances)
		masks := make([]string, 0, 250)
		for n := range s.Workloads {
			masks = append(masks, "desiredState.workloads."+n)
		}
		if r := w.cli.update(s, masks...); r.GetUpdateStateSuccess() == nil {
			b.Fatalf("update: %v", r)
		}
		w.settle(b)
	}
	n := 0
	w.ts.store(func(st *state.Store) { n = len(st.States.All()) })
	if n != 1000*placement.MaxInstances {
		b.Fatalf("%d instances, want %d", n, 1000*placement.MaxInstances)
	}
}

// op runs one operation and returns its events until the loop is quiet.
func (w *loopWorld) op(b *testing.B, do func()) []heldEvent {
	w.settle(b)
	do()
	return w.settle(b)
}

// measure runs op b.N times and reports the hold of event and the
// longest event of each operation.
func (w *loopWorld) measure(b *testing.B, event string, op func(i int)) {
	var hold, any holdStats
	var worst heldEvent
	byEvent := map[string]time.Duration{}
	b.ResetTimer()
	done := cpuPerOp(b)
	for i := 0; i < b.N; i++ {
		evs := w.op(b, func() { op(i) })
		w.last = evs
		for _, e := range evs {
			byEvent[e.event] = max(byEvent[e.event], e.held)
		}
		hold.add(maxHeld(evs, event))
		l := longest(evs)
		any.add(l.held)
		if l.held > worst.held {
			worst = l
		}
	}
	b.StopTimer()
	done()
	hold.report(b, "hold")
	any.report(b, "any")
	b.Logf("%s: longest event %s %v; the longest of each kind: %v", b.Name(), worst.event, worst.held, byEvent)
	if testing.Verbose() {
		b.Logf("last operation's events: %v", w.last)
	}
}

func completeStateRequest(masks []string, subscribe bool) *ankbase.Request {
	return &ankbase.Request{RequestContent: &ankbase.Request_CompleteStateRequest{CompleteStateRequest: &ankbase.CompleteStateRequest{
		FieldMask: masks, SubscribeForEvents: subscribe}}}
}

// BenchmarkLoopHoldPlaced measures the requests and events of a cluster
// at the default limits' most instances: 500 agents in 8 risk groups,
// 1,000 placed workloads of 64 instances each.
func BenchmarkLoopHoldPlaced(b *testing.B) {
	w := newLoopWorld(b, loopAgents, nil)
	w.fillPlaced(b)
	var all []state.InstanceName
	w.ts.store(func(st *state.Store) {
		for _, ws := range st.States.All() {
			all = append(all, ws.Instance)
		}
	})
	agentsBefore := len(w.names)

	b.Run("complete_state/all", func(b *testing.B) {
		w.measure(b, "complete_state", func(int) { w.cli.request(completeStateRequest(nil, false)) })
	})
	b.Run("complete_state/masks", func(b *testing.B) {
		w.measure(b, "complete_state", func(int) {
			w.cli.request(completeStateRequest([]string{"desiredState.workloads", "workloadStates", "agents"}, false))
		})
	})
	b.Run("complete_state/subscribe", func(b *testing.B) {
		w.measure(b, "complete_state", func(int) {
			r := w.cli.request(completeStateRequest([]string{"workloadStates"}, true))
			w.cli.request(&ankbase.Request{RequestId: r.GetRequestId(), RequestContent: &ankbase.Request_EventsCancelRequest{EventsCancelRequest: &ankbase.EventsCancelRequest{}}})
		})
	})
	b.Run("logs/every_instance", func(b *testing.B) {
		// As many instance names as a 4 MiB message carries.
		var names []*ankbase.WorkloadInstanceName
		size := 0
		for _, in := range all {
			p := rpc.InstanceNameToProto(in)
			size += len(in.WorkloadName) + len(in.AgentName) + len(in.ID) + 12
			if size > rpc.MaxMessageBytes-1024 {
				break
			}
			names = append(names, p)
		}
		b.Logf("%d instance names", len(names))
		w.measure(b, "logs", func(int) {
			r := w.cli.request(&ankbase.Request{RequestContent: &ankbase.Request_LogsRequest{LogsRequest: &ankbase.LogsRequest{WorkloadNames: names}}})
			if r.GetLogsRequestAccepted() == nil {
				b.Fatalf("logs: %v", r)
			}
			w.cli.request(&ankbase.Request{RequestId: r.GetRequestId(), RequestContent: &ankbase.Request_LogsCancelRequest{LogsCancelRequest: &ankbase.LogsCancelRequest{}}})
		})
	})
	b.Run("log_entries/largest", func(b *testing.B) {
		// An agent forwards a 4 MiB batch of log lines of its 128
		// instances to a campaign that asked for them.
		name := w.names[0]
		var mine []*ankbase.WorkloadInstanceName
		for _, in := range all {
			if in.AgentName == name {
				mine = append(mine, rpc.InstanceNameToProto(in))
			}
		}
		w.measure(b, "log_entries", func(int) {
			r := w.cli.request(&ankbase.Request{RequestContent: &ankbase.Request_LogsRequest{LogsRequest: &ankbase.LogsRequest{WorkloadNames: mine}}})
			if r.GetLogsRequestAccepted() == nil {
				b.Fatalf("logs: %v", r)
			}
			// The agent's own id for the campaign: the client's, prefixed
			// with the client's connection.
			lr := w.agents[name].wait("the logs request", func(m *grpcapi.FromServer) bool {
				return strings.HasSuffix(m.GetLogsRequest().GetRequestId(), "@"+r.GetRequestId())
			}).GetLogsRequest()
			var entries []*ankbase.LogEntry
			for size := 0; size < rpc.MaxMessageBytes-(256<<10); {
				e := &ankbase.LogEntry{WorkloadName: mine[len(entries)%len(mine)], Message: "a log line of a workload"}
				entries = append(entries, e)
				size += proto.Size(e) + 4
			}
			w.agents[name].send(&grpcapi.ToServer{ToServerEnum: &grpcapi.ToServer_LogEntriesResponse{LogEntriesResponse: &grpcapi.LogEntriesResponse{
				RequestId: lr.GetRequestId(), LogEntriesResponse: &ankbase.LogEntriesResponse{LogEntries: entries}}}})
			w.cli.wait("the log lines", func(m *grpcapi.FromServer) bool {
				return m.GetResponse().GetRequestId() == r.GetRequestId() && m.GetResponse().GetLogEntriesResponse() != nil
			})
			w.cli.request(&ankbase.Request{RequestId: r.GetRequestId(), RequestContent: &ankbase.Request_LogsCancelRequest{LogsCancelRequest: &ankbase.LogsCancelRequest{}}})
		})
	})
	b.Run("rebuild/clone_store", func(b *testing.B) {
		// What a new term, and the end of a failure or a restore, cost
		// the loop: a copy of the store without its history
		// (projected.reload); measured directly.
		var ms holdStats
		for b.Loop() {
			t0 := time.Now()
			w.ts.fsm.Read(func(st *state.Store, _ uint64) { _ = st.CloneWithoutHistory() })
			ms.add(time.Since(t0))
		}
		ms.report(b, "hold")
	})
	b.Run("problems/detect", func(b *testing.B) {
		// The problems detector over the whole store, which the step
		// after an event runs when the store changed (problems.go);
		// measured directly, with the cache of what it derives from the
		// desired state cold.
		facts := problems.Facts{NowMs: time.Now().UnixMilli(), Connected: map[string]bool{}, InGrace: map[string]bool{}}
		for _, n := range w.names {
			facts.Connected[n] = true
		}
		var ms holdStats
		for b.Loop() {
			t0 := time.Now()
			w.ts.fsm.Read(func(st *state.Store, _ uint64) {
				var cache problems.Cache
				problems.DetectCached(st, facts, &cache, 0)
			})
			ms.add(time.Since(t0))
		}
		ms.report(b, "hold")
	})
	b.Run("agent_hello/new_agent", func(b *testing.B) {
		// A new agent gets the states of all 64,000 instances of the
		// others, enters the agent map, and the allocator runs.
		w.measure(b, "agent_hello", func(i int) {
			name := fmt.Sprintf("new_%04d", i)
			c := w.d.agent(name, nil)
			c.send(&grpcapi.ToServer{ToServerEnum: &grpcapi.ToServer_Goodbye{Goodbye: &grpcapi.Goodbye{}}})
			c.close()
		})
	})
	b.Run("agent_gone/128_instances_move", func(b *testing.B) {
		// An agent hosting 128 instances leaves: its instances become
		// AgentDisconnected and are placed on others.
		w.measure(b, "agent_gone", func(int) {
			name := w.names[len(w.names)-1]
			w.names = w.names[:len(w.names)-1]
			c := w.agents[name]
			c.send(&grpcapi.ToServer{ToServerEnum: &grpcapi.ToServer_Goodbye{Goodbye: &grpcapi.Goodbye{}}})
			c.close()
			<-c.ended
		})
	})
	b.Logf("agents %d -> %d", agentsBefore, len(w.names))
	b.Run("agent_mode/disable_128_instances", func(b *testing.B) {
		w.measure(b, "agent_mode", func(i int) {
			name := w.names[i%len(w.names)]
			for _, m := range []state.AgentMode{state.ModeDisabled, state.ModeActive} {
				if err := w.ts.srv.setAgentMode(context.Background(), name, m, "bench", true); err != nil {
					b.Fatal(err)
				}
			}
		})
	})
	b.Run("workload_states/largest_report", func(b *testing.B) {
		// One agent reports a 4 MiB message of states: its own
		// instances and as many more (of instances nobody knows) as fit.
		w.measure(b, "workload_states", func(i int) {
			name := w.names[i%len(w.names)]
			var ws []state.WorkloadState
			size := 0
			for _, in := range all {
				if in.AgentName == name {
					ws = append(ws, state.WorkloadState{Instance: in, State: state.RunningOk})
				}
			}
			own := len(ws)
			for j := 0; size < rpc.MaxMessageBytes-(64<<10); j++ {
				in := state.InstanceName{WorkloadName: fmt.Sprintf("g%d_%d", i, j), AgentName: name, ID: "x"}
				ws = append(ws, state.WorkloadState{Instance: in, State: state.RunningOk})
				size += len(in.WorkloadName) + len(name) + 20
			}
			msg := &grpcapi.ToServer{ToServerEnum: &grpcapi.ToServer_UpdateWorkloadState{UpdateWorkloadState: &grpcapi.UpdateWorkloadState{
				WorkloadStates: rpc.WorkloadStatesToProto(ws), GrapnelGeneration: uint64(i + 2)}}}
			for n := proto.Size(msg); n > rpc.MaxMessageBytes-1024; n = proto.Size(msg) {
				u := msg.GetUpdateWorkloadState()
				u.WorkloadStates = u.WorkloadStates[:len(u.WorkloadStates)*(rpc.MaxMessageBytes-1024)/n]
			}
			if i == 0 {
				b.Logf("%d states (%d of the agent's instances), %d bytes", len(msg.GetUpdateWorkloadState().GetWorkloadStates()), own, proto.Size(msg))
			}
			w.agents[name].send(msg)
			w.agents[name].sync()
		})
	})
	b.Run("plan_dry_run/input", func(b *testing.B) {
		// Deleting one placed workload: the loop takes the planning view
		// of the whole projected store; the plan runs off the loop.
		req := replaceAll(b, "apiVersion: v1\nworkloads: {}\n")
		req.UpdateMask = []string{"desiredState.workloads.wl_0000"}
		w.measure(b, "plan_dry_run", func(int) {
			if _, err := w.pc.DryRun(context.Background(), &grapnelpb.PlanRequest{Update: req}); err != nil {
				b.Fatal(err)
			}
		})
	})
	b.Run("plan_revision", func(b *testing.B) {
		w.measure(b, "plan_revision", func(int) {})
	})
	b.Run("resync", func(b *testing.B) {
		w.measure(b, "resync", func(i int) {
			if err := w.ts.srv.resyncAgent(context.Background(), w.names[i%len(w.names)]); err != nil {
				b.Fatal(err)
			}
		})
	})
}

// BenchmarkLoopHoldPlacement is the allocator's worst run at the
// default limits: one update adds 1,000 placed workloads of 64
// instances to 500 connected agents in 8 risk groups, and the leader
// lays out 64,000 instances in the step after it, proposed in entries
// of 4,096 (placementChangesPerEntry) whose commits dispatch them; the
// next update deletes them again.
func BenchmarkLoopHoldPlacement(b *testing.B) {
	w := newLoopWorld(b, loopAgents, nil)
	s := placedState(0, 1000, placement.MaxInstances)
	empty := state.State{APIVersion: state.APIVersion, Workloads: map[string]*state.Workload{}}
	var add, del, commit holdStats
	b.ResetTimer()
	done := cpuPerOp(b)
	for i := 0; i < b.N; i++ {
		w.settle(b)
		if r := w.cli.update(s, "desiredState.workloads"); r.GetUpdateStateSuccess() == nil {
			b.Fatalf("update: %.300s", r)
		}
		evs := w.settle(b)
		add.add(maxHeld(evs, "update_state"))
		c := maxHeld(evs, "commit")
		// Its answer lists the 64,000 deleted instances: more than a
		// message holds, it is answered with that error instead.
		if r := w.cli.update(empty, "desiredState.workloads"); r.GetUpdateStateSuccess() == nil &&
			!strings.Contains(r.GetError().GetMessage(), "message too large") {
			b.Fatalf("update: %.300s", r)
		}
		evs = w.settle(b)
		del.add(maxHeld(evs, "update_state"))
		commit.add(max(c, maxHeld(evs, "commit")))
	}
	b.StopTimer()
	done()
	add.report(b, "add")
	del.report(b, "delete")
	commit.report(b, "commit")
}

// BenchmarkLoopHoldEvents is a commit that every event subscription
// matches: one agent's state report, with the most subscriptions to the
// workload states the leader holds (--max-event-subscriptions, 4,096 by
// default, on 128 client streams of 32, --max-event-subscriptions-per-
// requester), and, for comparison, 131,072 of them on 496 streams, which
// nothing bounded before (the caps raised for it).
func BenchmarkLoopHoldEvents(b *testing.B) {
	for _, c := range []struct {
		subs, streams int
	}{{DefaultMaxEventSubscriptions, DefaultMaxEventSubscriptions / DefaultMaxEventSubscriptionsPerRequester}, {1 << 17, 496}} {
		b.Run(fmt.Sprintf("subscriptions=%d", c.subs), func(b *testing.B) {
			w := newLoopWorld(b, 8, func(cfg *Config) {
				cfg.MaxEventSubscriptions = max(c.subs, DefaultMaxEventSubscriptions)
				cfg.MaxEventSubscriptionsPerRequester = max(c.subs/c.streams+1, DefaultMaxEventSubscriptionsPerRequester)
			})
			s := placedState(0, 8, 1)
			if r := w.cli.update(s, "desiredState.workloads"); r.GetUpdateStateSuccess() == nil {
				b.Fatalf("update: %v", r)
			}
			w.settle(b)
			var in state.InstanceName
			w.ts.store(func(st *state.Store) { in = st.States.All()[0].Instance })
			var subs []*benchConn
			for k := range c.streams {
				sub := w.d.cli(true)
				subs = append(subs, sub)
				for i := k; i < c.subs; i += c.streams {
					sub.send(&grpcapi.ToServer{ToServerEnum: &grpcapi.ToServer_Request{Request: &ankbase.Request{RequestId: fmt.Sprintf("s%d", i),
						RequestContent: &ankbase.Request_CompleteStateRequest{CompleteStateRequest: &ankbase.CompleteStateRequest{
							FieldMask: []string{"workloadStates"}, SubscribeForEvents: true}}}}})
				}
			}
			w.settle(b)
			agent := w.agents[in.AgentName]
			states := []state.ExecutionState{state.RunningOk, state.SucceededOk}
			b.Run("commit", func(b *testing.B) {
				w.measure(b, "commit", func(i int) {
					agent.send(&grpcapi.ToServer{ToServerEnum: &grpcapi.ToServer_UpdateWorkloadState{UpdateWorkloadState: &grpcapi.UpdateWorkloadState{
						WorkloadStates: rpc.WorkloadStatesToProto([]state.WorkloadState{{Instance: in, State: states[i%2]}}), GrapnelGeneration: uint64(i + 2)}}})
					agent.sync()
				})
			})
			b.Run("cli_gone", func(b *testing.B) {
				// A client stream with its subscriptions goes.
				w.measure(b, "cli_gone", func(i int) {
					subs[i%len(subs)].close()
				})
			})
		})
	}
}

// bigWorkload is a pinned workload of about 2.9 KB, so that 1,000 of
// them fill the default 3 MiB of desired state and of one agent's
// rendered workloads.
func bigWorkload(i int, salt string) *state.Workload {
	return &state.Workload{Agent: "agent_big", Runtime: "podman", RestartPolicy: state.RestartNever,
		RuntimeConfig: fmt.Sprintf("image: busybox\ncommandArgs: [sleep, \"%d\"]\nenv: [%s]\n# %s\n", i, salt, strings.Repeat("x", 2800))}
}

func bytesState(first, n int, salt string) state.State {
	s := state.State{APIVersion: state.APIVersion, Workloads: map[string]*state.Workload{}}
	for i := first; i < first+n; i++ {
		s.Workloads[fmt.Sprintf("wl_%04d", i)] = bigWorkload(i, salt)
	}
	return s
}

func masksOf(s state.State) []string {
	var out []string
	for n := range s.Workloads {
		out = append(out, "desiredState.workloads."+n)
	}
	return out
}

// BenchmarkLoopHoldBig measures the requests of a cluster at the default
// limits' most bytes: 1,000 workloads of 2.9 KB pinned to one agent
// (2.9 MB of desired state and of that agent's rendered workloads).
func BenchmarkLoopHoldBig(b *testing.B) {
	w := newLoopWorld(b, 1, nil)
	big := w.d.agent("agent_big", nil)
	for first := 0; first < 1000; first += 250 {
		s := bytesState(first, 250, "a")
		if r := w.cli.update(s, masksOf(s)...); r.GetUpdateStateSuccess() == nil {
			b.Fatalf("update: %v", r)
		}
	}
	w.settle(b)
	b.Run("agent_hello/most_workloads", func(b *testing.B) {
		// The agent with 1,000 workloads says goodbye and comes back:
		// its ServerHello carries all of them.
		w.measure(b, "agent_hello", func(int) {
			big.send(&grpcapi.ToServer{ToServerEnum: &grpcapi.ToServer_Goodbye{Goodbye: &grpcapi.Goodbye{}}})
			big.close()
			<-big.ended
			big = w.d.agent("agent_big", nil)
		})
	})
	b.Run("complete_state/all", func(b *testing.B) {
		w.measure(b, "complete_state", func(int) { w.cli.request(completeStateRequest(nil, false)) })
	})
	b.Run("update_state/replace_250", func(b *testing.B) {
		// 250 workloads changed (the most that fit max_update_bytes),
		// dispatched to their agent once committed.
		w.measure(b, "update_state", func(i int) {
			s := bytesState(0, 250, fmt.Sprint("b", i))
			if r := w.cli.update(s, masksOf(s)...); r.GetUpdateStateSuccess() == nil {
				b.Fatalf("update refused: %.300s", r.GetError().GetMessage())
			}
		})
	})
	b.Run("update_state/replace_all", func(b *testing.B) {
		// All 1,000 changed in one update (2.9 MB), dispatched to their
		// agent once committed.
		w.measure(b, "update_state", func(i int) {
			s := bytesState(0, 1000, fmt.Sprint("c", i))
			if r := w.cli.update(s, "desiredState.workloads"); r.GetUpdateStateSuccess() == nil {
				b.Fatalf("update refused: %.300s", r.GetError().GetMessage())
			}
		})
	})
}

// BenchmarkLoopHoldRenderBudget is the template-heavy update that takes
// the whole default render budget (BenchmarkUpdateAtRenderBudget) on the
// loop of a real leader, from the request to its commit.
func BenchmarkLoopHoldRenderBudget(b *testing.B) {
	w := newLoopWorld(b, 1, nil)
	req, _ := budgetRequest(b, state.DefaultLimits().MaxRenderStepsPerRequest, false)
	w.measure(b, "update_state", func(i int) {
		if r := w.cli.request(&ankbase.Request{RequestContent: &ankbase.Request_UpdateStateRequest{UpdateStateRequest: req(i)}}); r.GetUpdateStateSuccess() == nil {
			b.Fatalf("update refused: %.300s", r.GetError().GetMessage())
		}
	})
}

// BenchmarkLoopHoldLocks is a lock call (renewing 1,000 held locks), an
// unlock and a list while the cluster holds the most intent locks
// --max-locks allows (10,000 by default); one call names at most 1,000
// objects.
func BenchmarkLoopHoldLocks(b *testing.B) {
	held := DefaultMaxLocks
	w := newLoopWorld(b, 1, nil)
	lc := grapnelpb.NewLocksClient(w.d.conns[0])
	ctx := wire.WithOwner(context.Background(), "bench")
	objs := func(first, n int) []string {
		out := make([]string, n)
		for i := range out {
			out[i] = fmt.Sprintf("workload/w%07d", first+i)
		}
		return out
	}
	for i := 0; i < held; i += 1000 {
		if _, err := lc.Lock(ctx, &grapnelpb.LockRequest{Objects: objs(i, 1000), TtlMs: 3600_000}); err != nil {
			b.Fatal(err)
		}
	}
	w.settle(b)
	b.Run("lock", func(b *testing.B) {
		w.measure(b, "lock", func(i int) {
			if _, err := lc.Lock(ctx, &grapnelpb.LockRequest{Objects: objs(1000*(i%10), 1000), TtlMs: 3600_000}); err != nil {
				b.Fatal(err)
			}
		})
	})
	b.Run("unlock", func(b *testing.B) {
		w.measure(b, "unlock", func(i int) {
			o := objs(1000*(i%10), 1000)
			if _, err := lc.Unlock(ctx, &grapnelpb.UnlockRequest{Objects: o}); err != nil {
				b.Fatal(err)
			}
			b.StopTimer()
			if _, err := lc.Lock(ctx, &grapnelpb.LockRequest{Objects: o, TtlMs: 3600_000}); err != nil {
				b.Fatal(err)
			}
			b.StartTimer()
		})
	})
	b.Run("list", func(b *testing.B) {
		w.measure(b, "list_locks", func(int) {
			if _, err := lc.List(ctx, &grapnelpb.ListLocksRequest{}); err != nil {
				b.Fatal(err)
			}
		})
	})
}
