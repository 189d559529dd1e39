package agent

import (
	"context"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/grapnel-io/grapnel/agent/runtime/containerd"
	"github.com/grapnel-io/grapnel/agent/runtime/process"
	"github.com/grapnel-io/grapnel/internal/syncbuf"
	"github.com/grapnel-io/grapnel/internal/testwait"
	"github.com/grapnel-io/grapnel/rpc"
	"github.com/grapnel-io/grapnel/rpc/ankbase"
	"github.com/grapnel-io/grapnel/rpc/client"
	"github.com/grapnel-io/grapnel/server/testcluster"
	"github.com/grapnel-io/grapnel/state"
)

// The tests start workloads through the process runtime, whose shim is
// this test binary, and the containerd runtime, whose logger it is.
func TestMain(m *testing.M) {
	process.RunShimIfRequested()
	containerd.RunLoggerIfRequested()
	os.Exit(m.Run())
}

// Bounds of the waits below: generous for -race on two busy cores.
const (
	connectWithin = 15 * time.Second
	runWithin     = 20 * time.Second
	stopWithin    = 15 * time.Second
)

// running is an agent started by a test.
type running struct {
	*instance
	cancel context.CancelFunc
	done   chan error
	logs   *syncbuf.Buffer
}

// startAgent starts an agent on the cluster with the process runtime; the
// test's cleanup stops it. mods change the configuration first.
func startAgent(t *testing.T, cl *testcluster.Cluster, name, runFolder string, mods ...func(*Config)) *running {
	t.Helper()
	logs := &syncbuf.Buffer{}
	cfg := Config{
		Name: name, Servers: cl.Addrs(), Insecure: true, RunFolder: runFolder,
		Runtimes: []string{RuntimeProcess}, LoadInterval: 200 * time.Millisecond,
		Logger: slog.New(slog.NewTextHandler(logs, &slog.HandlerOptions{Level: slog.LevelDebug})),
	}
	for _, m := range mods {
		m(&cfg)
	}
	a, err := start(cfg)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	r := &running{instance: a, cancel: cancel, done: make(chan error, 1), logs: logs}
	go func() { r.done <- a.run(ctx) }()
	t.Cleanup(func() {
		r.stop(t)
		if t.Failed() {
			t.Logf("agent %s log:\n%s", name, logs.String())
		}
	})
	return r
}

// stop ends Run and checks it returned without error; stopping twice is
// fine.
func (r *running) stop(t *testing.T) {
	t.Helper()
	r.cancel()
	select {
	case err, ok := <-r.done:
		if ok && err != nil {
			t.Errorf("Run: %v", err)
		}
		if ok {
			close(r.done)
		}
	case <-time.After(stopWithin):
		t.Fatalf("Run did not return within %v of its context's end", stopWithin)
	}
}

// kill ends Run as killing the agent's process (SIGKILL) ends it, as far
// as the server can tell: the stream is cut without Goodbye. The
// workloads keep running, as they do then.
func (r *running) kill(t *testing.T) {
	t.Helper()
	r.instance.conn.abrupt.Store(true)
	r.stop(t)
}

// read runs fn on the serving leader's store; false while none leads.
func read(cl *testcluster.Cluster, fn func(st *state.Store)) bool {
	id := cl.LeaderID()
	if id == "" {
		return false
	}
	f := cl.FSM(id)
	if f == nil {
		return false
	}
	f.Read(func(st *state.Store, _ uint64) { fn(st) })
	return true
}

// stateOf is the state the leader stores for the workload's instances on
// agent; "" when it has none.
func stateOf(cl *testcluster.Cluster, agent, workload string) string {
	var out string
	read(cl, func(st *state.Store) {
		for _, ws := range st.States.OfAgent(agent) {
			if ws.Instance.WorkloadName == workload {
				out = ws.State.Short()
			}
		}
	})
	return out
}

func waitState(t *testing.T, cl *testcluster.Cluster, agent, workload, want string) {
	t.Helper()
	testwait.For(t, runWithin, func() bool {
		return stateOf(cl, agent, workload) == want
	}, "%s on %s %s", workload, agent, want)
}

func connected(cl *testcluster.Cluster, agent string) bool {
	ok := false
	read(cl, func(st *state.Store) { _, ok = st.Agents[agent] })
	return ok
}

// apply sends a manifest's workloads to the leader, as `grapnel apply`
// does, retrying while leadership settles.
func apply(t *testing.T, cl *testcluster.Cluster, manifest string) {
	t.Helper()
	st, _, err := state.ParseManifest([]byte(manifest))
	if err != nil {
		t.Fatal(err)
	}
	var mask []string
	for name := range st.Workloads {
		mask = append(mask, "desiredState.workloads."+name)
	}
	var last error
	testwait.For(t, runWithin, func() bool {
		last = func() error {
			ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
			defer cancel()
			c, err := client.Dial(ctx, client.Options{Addrs: cl.Addrs(), Insecure: true, ResponseTimeout: 5 * time.Second})
			if err != nil {
				return err
			}
			defer c.Close()
			_, err = c.Request(ctx, &ankbase.Request{RequestContent: &ankbase.Request_UpdateStateRequest{
				UpdateStateRequest: &ankbase.UpdateStateRequest{
					NewState:   rpc.CompleteStateToProto(&state.CompleteState{DesiredState: st}),
					UpdateMask: mask,
				}}})
			return err
		}()
		return last == nil
	}, "the state applied (last error: %v)", testwait.Lazy(func() string { return fmt.Sprint(last) }))
}

