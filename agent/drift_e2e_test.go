package agent

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/grapnel-io/grapnel/agent/runtime"
	"github.com/grapnel-io/grapnel/agent/runtime/process"
	"github.com/grapnel-io/grapnel/cli"
	"github.com/grapnel-io/grapnel/internal/errs"
	"github.com/grapnel-io/grapnel/internal/testwait"
	"github.com/grapnel-io/grapnel/rpc"
	"github.com/grapnel-io/grapnel/rpc/client"
	"github.com/grapnel-io/grapnel/server/testcluster"
	"github.com/grapnel-io/grapnel/state"
)

// stateFull is the whole execution state the leader stores for the
// workload's instance on agent, additional info included.
func stateFull(cl *testcluster.Cluster, agent, workload string) (state.ExecutionState, state.InstanceName) {
	var out state.ExecutionState
	var inst state.InstanceName
	read(cl, func(st *state.Store) {
		for _, ws := range st.States.OfAgent(agent) {
			if ws.Instance.WorkloadName == workload {
				out, inst = ws.State, ws.Instance
			}
		}
	})
	return out, inst
}

// appliedIndex is the index the leader's store has applied.
func appliedIndex(cl *testcluster.Cluster) uint64 {
	var idx uint64
	if f := cl.FSM(cl.LeaderID()); f != nil {
		f.Read(func(_ *state.Store, i uint64) { idx = i })
	}
	return idx
}

// sleeperPolicy is sleeper with a restart policy.
func sleeperPolicy(name, agent, pidFile string, policy state.RestartPolicy) string {
	return strings.Replace(sleeper(name, agent, pidFile), "    runtime: process\n",
		"    runtime: process\n    restartPolicy: "+string(policy)+"\n", 1)
}

// parentOf is the parent pid of pid: a workload's is its shim.
func parentOf(t *testing.T, pid int) int {
	t.Helper()
	data, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		t.Fatal(err)
	}
	// pid (comm) state ppid ...; comm may hold spaces, so cut after ')'.
	fields := strings.Fields(string(data[bytes.LastIndexByte(data, ')')+1:]))
	ppid, err := strconv.Atoi(fields[1])
	if err != nil {
		t.Fatal(err)
	}
	return ppid
}

// resyncAgent runs `grapnel agent resync NAME` against the cluster.
func resyncAgent(ctx context.Context, cl *testcluster.Cluster, name string) error {
	cc, _, closeFn, err := client.DialCluster(ctx, client.Options{Addrs: cl.Addrs(), Insecure: true})
	if err != nil {
		return err
	}
	defer closeFn()
	var out bytes.Buffer
	return (&cli.Cluster{Client: cc, Out: &out, Err: &out}).ResyncAgent(ctx, name, nil, 0)
}

// resyncAndReport runs `grapnel agent resync NAME` as the CLI does by
// default: it waits up to wait for the repairs the history records and
// returns what it printed.
func resyncAndReport(ctx context.Context, cl *testcluster.Cluster, name string, wait time.Duration) (string, error) {
	o := client.Options{Addrs: cl.Addrs(), Insecure: true}
	cc, _, closeFn, err := client.DialCluster(ctx, o)
	if err != nil {
		return "", err
	}
	defer closeFn()
	hc, _, closeHist, err := client.DialHistory(ctx, o)
	if err != nil {
		return "", err
	}
	defer closeHist()
	var out bytes.Buffer
	err = (&cli.Cluster{Client: cc, Out: &out, Err: &out}).ResyncAgent(ctx, name, hc, wait)
	return out.String(), err
}

