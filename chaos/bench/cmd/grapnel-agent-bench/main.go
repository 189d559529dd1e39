// Command grapnel-agent-bench measures what the agent issue promises, on
// real binaries on loopback: three grapnel-server replicas and two
// grapnel-agent processes with running workloads; the time from SIGKILL
// of the leader until both agents are attached to the new leader (over
// -kills kills), how many workloads those kills restarted (the goal is
// none), the time from an UpdateState to Running for a process workload
// and a podman workload, and the agents' idle RSS. scripts/bench.sh
// --agents builds the binaries and runs it.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"time"

	"github.com/grapnel-io/grapnel/agent/runtime/podman"
	"github.com/grapnel-io/grapnel/chaos/bench"
	"github.com/grapnel-io/grapnel/state"
)

// testImage is the image scripts/podman-setup.sh builds offline.
const testImage = "localhost/grapnel-busybox:latest"

type options struct {
	serverBin, agentBin string
	kills, runs         int
	perAgent            int
	settle, bound       time.Duration
	out, workDir        string
	keep                bool
}

func parse(args []string) (options, error) {
	fs := flag.NewFlagSet("grapnel-agent-bench", flag.ContinueOnError)
	var o options
	fs.StringVar(&o.serverBin, "grapnel-server", "", "grapnel-server binary (required)")
	fs.StringVar(&o.agentBin, "grapnel-agent", "", "grapnel-agent binary (required)")
	fs.IntVar(&o.kills, "kills", 20, "leader kills")
	fs.IntVar(&o.runs, "runs", 10, "apply→Running samples per runtime")
	fs.IntVar(&o.perAgent, "workloads", 3, "running process workloads per agent during the kills")
	fs.DurationVar(&o.settle, "settle", time.Second, "pause on a healthy cluster before each kill")
	fs.DurationVar(&o.bound, "bound", 60*time.Second, "longest wait for any one step")
	fs.StringVar(&o.out, "out", "", "also write the report to this file")
	fs.StringVar(&o.workDir, "work-dir", "", "data dirs and logs (default: a temp dir, removed unless the run fails or -keep)")
	fs.BoolVar(&o.keep, "keep", false, "keep the work dir")
	if err := fs.Parse(args); err != nil {
		return o, err
	}
	switch {
	case o.serverBin == "" || o.agentBin == "":
		return o, errors.New("-grapnel-server and -grapnel-agent are required")
	case o.kills < 1 || o.runs < 1 || o.perAgent < 1:
		return o, errors.New("-kills, -runs and -workloads must be at least 1")
	}
	return o, nil
}

func main() { bench.Main("grapnel-agent-bench", parse, run) }

func podmanWorkload(agent, arg string) *state.Workload {
	return &state.Workload{Agent: agent, Runtime: "podman", RestartPolicy: state.RestartNever,
		RuntimeConfig: "image: " + testImage + "\ncommandArgs: [\"sleep\", \"" + arg + "\"]\n"}
}

