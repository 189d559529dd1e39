package servercmd

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/grapnel-io/grapnel/chaos/bench"
	"github.com/grapnel-io/grapnel/internal/testwait"
	"github.com/grapnel-io/grapnel/rpc/ankbase"
	"github.com/grapnel-io/grapnel/rpc/client"
	"github.com/grapnel-io/grapnel/state"
)

// An agent restart restarts no placed workload (issue 30, findings D1 and
// D10). Real binaries: one grapnel-server, three grapnel-agents (a1 in
// risk group front, a2 and a3 in rear) and two placed process workloads,
// logger (2 instances, spread over risk groups: a1 and a2) and mon (3
// instances: every agent). Each scenario stops an agent and starts it
// again, then every instance must run where it ran, under the same pid:
//
//   - SIGKILL, back within the reconnect grace;
//   - SIGKILL, back after the grace: mon had no other agent to go to, so
//     the allocator places it on a3 again, and a3 adopts the instance it
//     still runs rather than kill it and create it again;
//   - SIGTERM (the agent says Goodbye, the systemd restart path), back
//     after the grace: the same;
//   - SIGTERM, back within the grace: during it the agent's workloads
//     read AgentDisconnected (nobody observes them) and nothing moves.
//
// The last runs last: before issue 30 it moved logger for good, which
// the others, each checked on its own, would then have failed on.

// restartGrace is the replica's --agent-reconnect-grace: long enough for
// the test to look at the agent's states inside it on a loaded machine.
const restartGrace = 5 * time.Second

const restartManifest = `apiVersion: v1
workloads:
  logger:
    runtime: process
    agent: ""
    tags:
      grapnel.io/instances: "2"
    runtimeConfig: |
      command: /bin/sleep
      args: ["3601"]
  mon:
    runtime: process
    agent: ""
    tags:
      grapnel.io/instances: "3"
      grapnel.io/spread: none
    runtimeConfig: |
      command: /bin/sleep
      args: ["3602"]
`

// restartLayout is where the instances run after the apply.
var restartLayout = map[string][]string{"logger": {"a1", "a2"}, "mon": {"a1", "a2", "a3"}}