// A process workload killed with `kill -9` behind the agent's back is
// repaired: killed alone, its shim records the signal and ALWAYS starts
// it again; killed together with its shim, nothing records how it ended,
// and the agent reports the drift as Failed(Lost) with the reason and
// hands it to the restart policy: ALWAYS starts it again, NEVER leaves
// it Failed with the reason at the server.
func TestDriftRepairedAfterKill9(t *testing.T) {
	cl := testcluster.New(t, 1)
	dir := workDir(t)
	alone, keeper, loner := filepath.Join(dir, "alone.pid"), filepath.Join(dir, "keeper.pid"), filepath.Join(dir, "loner.pid")
	for _, f := range []string{alone, keeper, loner} {
		killAtEnd(t, f)
	}
	startAgent(t, cl, "agent_A", filepath.Join(dir, "run"))
	testwait.For(t, connectWithin, func() bool { return connected(cl, "agent_A") }, "agent_A connected")
	apply(t, cl, sleeperPolicy("alone", "agent_A", alone, state.RestartAlways))
	apply(t, cl, sleeperPolicy("keeper", "agent_A", keeper, state.RestartAlways))
	apply(t, cl, sleeperPolicy("loner", "agent_A", loner, state.RestartNever))
	for _, w := range []string{"alone", "keeper", "loner"} {
		waitState(t, cl, "agent_A", w, "Running(Ok)")
	}
	pids := map[string]int{}
	for w, f := range map[string]string{"alone": alone, "keeper": keeper, "loner": loner} {
		testwait.For(t, runWithin, func() bool { return alive(pidOf(t, f)) }, "%s's pid file", w)
		pids[w] = pidOf(t, f)
	}

	if err := syscall.Kill(pids["alone"], syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	for _, w := range []string{"keeper", "loner"} {
		shim := parentOf(t, pids[w])
		for _, pid := range []int{shim, pids[w]} {
			if err := syscall.Kill(pid, syscall.SIGKILL); err != nil {
				t.Fatal(err)
			}
		}
	}

	for w, f := range map[string]string{"alone": alone, "keeper": keeper} {
		testwait.For(t, runWithin, func() bool {
			pid := pidOf(t, f)
			return pid != pids[w] && alive(pid)
		}, "%s started again", w)
		waitState(t, cl, "agent_A", w, "Running(Ok)")
	}
	want := fmt.Sprintf("drift: removed behind the agent's back (process %d is gone and its exit was not recorded); repair: none (restartPolicy NEVER)", pids["loner"])
	testwait.For(t, runWithin, func() bool {
		s, _ := stateFull(cl, "agent_A", "loner")
		return s.Is(state.StateFailed, state.SubLost) && s.AdditionalInfo == want
	}, "loner Failed(Lost) with the drift reason %q", want)
	// Each repair is a transaction of the replicated history, asked by
	// the agent, with the reason.
	var seen string
	testwait.For(t, runWithin, func() bool {
		found := false
		read(cl, func(st *state.Store) {
			var b strings.Builder
			for _, tx := range st.History.Since(0, "loner", 0) {
				found = found || tx.Kind == state.TxRepair && tx.Requester == "agent_A" && tx.Reason == want
				fmt.Fprintf(&b, "\n  tx %d %s by %s: %q %v", tx.Seq, tx.Kind, tx.Requester, tx.Reason, tx.Workloads)
			}
			for _, tr := range st.History.TransitionsOf("loner") {
				fmt.Fprintf(&b, "\n  transition at %d: %s", tr.Index, tr.State)
			}
			seen = b.String()
		})
		return found
	}, "a Repair transaction for loner with the reason %q; the history of loner:%s", want, testwait.Lazy(func() string { return seen }))
}

// `grapnel agent resync NAME` reaches the agent through the leader: a
// round without drift sends nothing (the replicas' applied index stays),
// a round that finds an instance with the agent's name no loop stands for
// deletes it and reports Removed with the reason; an agent without a
// stream to the leader is refused by name.
func TestResyncOnRequest(t *testing.T) {
	cl := testcluster.New(t, 1)
	dir := workDir(t)
	pidFile := filepath.Join(dir, "svc.pid")
	killAtEnd(t, pidFile)
	run := filepath.Join(dir, "run")
	a := startAgent(t, cl, "agent_A", run) // no periodic rounds: ResyncInterval 0
	testwait.For(t, connectWithin, func() bool { return connected(cl, "agent_A") }, "agent_A connected")
	apply(t, cl, sleeper("svc", "agent_A", pidFile))
	waitState(t, cl, "agent_A", "svc", "Running(Ok)")
	testwait.For(t, runWithin, func() bool { return alive(pidOf(t, pidFile)) }, "the workload's pid file")
	svcPID := pidOf(t, pidFile)

	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	rounds := func() int { return strings.Count(a.logs.String(), "resync round") }
	before := appliedIndex(cl)
	for n := 1; n <= 2; n++ {
		if err := resyncAgent(ctx, cl, "agent_A"); err != nil {
			t.Fatalf("resync: %v", err)
		}
		testwait.For(t, runWithin, func() bool { return rounds() == n }, "resync round %d", n)
	}
	if after := appliedIndex(cl); after != before {
		t.Fatalf("resync rounds without drift moved the applied index from %d to %d", before, after)
	}

	// An instance with the agent's name that the server never asked for.
	rt, err := process.New(process.Config{RunFolder: run})
	if err != nil {
		t.Fatal(err)
	}
	stray := state.NewInstanceName("stray", "agent_A", "cfg")
	strayRun := filepath.Join(run, "agent_A_io", stray.String())
	if err := os.MkdirAll(strayRun, 0o700); err != nil {
		t.Fatal(err)
	}
	id, err := rt.Create(ctx, runtime.Spec{Instance: stray, RunDir: strayRun,
		Workload: &state.Workload{Runtime: "process", RuntimeConfig: "command: /bin/sleep\nargs: [\"600\"]\n"}})
	if err != nil {
		t.Fatal(err)
	}
	strayPID, err := rt.PID(id)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = syscall.Kill(strayPID, syscall.SIGKILL) })

	// `grapnel agent resync` waits and prints what the round repaired,
	// from the history (issue 30 point 7).
	said, err := resyncAndReport(ctx, cl, "agent_A", 10*time.Second)
	if err != nil {
		t.Fatalf("resync: %v", err)
	}
	if !strings.Contains(said, "agent agent_A recorded 1 repair(s)") || !strings.Contains(said, "stray") {
		t.Fatalf("resync printed:\n%s", said)
	}
	testwait.For(t, runWithin, func() bool {
		_, err := os.Stat(strayRun)
		return !alive(strayPID) && errors.Is(err, os.ErrNotExist)
	}, "the unknown instance deleted")
	testwait.For(t, runWithin, func() bool {
		return strings.Contains(a.logs.String(), "drift: removing an unknown instance with the agent's labels")
	}, "the drift logged")
	if pid := pidOf(t, pidFile); pid != svcPID || !alive(pid) {
		t.Fatalf("the wanted workload was touched: pid %d, then %d", svcPID, pid)
	}
	if s := stateOf(cl, "agent_A", "svc"); s != "Running(Ok)" {
		t.Fatalf("svc is %s", s)
	}

	err = resyncAgent(ctx, cl, "agent_B")
	if !errors.Is(rpc.FromStatus(err), errs.ErrAgentNotConnected) || !strings.Contains(fmt.Sprint(err), `"agent_B"`) {
		t.Fatalf("resync of an agent without a stream: %v, want ErrAgentNotConnected naming it", err)
	}
	if err := resyncAgent(ctx, cl, "no such/agent"); !errors.Is(err, cli.ErrBadArgument) {
		t.Fatalf("resync of a bad name: %v, want ErrBadArgument", err)
	}
}