// agentStatus asks the leader for an agent's load report; nil when it has
// none or cannot be asked right now.
func agentStatus(t *testing.T, cl *testcluster.Cluster, agent string) *ankbase.AgentStatus {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	c, err := client.Dial(ctx, client.Options{Addrs: cl.Addrs(), Insecure: true, ResponseTimeout: 5 * time.Second})
	if err != nil {
		return nil
	}
	defer c.Close()
	r, err := c.Request(ctx, &ankbase.Request{RequestContent: &ankbase.Request_CompleteStateRequest{
		CompleteStateRequest: &ankbase.CompleteStateRequest{FieldMask: []string{"agents." + agent}}}})
	if err != nil {
		return nil
	}
	return r.GetCompleteStateResponse().GetCompleteState().GetAgents().GetAgents()[agent].GetStatus()
}

// sleeper is a process workload that writes its pid to pidFile and runs
// until killed.
func sleeper(name, agent, pidFile string) string {
	return fmt.Sprintf(`apiVersion: v1
workloads:
  %s:
    runtime: process
    agent: %s
    runtimeConfig: |
      command: /bin/sh
      args: ["-c", "echo $$ > %s; exec sleep 600"]
`, name, agent, pidFile)
}

// pidOf reads a workload's pid file; 0 until it is there.
func pidOf(t *testing.T, pidFile string) int {
	t.Helper()
	data, err := os.ReadFile(pidFile)
	if err != nil {
		return 0
	}
	pid, err := strconv.Atoi(strings.TrimSpace(string(data)))
	if err != nil {
		return 0
	}
	return pid
}

func alive(pid int) bool { return pid > 0 && syscall.Kill(pid, 0) == nil }

// workDir is a temporary directory for run folders and pid files. It is
// removed at the end with retries: a workload's shim killed at the end
// still writes its exit record for a moment.
func workDir(t *testing.T) string {
	t.Helper()
	dir, err := os.MkdirTemp("", "agent-test-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		var err error
		testwait.For(t, stopWithin, func() bool { err = os.RemoveAll(dir); return err == nil },
			"%s removed (%v)", dir, testwait.Lazy(func() string { return fmt.Sprint(err) }))
	})
	return dir
}

// killAtEnd kills the workload whose pid is in pidFile when the test
// ends: workloads outlive the agent by design.
func killAtEnd(t *testing.T, pidFile string) {
	t.Cleanup(func() {
		if pid := pidOf(t, pidFile); pid > 0 {
			_ = syscall.Kill(pid, syscall.SIGKILL)
		}
	})
}

// The agent connects, says hello, reports its load, and runs a workload
// applied to it; stopping the agent leaves the workload running.
func TestAgentRunsAWorkload(t *testing.T) {
	cl := testcluster.New(t, 1)
	dir := workDir(t)
	pidFile := filepath.Join(dir, "sleeper.pid")
	killAtEnd(t, pidFile)
	a := startAgent(t, cl, "agent_A", filepath.Join(dir, "run"))

	testwait.For(t, connectWithin, func() bool { return connected(cl, "agent_A") }, "agent_A connected")
	apply(t, cl, sleeper("sleeper", "agent_A", pidFile))
	waitState(t, cl, "agent_A", "sleeper", "Running(Ok)")
	testwait.For(t, runWithin, func() bool { return alive(pidOf(t, pidFile)) }, "the workload's pid file")
	// Loads live in the leader's memory, not in the replicated store: ask
	// the leader, as `grapnel get agents` does.
	testwait.For(t, connectWithin, func() bool {
		st := agentStatus(t, cl, "agent_A")
		return st.GetFreeMemory().GetFreeMemory() > 0 && st.GetCpuUsage() != nil
	}, "a load report")

	pid := pidOf(t, pidFile)
	a.stop(t)
	if !alive(pid) {
		t.Fatalf("the workload (pid %d) did not outlive the agent", pid)
	}
}

