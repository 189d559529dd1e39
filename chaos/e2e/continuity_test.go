package e2e

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/grapnel-io/grapnel/agent/runtime/podman"
	"github.com/grapnel-io/grapnel/chaos/bench"
	"github.com/grapnel-io/grapnel/state"
)

// testImage is the image scripts/podman-setup.sh builds offline.
const testImage = "localhost/grapnel-busybox:latest"

// grace is the replicas' --agent-reconnect-grace in these tests.
const grace = 3 * time.Second

// podmanReady says whether podman workloads can run here; with
// GRAPNEL_REQUIRE_PODMAN=1 a machine without them fails the test.
func podmanReady(t *testing.T) bool {
	t.Helper()
	ok := podman.Available("") && exec.Command("podman", "image", "exists", testImage).Run() == nil
	if !ok && os.Getenv("GRAPNEL_REQUIRE_PODMAN") == "1" {
		t.Fatalf("podman or the image %s is missing (GRAPNEL_REQUIRE_PODMAN=1): run scripts/podman-setup.sh", testImage)
	}
	if !ok {
		t.Logf("podman not set up (scripts/podman-setup.sh): the podman workload runs as a process instead")
	}
	return ok
}

// env is one running system: replicas, agents and the binaries.
type env struct {
	t      *testing.T
	dir    string
	bins   map[string]string
	g      *bench.Grapnel
	agents map[string]*bench.Agent
	ctx    context.Context
}

func start(t *testing.T, agents map[string][]string) *env {
	t.Helper()
	return startWith(t, startOptions{}, agents)
}

// startOptions vary how start builds and starts the binaries.
type startOptions struct {
	// goarch is the architecture the binaries are built for ("" for this
	// machine's); another one runs through binfmt_misc (qemu-user).
	goarch string
	// runnable, when set, checks that the built binaries run here.
	runnable func(bins map[string]string)
	// serverSubcommand starts the replicas as `grapnel server` rather
	// than through the link grapnel-server.
	serverSubcommand bool
}

// startWith is start with opts.
func startWith(t *testing.T, opts startOptions, agents map[string][]string) *env {
	t.Helper()
	if testing.Short() {
		t.Skip("end-to-end: builds the binaries and runs three replicas and agents")
	}
	dir := t.TempDir()
	bins, err := bench.BuildCommandsFor(dir, opts.goarch, "grapnel-server", "grapnel-agent", "grapnel")
	if err != nil {
		t.Fatal(err)
	}
	if opts.runnable != nil {
		opts.runnable(bins)
	}
	server, sub := bins["grapnel-server"], ""
	if opts.serverSubcommand {
		server, sub = bins["grapnel"], "server"
	}
	g, err := bench.StartGrapnel(bench.GrapnelConfig{Bin: server, Subcommand: sub, Dir: dir, Replicas: 3,
		Extra: []string{"--log-level", "info", "--agent-reconnect-grace", grace.String()}})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
	e := &env{t: t, dir: dir, bins: bins, g: g, agents: map[string]*bench.Agent{}, ctx: ctx}
	t.Cleanup(func() {
		cancel()
		for _, a := range e.agents {
			a.Kill()
		}
		g.Close()
		if t.Failed() {
			for _, r := range g.Replicas {
				t.Logf("--- %s\n%s", r.Name, bench.LogTail(r.LogPath, 30))
			}
			for _, a := range e.agents {
				t.Logf("--- %s\n%s", a.Name, bench.LogTail(a.LogPath, 40))
			}
		}
		bench.RemoveWorkloads(e.agentList())
	})
	wctx, wcancel := context.WithTimeout(ctx, 20*time.Second)
	defer wcancel()
	if _, err := g.WaitHealthy(wctx); err != nil {
		t.Fatal(err)
	}
	for name, rts := range agents {
		a, err := bench.StartAgent(bench.AgentConfig{Bin: bins["grapnel-agent"], Dir: dir, Name: name, Servers: g.Addrs(), Runtimes: rts})
		if err != nil {
			t.Fatal(err)
		}
		e.agents[name] = a
	}
	e.waitAttached()
	return e
}

func (e *env) agentList() []*bench.Agent {
	out := make([]*bench.Agent, 0, len(e.agents))
	for _, a := range e.agents {
		out = append(out, a)
	}
	return out
}

// waitAttached waits until every agent is attached to the leader and
// returns the leader's index and how long that took.
func (e *env) waitAttached() (int, time.Duration) {
	e.t.Helper()
	names := make([]string, 0, len(e.agents))
	for n := range e.agents {
		names = append(names, n)
	}
	begin := time.Now()
	wctx, cancel := context.WithTimeout(e.ctx, 20*time.Second)
	defer cancel()
	l, err := e.g.WaitAttached(wctx, names...)
	if err != nil {
		e.t.Fatal(err)
	}
	return l, time.Since(begin)
}

