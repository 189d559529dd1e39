// Command grapnel-agent-bench measures what the agent issue promises, on
// real binaries on loopback: three grapnel-server replicas and two
// grapnel-agent processes with running workloads; the time from SIGKILL
// of the leader until both agents are attached to the new leader (over
// -kills kills), how many workloads those kills restarted (the goal is
// none), the time from an UpdateState to Running for a process workload
// and a podman workload, and the agents' idle RSS; insecure, or with mTLS
// on gRPC and Raft and gossip encrypted as a vehicle runs it (-security).
// scripts/bench.sh --agents builds the binaries and runs it.
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
	"github.com/grapnel-io/grapnel/chaos/pki"
	"github.com/grapnel-io/grapnel/rpc/client"
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
	security            string
	keep                bool
}

func parse(args []string) (options, error) {
	fs := flag.NewFlagSet("grapnel-agent-bench", flag.ContinueOnError)
	var o options
	fs.StringVar(&o.serverBin, "grapnel-server", "", "grapnel-server binary (required)")
	fs.StringVar(&o.agentBin, "grapnel-agent", "", "grapnel-agent binary (required)")
	fs.IntVar(&o.kills, "kills", 50, "leader kills")
	fs.IntVar(&o.runs, "runs", 10, "apply→Running samples per runtime")
	fs.IntVar(&o.perAgent, "workloads", 3, "running process workloads per agent during the kills")
	fs.DurationVar(&o.settle, "settle", time.Second, "pause on a healthy cluster before each kill")
	fs.DurationVar(&o.bound, "bound", 60*time.Second, "longest wait for any one step")
	fs.StringVar(&o.out, "out", "", "also write the report to this file")
	fs.StringVar(&o.workDir, "work-dir", "", "data dirs and logs (default: a temp dir, removed unless the run fails or -keep)")
	fs.BoolVar(&o.keep, "keep", false, "keep the work dir")
	fs.StringVar(&o.security, "security", "tls", "insecure, or tls: mTLS on gRPC and Raft (agents included), gossip encrypted, as a vehicle runs it")
	if err := fs.Parse(args); err != nil {
		return o, err
	}
	switch {
	case o.serverBin == "" || o.agentBin == "":
		return o, errors.New("-grapnel-server and -grapnel-agent are required")
	case o.kills < 1 || o.runs < 1 || o.perAgent < 1:
		return o, errors.New("-kills, -runs and -workloads must be at least 1")
	case o.security != "insecure" && o.security != "tls":
		return o, fmt.Errorf("-security %q: insecure or tls", o.security)
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
	agentNames := []string{"agent_A", "agent_B"}
	var certs *pki.Set
	if o.security == "tls" {
		if certs, err = pki.Make(filepath.Join(dir, "pki"), nil, agentNames, 24*time.Hour); err != nil {
			return err
		}
	}
	g, err := bench.StartGrapnel(bench.GrapnelConfig{Bin: o.serverBin, Dir: dir, Replicas: 3, PKI: certs})
	if err != nil {
		return err
	}
	defer g.Close()
	co := g.ClientOptions()
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
	for _, a := range []struct{ name, rts string }{{agentNames[0], rtA}, {agentNames[1], "process"}} {
		ac := bench.AgentConfig{Bin: o.agentBin, Dir: dir, Name: a.name, Servers: g.Addrs(), Runtimes: strings.Split(a.rts, ",")}
		if certs != nil {
			tls := certs.Agents[a.name]
			ac.TLS = &tls
		}
		ag, err := bench.StartAgent(ac)
		if err != nil {
			return err
		}
		agents = append(agents, ag)
		defer ag.Kill()
	}
	sctx, cancel = step()
	_, err = g.WaitAttached(sctx, agentNames...)
	cancel()
	if err != nil {
		return err
	}

	// apply → Running.
	measure := func(kind string, mk func(agent, arg string) *state.Workload) ([]time.Duration, error) {
		var out []time.Duration
		for i := range o.runs {
			sctx, cancel := step()
			d, err := bench.TimeToRunning(sctx, co, fmt.Sprintf("probe_%s_%d", kind, i), mk("agent_A", fmt.Sprint(3000+i)))
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
	if err := applyAll(ctx, co, manifest); err != nil {
		return err
	}
	sctx, cancel = step()
	ws, err := bench.WaitStatesWith(sctx, co, "steady workloads running", bench.AllRunning(manifest))
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
		leader, err := g.WaitAttached(sctx, agentNames...)
		cancel()
		if err != nil {
			return fmt.Errorf("kill %d: %w", k+1, err)
		}
		g.Kill(leader)
		killed := time.Now()
		sctx, cancel = step()
		next, err := g.WaitAttached(sctx, agentNames...)
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
	ws, err = bench.WaitStatesWith(sctx, co, "steady workloads running after the kills", bench.AllRunning(manifest))
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
	fmt.Fprintf(&b, "grapnel-agent-bench %s: 3 replicas, 2 agents, %d workloads (podman: %v), %d leader kills, %s, on %d CPUs\n\n",
		time.Now().Format(time.RFC3339), len(manifest), withPodman, o.kills, securityText(o.security), runtime.NumCPU())
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
		fmt.Fprintf(&b, "RSS of %s 5 s after the last apply: %.1f MiB (idle, settled: make bench-vehicle)\n", a.Name, float64(rss[i])/(1<<20))
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

func applyAll(ctx context.Context, co client.Options, ws map[string]*state.Workload) error {
	actx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	return bench.ApplyWorkloadsWith(actx, co, ws)
}

func securityText(mode string) string {
	if mode == "tls" {
		return "mTLS on gRPC and Raft, gossip encrypted"
	}
	return "insecure"
}
