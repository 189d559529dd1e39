// Command grapnel-vehicle-bench measures what a vehicle asks of Grapnel, on
// real binaries on loopback: the idle footprint of a cluster that runs
// workloads and is left alone (bytes written per hour, CPU and RSS of
// every replica and agent), a single replica's time from exec to its
// first answer on an empty and on an existing data directory, and the
// time from starting three replicas with existing data together to the
// first answer, and power cycles of replicas, agents and workloads in one
// pid namespace (poweron.go): power-on to the first answer and to every
// workload running again, and whether a Running was shown for a workload
// that did not run. scripts/bench.sh --vehicle builds the binaries and runs
// it (make bench-vehicle; make bench-vehicle-quick is the short run).
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/grapnel-io/grapnel/chaos/bench"
	"github.com/grapnel-io/grapnel/chaos/pki"
	"github.com/grapnel-io/grapnel/state"
)

type options struct {
	serverBin, agentBin string
	replicas, agents    int
	perAgent            int
	settle, window      time.Duration
	starts, cycles      int
	grow                int
	bound, poll         time.Duration
	out, workDir        string
	keep                bool
	parts               string
	replicaNice         int
	replicaSlack        time.Duration
	security            string
}

func parse(args []string) (options, error) {
	fs := flag.NewFlagSet("grapnel-vehicle-bench", flag.ContinueOnError)
	var o options
	fs.StringVar(&o.serverBin, "grapnel-server", "", "grapnel-server binary (required)")
	fs.StringVar(&o.agentBin, "grapnel-agent", "", "grapnel-agent binary (required)")
	fs.IntVar(&o.replicas, "replicas", 3, "replicas of the idle cluster")
	fs.IntVar(&o.agents, "agents", 5, "agents of the idle cluster")
	fs.IntVar(&o.perAgent, "workloads", 10, "running process workloads per agent")
	fs.DurationVar(&o.settle, "settle", 20*time.Second, "wait after every workload runs before the idle window")
	fs.DurationVar(&o.window, "window", 60*time.Second, "idle window measured")
	fs.IntVar(&o.starts, "starts", 5, "single-replica starts per case (empty, existing data)")
	fs.IntVar(&o.cycles, "cycles", 10, "starts of the whole cluster on existing data, and power cycles")
	fs.IntVar(&o.grow, "grow", 0, "the power-on part's config updates, one log entry each, written before the first cut, so that every power-on replays them, as a vehicle's replicas do after a power cut that followed a drive")
	fs.DurationVar(&o.bound, "bound", 60*time.Second, "longest wait for any one step")
	fs.DurationVar(&o.poll, "poll", 20*time.Millisecond, "how often the power-on part reads the workload states")
	fs.StringVar(&o.security, "security", "insecure,tls", "the idle part's clusters, one after the other, comma-separated: insecure, tls (mTLS on gRPC and Raft, gossip encrypted, as a vehicle runs it)")
	fs.IntVar(&o.replicaNice, "replica-nice", 0, "nice value of the replicas in the power-on part (e.g. -10, as Nice= in their unit would set it)")
	bench.TimerSlackFlag(fs, &o.replicaSlack)
	fs.StringVar(&o.out, "out", "", "also write the report to this file")
	fs.StringVar(&o.workDir, "work-dir", "", "data dirs and logs (default: a temp dir, removed unless the run fails or -keep)")
	fs.BoolVar(&o.keep, "keep", false, "keep the work dir")
	fs.StringVar(&o.parts, "parts", "idle,single,cluster,poweron",
		"which measurements to run, comma-separated: idle, single, cluster, poweron, poweron-tmpfs (run folders on a tmpfs that each power cut empties)")
	if err := fs.Parse(args); err != nil {
		return o, err
	}
	switch {
	case o.serverBin == "" || o.agentBin == "":
		return o, errors.New("-grapnel-server and -grapnel-agent are required")
	case o.replicas < 1 || o.agents < 1 || o.perAgent < 1 || o.starts < 1 || o.cycles < 1:
		return o, errors.New("-replicas, -agents, -workloads, -starts and -cycles must be at least 1")
	case o.grow < 0:
		return o, errors.New("-grow must not be negative")
	case o.window < time.Second:
		return o, errors.New("-window must be at least 1s")
	case o.poll <= 0:
		return o, errors.New("-poll must be positive")
	}
	for _, m := range strings.Split(o.security, ",") {
		if m != "insecure" && m != "tls" {
			return o, fmt.Errorf("-security: %q is neither insecure nor tls", m)
		}
	}
	for _, p := range strings.Split(o.parts, ",") {
		if !slices.Contains(partNames, p) {
			return o, fmt.Errorf("-parts: unknown part %q (known: %s)", p, strings.Join(partNames, ", "))
		}
	}
	return o, nil
}