func (e *env) cli(args ...string) string {
	e.t.Helper()
	full := append([]string{"-k", "--server-url", strings.Join(e.g.Addrs(), ",")}, args...)
	out, err := exec.Command(e.bins["grapnel"], full...).CombinedOutput()
	if err != nil {
		e.t.Fatalf("grapnel %s: %v\n%s", strings.Join(full, " "), err, out)
	}
	return string(out)
}

func (e *env) apply(manifest string) {
	e.t.Helper()
	path := filepath.Join(e.dir, fmt.Sprintf("manifest-%d.yaml", time.Now().UnixNano()))
	if err := os.WriteFile(path, []byte(manifest), 0o644); err != nil {
		e.t.Fatal(err)
	}
	e.cli("apply", "--no-wait", path)
}

// waitStates waits until every named workload has exactly one instance,
// in the wanted state.
func (e *env) waitStates(what string, want map[string]state.ExecutionState) []state.WorkloadState {
	e.t.Helper()
	wctx, cancel := context.WithTimeout(e.ctx, 60*time.Second)
	defer cancel()
	ws, err := bench.WaitStates(wctx, e.g.Addrs(), what, func(ws []state.WorkloadState) bool {
		for wl, st := range want {
			s, ok := bench.StateOf(ws, wl)
			if !ok || s.State.State != st.State || s.State.SubState != st.SubState {
				return false
			}
		}
		return true
	})
	if err != nil {
		e.t.Fatal(err)
	}
	return ws
}

// ids returns what identifies each running workload on its host, by
// workload name.
func (e *env) ids(ws []state.WorkloadState) map[string]string {
	e.t.Helper()
	byInst, err := bench.HostIDs(e.agentList(), ws)
	if err != nil {
		e.t.Fatal(err)
	}
	out := map[string]string{}
	for inst, id := range byInst {
		n, _ := state.ParseInstanceName(inst)
		out[n.WorkloadName] = id
	}
	return out
}

func sameIDs(t *testing.T, what string, before, after map[string]string) {
	t.Helper()
	for wl, id := range before {
		if after[wl] != id {
			t.Fatalf("%s: workload %s was %s, now %q: it was restarted", what, wl, id, after[wl])
		}
	}
}

// manifest has three dependent workloads on two agents: db (podman, or a
// process without podman) ← api (process, agent_B) ← worker (process,
// agent_A). workerArg changes worker's instance.
func manifest(withPodman bool, workerArg string) string {
	db := `
  db:
    agent: agent_A
    runtime: podman
    runtimeConfig: |
      image: ` + testImage + `
      commandArgs: ["sleep", "3600"]`
	if !withPodman {
		db = `
  db:
    agent: agent_A
    runtime: process
    runtimeConfig: |
      command: /bin/sleep
      args: ["3600"]`
	}
	return `apiVersion: v1
workloads:` + db + `
  api:
    agent: agent_B
    runtime: process
    dependencies:
      db: ADD_COND_RUNNING
    runtimeConfig: |
      command: /bin/sleep
      args: ["3600"]
  worker:
    agent: agent_A
    runtime: process
    restartPolicy: ON_FAILURE
    dependencies:
      api: ADD_COND_RUNNING
    runtimeConfig: |
      command: /bin/sh
      args: ["-c", "exec sleep ` + workerArg + `"]
`
}

var running = state.ExecutionState{State: state.StateRunning, SubState: state.SubOk}

var allRunning = map[string]state.ExecutionState{"db": running, "api": running, "worker": running}

// noDisconnected fails when any workload shows AgentDisconnected.
func noDisconnected(t *testing.T, what string, ws []state.WorkloadState) {
	t.Helper()
	for _, s := range ws {
		if s.State.State == state.StateAgentDisconnected {
			t.Fatalf("%s: %s is AgentDisconnected:%s", what, s.Instance, bench.FormatStates(ws))
		}
	}
}

// neverDisconnected reads the states again and again for d and fails at
// the first AgentDisconnected.
func (e *env) neverDisconnected(what string, d time.Duration) {
	e.t.Helper()
	end := time.Now().Add(d)
	for time.Now().Before(end) {
		qctx, cancel := context.WithTimeout(e.ctx, 3*time.Second)
		ws, err := bench.WorkloadStates(qctx, e.g.Addrs())
		cancel()
		if err != nil {
			e.t.Fatalf("%s: reading states: %v", what, err)
		}
		noDisconnected(e.t, what, ws)
		time.Sleep(100 * time.Millisecond) // pacing between reads, not a wait for an event
	}
}