func run(ctx context.Context, o options, stdout io.Writer) (err error) {
	dir, cleanup, err := bench.WorkDir(o.workDir, "grapnel-agent-bench-", o.keep)
	if err != nil {
		return err
	}
	defer func() { cleanup(err != nil) }()
	withPodman := podman.Available("") && exec.Command("podman", "image", "exists", testImage).Run() == nil
	g, err := bench.StartGrapnel(bench.GrapnelConfig{Bin: o.serverBin, Dir: dir, Replicas: 3})
	if err != nil {
		return err
	}
	defer g.Close()
	step := func() (context.Context, context.CancelFunc) { return context.WithTimeout(ctx, o.bound) }
	sctx, cancel := step()
	_, err = g.WaitHealthy(sctx)
	cancel()
	if err != nil {
		return err
	}
	rtA := "process"
	if withPodman {
		rtA = "process,podman"
	}
	var agents []*bench.Agent
	defer func() { bench.RemoveWorkloads(agents) }()
	for _, a := range []struct{ name, rts string }{{"agent_A", rtA}, {"agent_B", "process"}} {
		ag, err := bench.StartAgent(bench.AgentConfig{Bin: o.agentBin, Dir: dir, Name: a.name, Servers: g.Addrs(), Runtimes: strings.Split(a.rts, ",")})
		if err != nil {
			return err
		}
		agents = append(agents, ag)
		defer ag.Kill()
	}
	sctx, cancel = step()
	_, err = g.WaitAttached(sctx, "agent_A", "agent_B")
	cancel()
	if err != nil {
		return err
	}

	// apply → Running.
	measure := func(kind string, mk func(agent, arg string) *state.Workload) ([]time.Duration, error) {
		var out []time.Duration
		for i := range o.runs {
			sctx, cancel := step()
			d, err := bench.TimeToRunning(sctx, g.Addrs(), fmt.Sprintf("probe_%s_%d", kind, i), mk("agent_A", fmt.Sprint(3000+i)))
			cancel()
			if err != nil {
				return nil, fmt.Errorf("%s apply→Running: %w", kind, err)
			}
			out = append(out, d)
		}
		bench.Logf("%s apply→Running: %v", kind, out)
		return out, nil
	}
	procTimes, err := measure("process", bench.ProcessWorkload)
	if err != nil {
		return err
	}
	var podTimes []time.Duration
	if withPodman {
		if podTimes, err = measure("podman", podmanWorkload); err != nil {
			return err
		}
	}

	// The steady workloads the kills must not restart.
	manifest := map[string]*state.Workload{}
	for _, a := range []string{"agent_A", "agent_B"} {
		for i := range o.perAgent {
			manifest[fmt.Sprintf("%s_w%d", a, i)] = bench.ProcessWorkload(a, "3600")
		}
	}
	if withPodman {
		manifest["agent_A_ctr"] = podmanWorkload("agent_A", "3600")
	}
	if err := applyAll(ctx, g.Addrs(), manifest); err != nil {
		return err
	}
	sctx, cancel = step()
	ws, err := bench.WaitStates(sctx, g.Addrs(), "steady workloads running", bench.AllRunning(manifest))
	cancel()
	if err != nil {
		return err
	}
	before, err := bench.HostIDs(agents, ws)
	if err != nil {
		return err
	}
	if len(before) != len(manifest) {
		return fmt.Errorf("host ids of %d of %d workloads", len(before), len(manifest))
	}

	// Idle RSS, after the workloads settled.
	time.Sleep(5 * time.Second)
	var rss []int64
	for _, a := range agents {
		r, err := bench.RSS(a.Pid())
		if err != nil {
			return err
		}
		rss = append(rss, r)
	}

	var reconnect []time.Duration
	for k := range o.kills {
		time.Sleep(o.settle)
		sctx, cancel := step()
		leader, err := g.WaitAttached(sctx, "agent_A", "agent_B")
		cancel()
		if err != nil {
			return fmt.Errorf("kill %d: %w", k+1, err)
		}
		g.Kill(leader)
		killed := time.Now()
		sctx, cancel = step()
		next, err := g.WaitAttached(sctx, "agent_A", "agent_B")
		cancel()
		if err != nil {
			return fmt.Errorf("kill %d: %w", k+1, err)
		}
		d := time.Since(killed)
		reconnect = append(reconnect, d)
		bench.Logf("kill %d: %s killed, both agents on %s after %v", k+1, g.Replicas[leader].Name, g.Replicas[next].Name, d.Round(time.Millisecond))
		if err := g.Start(leader); err != nil {
			return err
		}
		sctx, cancel = step()
		_, err = g.WaitHealthy(sctx)
		cancel()
		if err != nil {
			return fmt.Errorf("kill %d: %w", k+1, err)
		}
	}
	sctx, cancel = step()
	ws, err = bench.WaitStates(sctx, g.Addrs(), "steady workloads running after the kills", bench.AllRunning(manifest))
	cancel()
	if err != nil {
		return err
	}
	after, err := bench.HostIDs(agents, ws)
	if err != nil {
		return err
	}
	restarted := bench.Restarted(before, after)

	var b strings.Builder
	fmt.Fprintf(&b, "grapnel-agent-bench %s: 3 replicas, 2 agents, %d workloads (podman: %v), %d leader kills, on %d CPUs\n\n",
		time.Now().Format(time.RFC3339), len(manifest), withPodman, o.kills, runtime.NumCPU())
	sum := func(ds []time.Duration) string {
		d := slices.Clone(ds)
		slices.Sort(d)
		return fmt.Sprintf("p50 %s  p99 %s  max %s  (n=%d)", bench.FormatDuration(bench.Percentile(d, 50)),
			bench.FormatDuration(bench.Percentile(d, 99)), bench.FormatDuration(bench.Percentile(d, 100)), len(d))
	}
	fmt.Fprintf(&b, "leader SIGKILL → both agents attached to the new leader: %s\n", sum(reconnect))
	fmt.Fprintf(&b, "workloads restarted by the kills: %d of %d\n", len(restarted), len(before))
	for _, r := range restarted {
		fmt.Fprintf(&b, "  %s\n", r)
	}
	fmt.Fprintf(&b, "UpdateState → Running, process workload: %s\n", sum(procTimes))
	if withPodman {
		fmt.Fprintf(&b, "UpdateState → Running, podman workload:  %s\n", sum(podTimes))
	} else {
		fmt.Fprintf(&b, "UpdateState → Running, podman workload:  not measured (podman not set up: scripts/podman-setup.sh)\n")
	}
	for i, a := range agents {
		fmt.Fprintf(&b, "idle RSS of %s: %.1f MiB\n", a.Name, float64(rss[i])/(1<<20))
	}
	fmt.Fprint(stdout, b.String())
	if o.out != "" {
		if err := os.MkdirAll(filepath.Dir(o.out), 0o755); err != nil {
			return err
		}
		return os.WriteFile(o.out, []byte(b.String()), 0o644)
	}
	return nil
}

func applyAll(ctx context.Context, addrs []string, ws map[string]*state.Workload) error {
	actx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	return bench.ApplyWorkloads(actx, addrs, ws)
}