func main() {
	// The power-on part re-executes this binary as the init of a pid
	// namespace.
	bench.RunPowerInitIfRequested()
	bench.Main("grapnel-vehicle-bench", parse, run)
}

type part struct {
	name string
	fn   func(context.Context, options, string, *strings.Builder) error
}

var parts = []part{{"idle", idle}, {"single", singleStarts}, {"cluster", clusterStarts},
	{"poweron", powerOnCycles}, {"poweron-tmpfs", powerOnCyclesTmpfs}}

var partNames = func() []string {
	var out []string
	for _, p := range parts {
		out = append(out, p.name)
	}
	return out
}()

func run(ctx context.Context, o options, stdout io.Writer) (err error) {
	dir, cleanup, err := bench.WorkDir(o.workDir, "grapnel-vehicle-bench-", o.keep)
	if err != nil {
		return err
	}
	defer func() { cleanup(err != nil) }()
	var b strings.Builder
	fmt.Fprintf(&b, "grapnel-vehicle-bench %s\n", time.Now().UTC().Format(time.RFC3339))
	chosen := strings.Split(o.parts, ",")
	for _, p := range parts {
		if !slices.Contains(chosen, p.name) {
			continue
		}
		if err := p.fn(ctx, o, filepath.Join(dir, p.name), &b); err != nil {
			return fmt.Errorf("%s: %w", p.name, err)
		}
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

// idle measures the idle cluster once in each of -security's modes.
func idle(ctx context.Context, o options, dir string, b *strings.Builder) error {
	for _, mode := range strings.Split(o.security, ",") {
		if err := idleIn(ctx, o, mode, filepath.Join(dir, mode), b); err != nil {
			return fmt.Errorf("%s: %w", mode, err)
		}
	}
	return nil
}

// idleIn runs the cluster with its agents and workloads in security mode
// (insecure or tls), waits until every workload runs and the settle time
// passed, and measures the window.
func idleIn(ctx context.Context, o options, mode, dir string, b *strings.Builder) error {
	var certs *pki.Set
	if mode == "tls" {
		var agentNames []string
		for i := range o.agents {
			agentNames = append(agentNames, fmt.Sprintf("agent_%d", i+1))
		}
		var err error
		if certs, err = pki.Make(filepath.Join(dir, "pki"), nil, agentNames, 24*time.Hour); err != nil {
			return err
		}
	}
	g, err := bench.StartGrapnel(bench.GrapnelConfig{Bin: o.serverBin, Dir: dir, Replicas: o.replicas, PKI: certs, TimerSlack: o.replicaSlack})
	if err != nil {
		return err
	}
	defer g.Close()
	sctx, cancel := context.WithTimeout(ctx, o.bound)
	_, err = g.WaitHealthy(sctx)
	cancel()
	if err != nil {
		return err
	}
	var agents []*bench.Agent
	defer func() { bench.RemoveWorkloads(agents) }()
	var names []string
	for i := range o.agents {
		name := fmt.Sprintf("agent_%d", i+1)
		ac := bench.AgentConfig{Bin: o.agentBin, Dir: dir, Name: name, Servers: g.Addrs(), Runtimes: []string{"process"}}
		if certs != nil {
			tls := certs.Agents[name]
			ac.TLS = &tls
		}
		a, err := bench.StartAgent(ac)
		if err != nil {
			return err
		}
		defer a.Kill()
		agents = append(agents, a)
		names = append(names, name)
	}
	sctx, cancel = context.WithTimeout(ctx, o.bound)
	_, err = g.WaitAttached(sctx, names...)
	cancel()
	if err != nil {
		return err
	}
	manifest := map[string]*state.Workload{}
	for _, a := range names {
		for i := range o.perAgent {
			manifest[fmt.Sprintf("%s_w%d", a, i)] = bench.ProcessWorkload(a, "86400")
		}
	}
	actx, cancel := context.WithTimeout(ctx, o.bound)
	co := g.ClientOptions()
	err = bench.ApplyWorkloadsWith(actx, co, manifest)
	cancel()
	if err != nil {
		return err
	}
	sctx, cancel = context.WithTimeout(ctx, o.bound)
	_, err = bench.WaitStatesWith(sctx, co, "every workload running", bench.AllRunning(manifest))
	cancel()
	if err != nil {
		return err
	}
	bench.Logf("%d workloads run on %d agents; settling %v, then measuring %v", len(manifest), len(agents), o.settle, o.window)
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-time.After(o.settle):
	}
	pids := map[string]int{}
	for i, r := range g.Replicas {
		pids["replica "+r.Name] = g.Pid(i)
	}
	for _, a := range agents {
		pids["agent "+a.Name] = a.Pid()
		// The agent's children are its workloads' shims.
		shims, err := bench.Children(a.Pid())
		if err != nil {
			return err
		}
		if len(shims) != o.perAgent {
			return fmt.Errorf("agent %s has %d shims, want %d", a.Name, len(shims), o.perAgent)
		}
		for i, pid := range shims {
			pids[fmt.Sprintf("shim %s/%d", a.Name, i)] = pid
		}
	}
	fp, err := bench.MeasureIdle(ctx, pids, o.window)
	if err != nil {
		return err
	}
	fmt.Fprintf(b, "\n== idle: %d replicas, %d agents x %d process workloads, %s, %v window after %v settle, %s\n",
		o.replicas, o.agents, o.perAgent, mode, o.window, o.settle, slackText(o.replicaSlack))
	fmt.Fprintf(b, "%-16s %14s %10s %9s\n", "process", "written/hour", "CPU/core", "RSS")
	for _, f := range fp {
		if !strings.HasPrefix(f.Name, "shim ") {
			fmt.Fprintf(b, "%-16s %10.2f MiB %9.2f%% %5.1f MiB\n", f.Name, f.BytesPerHr/(1<<20), f.CPUPercent, float64(f.RSS)/(1<<20))
		}
	}
	reportKinds(b, fp)
	return nil
}

// idleTargets are issue 32's idle targets per kind of process: resident
// set and CPU of one core.
var idleTargets = []struct {
	kind   string
	rssMiB float64
	cpu    float64
}{{"replica", 15, 1}, {"agent", 10, 0.5}, {"shim", 2.5, 0.5}}

// reportKinds prints the spread of RSS and CPU over the processes of each
// kind (the first word of their name): replica, agent, shim; and whether
// the largest meets its target.
func reportKinds(b *strings.Builder, fp []bench.Footprint) {
	fmt.Fprintf(b, "%-8s %4s %28s %28s\n", "kind", "n", "RSS MiB min/median/max", "CPU/core % min/median/max")
	var targets strings.Builder
	for _, t := range idleTargets {
		kind := t.kind
		var rss, cpu []float64
		for _, f := range fp {
			if strings.HasPrefix(f.Name, kind+" ") {
				rss = append(rss, float64(f.RSS)/(1<<20))
				cpu = append(cpu, f.CPUPercent)
			}
		}
		if len(rss) == 0 {
			continue
		}
		slices.Sort(rss)
		slices.Sort(cpu)
		mid := func(v []float64) float64 { return v[(len(v)-1)/2] }
		fmt.Fprintf(b, "%-8s %4d %28s %28s\n", kind, len(rss),
			fmt.Sprintf("%.1f / %.1f / %.1f", rss[0], mid(rss), rss[len(rss)-1]),
			fmt.Sprintf("%.2f / %.2f / %.2f", cpu[0], mid(cpu), cpu[len(cpu)-1]))
		fmt.Fprintf(&targets, "target: every %s under %.1f MiB RSS (max %.1f): %s; under %.1f %% of a core (max %.2f %%): %s\n",
			kind, t.rssMiB, rss[len(rss)-1], met(rss[len(rss)-1] < t.rssMiB), t.cpu, cpu[len(cpu)-1], met(cpu[len(cpu)-1] < t.cpu))
	}
	b.WriteString(targets.String())
}

func met(ok bool) string {
	if ok {
		return "met"
	}
	return "MISSED"
}

// singleStarts measures a single replica from exec to its first answer,
// on a fresh data directory each time and on one with state.
func singleStarts(ctx context.Context, o options, dir string, b *strings.Builder) error {
	fmt.Fprintf(b, "\n== single replica, exec -> first answer (complete state request), %d starts each\n", o.starts)
	var empty, existing []time.Duration
	for i := range o.starts {
		d, err := startOnce(ctx, o, filepath.Join(dir, fmt.Sprintf("empty-%d", i)))
		if err != nil {
			return err
		}
		empty = append(empty, d)
	}
	kept := filepath.Join(dir, "existing")
	if _, err := startOnce(ctx, o, kept); err != nil { // gives it state
		return err
	}
	for range o.starts {
		d, err := startOnce(ctx, o, kept)
		if err != nil {
			return err
		}
		existing = append(existing, d)
	}
	report(b, "empty data dir", empty)
	report(b, "existing data", existing)
	return nil
}

func startOnce(ctx context.Context, o options, dir string) (time.Duration, error) {
	g, err := bench.StartGrapnel(bench.GrapnelConfig{Bin: o.serverBin, Dir: dir, Replicas: 1, Deferred: true, TimerSlack: o.replicaSlack})
	if err != nil {
		return 0, err
	}
	defer g.Close()
	start := time.Now()
	if err := g.Start(0); err != nil {
		return 0, err
	}
	sctx, cancel := context.WithTimeout(ctx, o.bound)
	defer cancel()
	return bench.FirstAnswer(sctx, g.Addrs()[0], start)
}

// clusterStarts starts all replicas of a cluster with state together,
// cycles times, and measures the time to the first answer.
func clusterStarts(ctx context.Context, o options, dir string, b *strings.Builder) error {
	g, err := bench.StartGrapnel(bench.GrapnelConfig{Bin: o.serverBin, Dir: dir, Replicas: o.replicas, TimerSlack: o.replicaSlack})
	if err != nil {
		return err
	}
	defer g.Close()
	sctx, cancel := context.WithTimeout(ctx, o.bound)
	_, err = g.WaitHealthy(sctx)
	cancel()
	if err != nil {
		return err
	}
	actx, cancel := context.WithTimeout(ctx, o.bound)
	err = bench.ApplyWorkloads(actx, g.Addrs(), map[string]*state.Workload{"kept": bench.ProcessWorkload("agent_none", "1")})
	cancel()
	if err != nil {
		return err
	}
	var times []time.Duration
	for range o.cycles {
		for i := range g.Replicas {
			g.Kill(i)
		}
		start := time.Now()
		for i := range g.Replicas {
			if err := g.Start(i); err != nil {
				return err
			}
		}
		sctx, cancel := context.WithTimeout(ctx, o.bound)
		d, err := firstOf(sctx, g.Addrs(), start)
		cancel()
		if err != nil {
			return err
		}
		times = append(times, d)
	}
	fmt.Fprintf(b, "\n== %d replicas with state started together -> first answer from any, %d cycles\n", o.replicas, o.cycles)
	report(b, "cluster start", times)
	return nil
}

// firstOf is the first answer from any of addrs.
func firstOf(ctx context.Context, addrs []string, start time.Time) (time.Duration, error) {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	type result struct {
		d   time.Duration
		err error
	}
	ch := make(chan result, len(addrs))
	for _, a := range addrs {
		go func() {
			d, err := bench.FirstAnswer(ctx, a, start)
			ch <- result{d, err}
		}()
	}
	var last error
	for range addrs {
		r := <-ch
		if r.err == nil {
			return r.d, nil
		}
		last = r.err
	}
	return 0, last
}

func report(b *strings.Builder, what string, ds []time.Duration) {
	s := slices.Clone(ds)
	slices.Sort(s)
	ms := func(d time.Duration) string { return fmt.Sprintf("%.1f ms", float64(d)/float64(time.Millisecond)) }
	fmt.Fprintf(b, "%-16s median %s  p99 %s  min %s  max %s  (n=%d)\n", what,
		ms(bench.Percentile(s, 50)), ms(bench.Percentile(s, 99)), ms(s[0]), ms(s[len(s)-1]), len(s))
}

// slackText says which timer slack the replicas ran with.
func slackText(d time.Duration) string {
	if d == 0 {
		return "replicas with the bench's timer slack"
	}
	return fmt.Sprintf("replica timer slack %v", d)
}