func TestAgentRestartRestartsNoPlacedWorkload(t *testing.T) {
	if testing.Short() {
		t.Skip("multi-process test: builds grapnel-server, grapnel-agent and grapnel and runs them")
	}
	bins := e2eBuild(t, "grapnel-server", "grapnel", "grapnel-agent", "grapnel-process-shim")
	dir := t.TempDir()
	g := e2eGrapnel(t, bench.GrapnelConfig{Bin: bins["grapnel-server"], Dir: dir, Replicas: 1,
		Extra: []string{"--log-level", "info", "--agent-reconnect-grace", restartGrace.String()}}, 60)
	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
	defer cancel()
	wctx, wcancel := context.WithTimeout(ctx, 20*time.Second)
	_, err := g.WaitHealthy(wctx)
	wcancel()
	if err != nil {
		t.Fatal(err)
	}
	agents := map[string]*bench.Agent{}
	for _, a := range []struct{ name, group string }{{"a1", "front"}, {"a2", "rear"}, {"a3", "rear"}} {
		ag, err := bench.StartAgent(bench.AgentConfig{Bin: bins["grapnel-agent"], Dir: dir, Name: a.name, Servers: g.Addrs(),
			Runtimes: []string{"process"}, Extra: []string{"-t", "grapnel.io/risk-group=" + a.group, "--log-level", "debug"}})
		if err != nil {
			t.Fatal(err)
		}
		agents[a.name] = ag
	}
	t.Cleanup(func() {
		for _, a := range agents {
			a.Kill()
		}
		if t.Failed() {
			for _, n := range []string{"a1", "a2", "a3"} {
				t.Logf("%s", bench.LogTail(agents[n].LogPath, 40))
			}
		}
	})
	wctx, wcancel = context.WithTimeout(ctx, 20*time.Second)
	_, err = g.WaitAttached(wctx, "a1", "a2", "a3")
	wcancel()
	if err != nil {
		t.Fatal(err)
	}
	manifest := filepath.Join(dir, "placed.yaml")
	if err := os.WriteFile(manifest, []byte(restartManifest), 0o644); err != nil {
		t.Fatal(err)
	}
	cli := bins["grapnel"]
	e2eCLI(t, cli, g.Addrs(), "apply", manifest)
	// Workloads outlive their agents by design: delete them while the
	// agents run (cleanups run last registered first).
	t.Cleanup(func() {
		for _, a := range agents {
			if !a.Alive() {
				_ = a.Start()
			}
		}
		dctx, dcancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer dcancel()
		_, _ = g.WaitAttached(dctx, "a1", "a2", "a3")
		e2eCLI(t, cli, g.Addrs(), "delete", "workloads", "logger", "mon")
		_, _ = bench.WaitStates(dctx, g.Addrs(), "no workload left", func(ws []state.WorkloadState) bool { return len(ws) == 0 })
	})
	pidsBefore := waitRunningAt(ctx, t, g, agents, restartLayout)

	scenarios := []struct {
		name  string
		agent string
		stop  func(a *bench.Agent)
		// past waits for the agent to be gone past its grace; nil
		// restarts it at once.
		past bool
		// during checks what the leader shows while the agent is down.
		during func(t *testing.T)
	}{
		{name: "SIGKILL, back within the grace", agent: "a2", stop: (*bench.Agent).Kill},
		{name: "SIGKILL, back after the grace", agent: "a3", stop: (*bench.Agent).Kill, past: true},
		{name: "SIGTERM, back after the grace", agent: "a3", stop: (*bench.Agent).Stop, past: true},
		{name: "SIGTERM, back within the grace", agent: "a2", stop: (*bench.Agent).Stop, during: func(t *testing.T) {
			// A Goodbye gets the grace: the agent stays, nothing moves,
			// and its workloads read AgentDisconnected at once.
			wctx, cancel := context.WithTimeout(ctx, restartGrace)
			defer cancel()
			_, err := bench.WaitStates(wctx, g.Addrs(), "a2's instances AgentDisconnected, nothing moved", func(ws []state.WorkloadState) bool {
				on := layoutOf(ws)
				for w, as := range restartLayout {
					if !slices.Equal(on[w], as) {
						return false
					}
				}
				for _, s := range ws {
					if s.Instance.AgentName == "a2" && s.State != state.AgentDisconnected {
						return false
					}
				}
				return true
			})
			if err != nil {
				t.Error(err)
			}
		}},
	}
	for _, sc := range scenarios {
		t.Run(sc.name, func(t *testing.T) {
			before := waitRunningAt(ctx, t, g, agents, restartLayout)
			a := agents[sc.agent]
			hellos := countInLog(t, a, helloLine)
			sc.stop(a)
			testwait.For(t, 15*time.Second, func() bool { return !a.Alive() }, "agent %s stopped", a.Name)
			if sc.during != nil {
				sc.during(t)
			}
			if sc.past {
				// Gone past the grace: out of the agent map, and mon's
				// instance there taken out of the layout (no other agent
				// can host it: every other one has one).
				if err := waitGone(ctx, g, sc.agent); err != nil {
					t.Fatal(err)
				}
			}
			if err := a.Start(); err != nil {
				t.Fatal(err)
			}
			// The new process has its ServerHello: the states read from
			// now on are the ones it reports (a new incarnation's hello
			// turns the old ones AgentDisconnected first).
			testwait.For(t, 30*time.Second, func() bool { return countInLog(t, a, helloLine) > hellos },
				"agent %s connected again", a.Name)
			after := waitRunningAt(ctx, t, g, agents, restartLayout)
			comparePids(t, before, after)
			// The new process adopted every instance of the layout on
			// its host, and neither deleted nor started one.
			life := lastLife(t, a)
			want := 0
			for _, as := range restartLayout {
				if slices.Contains(as, a.Name) {
					want++
				}
			}
			if n := strings.Count(life, `msg="found workload on the host"`); n != want {
				t.Errorf("agent %s adopted %d instances, want %d; its log since the restart:\n%s", a.Name, n, want, life)
			}
			for _, bad := range []string{`msg="deleting workload left on the host"`, `msg="workload process started"`} {
				if strings.Contains(life, bad) {
					t.Errorf("agent %s logged %s after the restart:\n%s", a.Name, bad, life)
				}
			}
		})
	}
	comparePids(t, pidsBefore, waitRunningAt(ctx, t, g, agents, restartLayout))
}

// layoutOf is, per workload, the agents with a state of an instance,
// sorted.
func layoutOf(ws []state.WorkloadState) map[string][]string {
	on := map[string][]string{}
	for _, s := range ws {
		on[s.Instance.WorkloadName] = append(on[s.Instance.WorkloadName], s.Instance.AgentName)
	}
	for _, as := range on {
		sort.Strings(as)
	}
	return on
}