// Periodic rounds on an idle agent find nothing and send nothing.
func TestPeriodicResyncIdle(t *testing.T) {
	cl := testcluster.New(t, 1)
	dir := workDir(t)
	pidFile := filepath.Join(dir, "svc.pid")
	killAtEnd(t, pidFile)
	a := startAgent(t, cl, "agent_A", filepath.Join(dir, "run"), func(c *Config) { c.ResyncInterval = 100 * time.Millisecond })
	testwait.For(t, connectWithin, func() bool { return connected(cl, "agent_A") }, "agent_A connected")
	apply(t, cl, sleeper("svc", "agent_A", pidFile))
	waitState(t, cl, "agent_A", "svc", "Running(Ok)")
	testwait.For(t, runWithin, func() bool { return alive(pidOf(t, pidFile)) }, "the workload's pid file")
	rounds := func() int { return strings.Count(a.logs.String(), "resync round") }
	start := rounds()
	before := appliedIndex(cl)
	testwait.For(t, runWithin, func() bool { return rounds() >= start+5 }, "five periodic rounds")
	if after := appliedIndex(cl); after != before {
		t.Fatalf("idle resync rounds moved the applied index from %d to %d", before, after)
	}
	if strings.Contains(a.logs.String(), "drift:") {
		t.Fatalf("an idle agent found drift:\n%s", a.logs.String())
	}
}