// The point of Grapnel: SIGKILL of the leader restarts no workload, both
// agents attach to the new leader, no workload turns AgentDisconnected,
// and an update applied afterwards is carried out.
func TestWorkloadsSurviveLeaderKill(t *testing.T) {
	withPodman := podmanReady(t)
	rtA := []string{"process"}
	if withPodman {
		rtA = append(rtA, "podman")
	}
	e := start(t, map[string][]string{"agent_A": rtA, "agent_B": {"process"}})
	leaderKillRestartsNothing(e, withPodman)
}

// leaderKillRestartsNothing applies the manifest, waits for every
// workload Running, kills the leader and checks that nothing was
// restarted or seen AgentDisconnected and that an update afterwards is
// carried out.
func leaderKillRestartsNothing(e *env, withPodman bool) {
	t := e.t
	t.Helper()
	applied := time.Now()
	e.apply(manifest(withPodman, "3600"))
	before := e.ids(e.waitStates("all running", allRunning))
	if len(before) != 3 {
		t.Fatalf("ids %v", before)
	}
	t.Logf("apply → every workload Running: %v", time.Since(applied).Round(time.Millisecond))

	leader, _ := e.waitAttached()
	e.g.Kill(leader)
	killed := time.Now()
	next, _ := e.waitAttached()
	if next == leader {
		t.Fatal("the killed replica still leads")
	}
	t.Logf("both agents attached to %s %v after the kill", e.g.Replicas[next].Name, time.Since(killed).Round(time.Millisecond))
	ws := e.waitStates("running after the kill", allRunning)
	noDisconnected(t, "after the kill", ws)
	sameIDs(t, "after the leader kill", before, e.ids(ws))
	// Until past the grace nothing may turn AgentDisconnected either.
	e.neverDisconnected("through the grace after the kill", grace+time.Second)
	sameIDs(t, "after the grace", before, e.ids(e.waitStates("still running after the grace", allRunning)))

	// An update after the failover is carried out: worker gets a new instance.
	e.apply(manifest(withPodman, "3601"))
	wctx, cancel := context.WithTimeout(e.ctx, 60*time.Second)
	defer cancel()
	ws, err := bench.WaitStates(wctx, e.g.Addrs(), "the updated worker running", func(ws []state.WorkloadState) bool {
		s, ok := bench.StateOf(ws, "worker")
		return ok && s.State.State == state.StateRunning && e.ids(ws)["worker"] != before["worker"]
	})
	if err != nil {
		t.Fatal(err)
	}
	after := e.ids(ws)
	if after["db"] != before["db"] || after["api"] != before["api"] {
		t.Fatalf("the update restarted db or api: %v → %v", before, after)
	}
}

// An agent restart adopts its workloads: same pids and container ids.
func TestAgentRestartAdoptsWorkloads(t *testing.T) {
	withPodman := podmanReady(t)
	rtA := []string{"process"}
	if withPodman {
		rtA = append(rtA, "podman")
	}
	e := start(t, map[string][]string{"agent_A": rtA, "agent_B": {"process"}})
	e.apply(manifest(withPodman, "3600"))
	before := e.ids(e.waitStates("all running", allRunning))
	a := e.agents["agent_A"]
	a.Kill()
	if err := a.Start(); err != nil {
		t.Fatal(err)
	}
	e.waitAttached()
	ws := e.waitStates("running after the agent restart", allRunning)
	sameIDs(t, "after the agent restart", before, e.ids(ws))
	e.neverDisconnected("through the grace after the agent restart", grace+time.Second)
	sameIDs(t, "after the grace", before, e.ids(e.waitStates("running after the grace", allRunning)))
}

// An agent cut off for longer than the grace (SIGSTOP: a hung unit that
// never closes its connections) has its workloads turn
// AgentDisconnected; once it is back they are Running again, with the
// same pids.
func TestAgentCutOffPastTheGrace(t *testing.T) {
	e := start(t, map[string][]string{"agent_A": {"process"}, "agent_B": {"process"}})
	e.apply(manifest(false, "3600"))
	before := e.ids(e.waitStates("all running", allRunning))
	b := e.agents["agent_B"]
	if err := b.Signal(syscall.SIGSTOP); err != nil {
		t.Fatal(err)
	}
	disc := state.ExecutionState{State: state.StateAgentDisconnected, SubState: string(state.StateAgentDisconnected)}
	e.waitStates("api AgentDisconnected", map[string]state.ExecutionState{"api": disc, "db": running, "worker": running})
	if err := b.Signal(syscall.SIGCONT); err != nil {
		t.Fatal(err)
	}
	e.waitAttached()
	ws := e.waitStates("all running again", allRunning)
	sameIDs(t, "after the agent came back", before, e.ids(ws))
}