// waitRunningAt waits until every instance of layout runs on its agent
// (Running(Ok), no other instance) and returns each instance's pid, read
// from the process runtime's record in the agent's run folder.
func waitRunningAt(ctx context.Context, t *testing.T, g *bench.Grapnel, agents map[string]*bench.Agent, layout map[string][]string) map[string]int {
	t.Helper()
	wctx, cancel := context.WithTimeout(ctx, 45*time.Second)
	defer cancel()
	ws, err := bench.WaitStates(wctx, g.Addrs(), fmt.Sprintf("instances running at %v", layout), func(ws []state.WorkloadState) bool {
		on := layoutOf(ws)
		if len(on) != len(layout) {
			return false
		}
		for w, as := range layout {
			if !slices.Equal(on[w], as) {
				return false
			}
		}
		for _, s := range ws {
			if s.State.String() != "Running(Ok)" {
				return false
			}
		}
		return true
	})
	if err != nil {
		t.Fatal(err)
	}
	pids := map[string]int{}
	for _, s := range ws {
		a := agents[s.Instance.AgentName]
		rec := filepath.Join(a.RunFolder, a.Name+"_io", s.Instance.String(), "process", "record.json")
		data, err := os.ReadFile(rec)
		if err != nil {
			t.Fatalf("instance %s: %v", s.Instance, err)
		}
		var r struct {
			PID int `json:"pid"`
		}
		if err := json.Unmarshal(data, &r); err != nil || r.PID <= 0 {
			t.Fatalf("instance %s: record %s: %v", s.Instance, data, err)
		}
		if syscall.Kill(r.PID, 0) != nil {
			t.Fatalf("instance %s: pid %d is not alive", s.Instance, r.PID)
		}
		pids[s.Instance.String()] = r.PID
	}
	return pids
}

// comparePids fails for every instance restarted (another pid) or gone.
func comparePids(t *testing.T, before, after map[string]int) {
	t.Helper()
	var diffs []string
	for inst, pid := range before {
		switch p, ok := after[inst]; {
		case !ok:
			diffs = append(diffs, fmt.Sprintf("%s gone (pid %d)", inst, pid))
		case p != pid:
			diffs = append(diffs, fmt.Sprintf("%s restarted: pid %d, then %d", inst, pid, p))
		}
	}
	for inst := range after {
		if _, ok := before[inst]; !ok {
			diffs = append(diffs, inst+" new")
		}
	}
	sort.Strings(diffs)
	if len(diffs) > 0 {
		t.Errorf("instances restarted or moved:\n  %s", strings.Join(diffs, "\n  "))
	}
}

// helloLine is what an agent logs once it has its ServerHello.
const helloLine = `msg="connected to the server"`

// countInLog counts the agent's log lines holding s.
func countInLog(t *testing.T, a *bench.Agent, s string) int {
	t.Helper()
	data, err := os.ReadFile(a.LogPath)
	if err != nil {
		t.Fatal(err)
	}
	return strings.Count(string(data), s)
}

// lastLife is the agent's log since its last start.
func lastLife(t *testing.T, a *bench.Agent) string {
	t.Helper()
	data, err := os.ReadFile(a.LogPath)
	if err != nil {
		t.Fatal(err)
	}
	s := string(data)
	return s[strings.LastIndex(s, "\n=== ")+1:]
}

// waitGone waits until the leader lists the agent no more and holds no
// state of a placed instance on it.
func waitGone(ctx context.Context, g *bench.Grapnel, agent string) error {
	wctx, cancel := context.WithTimeout(ctx, restartGrace+20*time.Second)
	defer cancel()
	var last string
	for {
		gone, why, err := agentGoneNow(wctx, g, agent)
		if err == nil && gone {
			return nil
		}
		if err != nil {
			why = err.Error()
		}
		last = why
		select {
		case <-wctx.Done():
			return fmt.Errorf("agent %s not gone past its grace: %s", agent, last)
		case <-time.After(50 * time.Millisecond):
		}
	}
}

func agentGoneNow(ctx context.Context, g *bench.Grapnel, agent string) (bool, string, error) {
	c, err := client.Dial(ctx, bench.Insecure(g.Addrs()))
	if err != nil {
		return false, "", err
	}
	defer c.Close()
	resp, err := c.Request(ctx, &ankbase.Request{RequestContent: &ankbase.Request_CompleteStateRequest{
		CompleteStateRequest: &ankbase.CompleteStateRequest{FieldMask: []string{"agents", "workloadStates"}}}})
	if err != nil {
		return false, "", err
	}
	cs := resp.GetCompleteStateResponse().GetCompleteState()
	if _, ok := cs.GetAgents().GetAgents()[agent]; ok {
		return false, "still in the agent map", nil
	}
	for wl := range cs.GetWorkloadStates().GetAgentStateMap()[agent].GetWlNameStateMap() {
		if wl == "mon" || wl == "logger" {
			return false, "a state of " + wl + " on it", nil
		}
	}
	return true, "", nil
}