// With three replicas, the agent follows the leader: after the leader is
// stopped it is attached to the new one, its workload kept running
// untouched, and an update applied afterwards is carried out.
func TestAgentFollowsANewLeader(t *testing.T) {
	cl := testcluster.New(t, 3)
	dir := workDir(t)
	first, second := filepath.Join(dir, "first.pid"), filepath.Join(dir, "second.pid")
	killAtEnd(t, first)
	killAtEnd(t, second)
	a := startAgent(t, cl, "agent_A", filepath.Join(dir, "run"))

	old := cl.WaitServing(connectWithin)
	testwait.For(t, connectWithin, func() bool { return a.conn.replica() == old }, "%s", "agent_A attached to the leader "+old)
	apply(t, cl, sleeper("first", "agent_A", first))
	waitState(t, cl, "agent_A", "first", "Running(Ok)")
	testwait.For(t, runWithin, func() bool { return alive(pidOf(t, first)) }, "the workload's pid file")
	pid := pidOf(t, first)

	stopped := time.Now()
	cl.Stop(old)
	next := cl.WaitServing(connectWithin, old)
	testwait.For(t, connectWithin, func() bool { return a.conn.replica() == next }, "%s", "agent_A attached to the new leader "+next)
	t.Logf("agent attached to the new leader %s %v after the old one stopped", next, time.Since(stopped).Round(time.Millisecond))

	apply(t, cl, sleeper("second", "agent_A", second))
	waitState(t, cl, "agent_A", "second", "Running(Ok)")
	if got := pidOf(t, first); got != pid || !alive(pid) {
		t.Fatalf("the first workload was restarted or stopped: pid %d, then %d (alive %v)", pid, got, alive(pid))
	}
	if s := stateOf(cl, "agent_A", "first"); s != "Running(Ok)" {
		t.Fatalf("the first workload is %s on the new leader", s)
	}
}

// Every start of the agent has a greater incarnation, and the replicas
// take the reports of the new one.
func TestIncarnationGrowsAcrossRuns(t *testing.T) {
	cl := testcluster.New(t, 1)
	dir := workDir(t)
	run := filepath.Join(dir, "run")
	pidFile := filepath.Join(dir, "sleeper.pid")
	killAtEnd(t, pidFile)
	mark := func() state.ReportMark {
		var m state.ReportMark
		read(cl, func(st *state.Store) { m = st.ReportMarks["agent_A"] })
		return m
	}

	a := startAgent(t, cl, "agent_A", run)
	apply(t, cl, sleeper("sleeper", "agent_A", pidFile))
	waitState(t, cl, "agent_A", "sleeper", "Running(Ok)")
	testwait.For(t, connectWithin, func() bool { return mark().Incarnation != 0 }, "a marked report")
	first := mark()
	if first.Incarnation != a.conn.incarnation || first.Generation == 0 {
		t.Fatalf("stored mark %+v, the agent's incarnation %d", first, a.conn.incarnation)
	}
	a.stop(t)

	b := startAgent(t, cl, "agent_A", run)
	if b.conn.incarnation <= first.Incarnation {
		t.Fatalf("second incarnation %d, first %d", b.conn.incarnation, first.Incarnation)
	}
	testwait.For(t, connectWithin, func() bool { return mark().Incarnation == b.conn.incarnation }, "a report of the second incarnation")
	data, err := os.ReadFile(incarnationPath(run, "agent_A"))
	if err != nil || strings.TrimSpace(string(data)) != strconv.FormatUint(b.conn.incarnation, 10) {
		t.Fatalf("counter file %q, %v", data, err)
	}
}

// A state change that happens while no replica can be reached is reported
// after the agent reconnects.
func TestOfflineStateReportedAfterReconnect(t *testing.T) {
	cl := testcluster.New(t, 1)
	dir := workDir(t)
	pidFile, trigger := filepath.Join(dir, "waiter.pid"), filepath.Join(dir, "trigger")
	killAtEnd(t, pidFile)
	a := startAgent(t, cl, "agent_A", filepath.Join(dir, "run"))
	apply(t, cl, fmt.Sprintf(`apiVersion: v1
workloads:
  waiter:
    runtime: process
    agent: agent_A
    runtimeConfig: |
      command: /bin/sh
      args: ["-c", "echo $$ > %s; while [ ! -e %s ]; do sleep 0.05; done"]
`, pidFile, trigger))
	waitState(t, cl, "agent_A", "waiter", "Running(Ok)")
	testwait.For(t, runWithin, func() bool { return alive(pidOf(t, pidFile)) }, "the workload's pid file")

	id := cl.IDs()[0]
	cl.Stop(id)
	testwait.For(t, connectWithin, func() bool { return a.conn.replica() == "" }, "the agent disconnected")
	if err := os.WriteFile(trigger, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	testwait.For(t, runWithin, func() bool { return !alive(pidOf(t, pidFile)) }, "the workload ended")
	testwait.For(t, runWithin, func() bool {
		for _, ws := range a.mgr.Current() {
			if ws.Instance.WorkloadName == "waiter" && ws.State.Short() == "Succeeded(Ok)" {
				return a.conn.out.size() > 0
			}
		}
		return false
	}, "Succeeded(Ok) kept while offline")

	cl.Restart(id)
	waitState(t, cl, "agent_A", "waiter", "Succeeded(Ok)")
}
