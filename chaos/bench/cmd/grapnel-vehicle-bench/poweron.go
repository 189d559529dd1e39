package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	goruntime "runtime"
	"slices"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/grapnel-io/grapnel/chaos/bench"
	"github.com/grapnel-io/grapnel/state"
)

// Power-on targets (issue 32): three replicas powered on together with
// existing data have a leader and answer within apiTarget; every workload
// of every agent runs again within runningTarget of power-on.
const (
	apiTarget     = 200 * time.Millisecond
	runningTarget = 400 * time.Millisecond
)

// benchNice is the nice value the bench measures power-ons at.
const benchNice = -5

// sleepBase is the duration of the first workload's sleep; every workload
// sleeps a second longer than the one before, so its argument names it in
// /proc.
const sleepBase = 1_000_000

// powerCycle is what one power-on showed.
type powerCycle struct {
	api time.Duration // power-on -> first answer of any replica
	// all is power-on -> every workload shown Running with its process
	// running in the new domain; 0 when not all came back within the bound.
	all  time.Duration
	back int // workloads shown Running with their process running
	// stale counts the workloads shown Running while no process of theirs
	// ran in the domain, in how many answers, and the last time one was.
	stale, staleAnswers int
	lastStale           time.Duration
	answers             int // state answers read
	// elections is how far the Raft term moved with this power-on: one
	// election is the least a power-on takes, more mean that a leader
	// lost its followers meanwhile.
	elections uint64
	// CPU from power-on to the end of the measurement, in clock ticks:
	// the machine's capacity (all cores) and what the domain, this bench
	// and the rest (other processes on the machine, kernel threads,
	// interrupts) used of it.
	capacity, domain, self, rest int64
	byClass                      map[string]int64 // the domain's, by process class
}

// The classes of the domain's processes, as the report lists them.
var procClasses = []string{"replicas", "agents", "shims", "workloads", "init"}

// cpuMark is the machine's and this process's CPU use at an instant.
type cpuMark struct{ busy, total, self int64 }

func markCPU() cpuMark {
	busy, total, _ := bench.HostCPU()
	return cpuMark{busy: busy, total: total, self: bench.SelfCPUTicks()}
}

// powerOnCycles measures power cycles with the agents' run folders on the
// same disk as the data directories.
func powerOnCycles(ctx context.Context, o options, dir string, b *strings.Builder) error {
	return cyclePower(ctx, o, dir, "", b)
}

// powerOnCyclesTmpfs measures them with the run folders on a tmpfs that
// every power cycle empties, as a reboot does.
func powerOnCyclesTmpfs(ctx context.Context, o options, dir string, b *strings.Builder) error {
	shm, err := os.MkdirTemp("/dev/shm", "grapnel-vehicle-bench-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(shm)
	// Workloads run under uids of their own and must pass through it to
	// their directories, as through /run (the agent refuses otherwise).
	if err := os.Chmod(shm, 0o711); err != nil {
		return err
	}
	return cyclePower(ctx, o, dir, shm, b)
}

// cyclePower runs the replicas and agents in a power domain, forms the
// cluster, applies the workloads and waits until they run; then it cuts
// the power o.cycles times and measures each power-on. runTmpfs, when not
// empty, holds the agents' run folders and is emptied before every
// power-on.
func cyclePower(ctx context.Context, o options, dir, runTmpfs string, b *strings.Builder) (err error) {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	// Absolute, as the process runtime names its shim (os.Executable), so
	// that the CPU of each process can be told by its argv[0].
	if o.serverBin, err = filepath.Abs(o.serverBin); err != nil {
		return err
	}
	if o.agentBin, err = filepath.Abs(o.agentBin); err != nil {
		return err
	}
	g, err := bench.StartGrapnel(bench.GrapnelConfig{Bin: o.serverBin, Dir: dir, Replicas: o.replicas, Deferred: true})
	if err != nil {
		return err
	}
	defer g.Close()
	var spec bench.PowerSpec
	for i, r := range g.Replicas {
		spec.Commands = append(spec.Commands, bench.PowerCommand{Name: r.Name, Args: g.Command(i), Log: r.LogPath, Nice: o.replicaNice, TimerSlack: o.replicaSlack})
	}
	runDir := dir
	if runTmpfs != "" {
		runDir = runTmpfs
	}
	var agents []*bench.Agent
	manifest := map[string]*state.Workload{}
	byArg := map[string]string{} // the sleep's argument -> workload
	for i := range o.agents {
		name := fmt.Sprintf("agent_%d", i+1)
		a, err := bench.NewAgent(bench.AgentConfig{Bin: o.agentBin, Dir: runDir, Name: name, Servers: g.Addrs(), Runtimes: []string{"process"}})
		if err != nil {
			return err
		}
		agents = append(agents, a)
		spec.Commands = append(spec.Commands, bench.PowerCommand{Name: name, Args: a.Command(), Log: filepath.Join(dir, name+".log")})
		for j := range o.perAgent {
			arg := strconv.Itoa(sleepBase + len(manifest))
			wl := fmt.Sprintf("%s_w%d", name, j)
			manifest[wl] = bench.ProcessWorkload(name, arg)
			byArg[arg] = wl
		}
	}
	specPath, domainLog := filepath.Join(dir, "domain.json"), filepath.Join(dir, "domain.log")
	if err := bench.WritePowerSpec(specPath, spec); err != nil {
		return err
	}

	var d *bench.PowerDomain
	defer func() {
		if d == nil {
			return
		}
		cctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		if cerr := d.Cut(cctx); cerr != nil && err == nil {
			err = cerr
		}
	}()
	powerOn := func() error {
		if runTmpfs != "" {
			for _, a := range agents {
				if err := emptyDir(a.RunFolder); err != nil {
					return err
				}
			}
		}
		var err error
		d, err = bench.PowerOn(ctx, specPath, domainLog)
		return err
	}
	cut := func() error {
		cctx, cancel := context.WithTimeout(ctx, o.bound)
		defer cancel()
		err := d.Cut(cctx)
		d = nil
		return err
	}
	running := func(p *bench.DomainProcs) (map[string]bool, error) {
		argvs, err := p.Argvs()
		if err != nil {
			if d != nil && !d.Alive() {
				return nil, fmt.Errorf("the power domain ended on its own:\n%s", bench.LogTail(domainLog, 20))
			}
			return nil, err
		}
		out := map[string]bool{}
		for _, argv := range argvs {
			if wl, ok := workloadOf(argv, byArg); ok {
				out[wl] = true
			}
		}
		return out, nil
	}
	isSleep := func(argv []string) bool { _, ok := workloadOf(argv, byArg); return ok }
	classify := func(argv []string) string {
		switch {
		case isSleep(argv):
			return "workloads"
		case argv[0] == o.serverBin:
			return "replicas"
		case len(argv) > 1 && argv[1] == "grapnel-process-shim":
			return "shims" // the agent's executable, or Config.Shim
		case argv[0] == o.agentBin:
			return "agents"
		}
		return "init"
	}

	// The first power-on forms the cluster; the workloads are applied and
	// run before the first cut.
	if err := powerOn(); err != nil {
		return err
	}
	fctx, cancel := context.WithTimeout(ctx, o.bound)
	defer cancel()
	if _, err := firstOf(fctx, g.Addrs(), d.Started); err != nil {
		return fmt.Errorf("forming the cluster: %w\n%s", err, bench.LogTail(g.Replicas[0].LogPath, 20))
	}
	for {
		aerr := bench.ApplyWorkloads(fctx, g.Addrs(), manifest)
		if aerr == nil {
			break
		}
		select {
		case <-fctx.Done():
			return fmt.Errorf("applying the workloads: %w", aerr)
		case <-time.After(100 * time.Millisecond):
		}
	}
	if _, err := bench.WaitStates(fctx, g.Addrs(), "every workload running", bench.AllRunning(manifest)); err != nil {
		return err
	}
	procs := d.Procs("sleep")
	if err := bench.PollUntil(fctx, 10*time.Millisecond, func() (bool, error) {
		r, err := running(procs)
		return len(r) == len(manifest), err
	}); err != nil {
		return fmt.Errorf("the workloads' processes in the power domain: %w", err)
	}
	if err := bench.GrowLog(fctx, g.Addrs(), o.grow, true, o.bound); err != nil {
		return err
	}
	cancel()
	load := loadAverage()
	bench.Logf("power domain: %d replicas, %d agents, %d workloads running, %d updates written; %d power cycles (load average %.2f)",
		o.replicas, o.agents, len(manifest), o.grow, o.cycles, load)

	// The power-on starves every process of CPU: this one measures at a
	// higher priority, so that its requests and readings of /proc are not
	// late; the domain still runs at nice 0 (see bench.SetNice).
	if prev, err := bench.SetNice(benchNice); err != nil {
		bench.Logf("measuring at the normal priority: %v", err)
	} else {
		defer func() { _, _ = bench.SetNice(prev) }()
	}
	reader, err := bench.NewStateReader(g.Addrs())
	if err != nil {
		return err
	}
	defer reader.Close()
	term, err := raftTerm(ctx, g, o.bound)
	if err != nil {
		return err
	}
	var cycles []powerCycle
	for c := range o.cycles {
		if err := cut(); err != nil {
			return err
		}
		before := markCPU()
		if err := powerOn(); err != nil {
			return err
		}
		pc, err := measurePowerOn(ctx, o, d, g.Addrs(), reader, manifest, running, classify, before)
		if err != nil {
			return fmt.Errorf("cycle %d: %w", c+1, err)
		}
		now, err := raftTerm(ctx, g, o.bound)
		if err != nil {
			return fmt.Errorf("cycle %d: %w", c+1, err)
		}
		pc.elections, term = now-term, now
		cycles = append(cycles, pc)
		all := "not all"
		if pc.all > 0 {
			all = pc.all.Round(time.Millisecond).String()
		}
		bench.Logf("cycle %d: API %v, all Running %s, %d/%d back, %d stale Running, %d elections; CPU %s",
			c+1, pc.api.Round(time.Millisecond), all, pc.back, len(manifest), pc.stale, pc.elections, cpuText(pc))
	}
	where := "run folders on disk"
	if runTmpfs != "" {
		where = "run folders on a tmpfs emptied by every power cut"
	}
	if o.replicaNice != 0 {
		where += fmt.Sprintf(", replicas at nice %d", o.replicaNice)
	}
	where += ", " + slackText(o.replicaSlack)
	if o.grow > 0 {
		where += fmt.Sprintf(", %d config updates (one log entry each) written before the first cut", o.grow)
	}
	fmt.Fprintf(b, "\n== power-on: %d replicas + %d agents x %d process workloads in one pid namespace, SIGKILL of its pid 1, %d cycles, %s; %d cores, load average %.2f before the first cut\n",
		o.replicas, o.agents, o.perAgent, len(cycles), where, goruntime.NumCPU(), load)
	powerReport(b, o, cycles, len(manifest))
	return nil
}

// measurePowerOn measures one power-on of d: the first answer of any
// replica, then the workload states every o.poll until every workload is
// shown Running and its process ran in the domain before the states were
// asked for, or o.bound has passed since power-on. Any Running shown for a
// workload whose process did not run after the answer came is stale.
func measurePowerOn(ctx context.Context, o options, d *bench.PowerDomain, addrs []string, reader *bench.StateReader,
	manifest map[string]*state.Workload, running func(*bench.DomainProcs) (map[string]bool, error),
	classify func([]string) string, before cpuMark) (pc powerCycle, err error) {
	bctx, cancel := context.WithDeadline(ctx, d.Started.Add(o.bound))
	defer cancel()
	if pc.api, err = firstOf(bctx, addrs, d.Started); err != nil {
		return pc, err
	}
	procs := d.Procs("sleep")
	defer func() {
		// What the CPU did until every workload was back (or the bound).
		after := markCPU()
		byClass, derr := procs.CPUTicks(classify)
		if derr != nil && err == nil {
			err = derr
		}
		var domain int64
		for _, t := range byClass {
			domain += t
		}
		pc.byClass = byClass
		pc.capacity, pc.domain, pc.self = after.total-before.total, domain, after.self-before.self
		pc.rest = max(0, after.busy-before.busy-pc.domain-pc.self)
	}()
	backAt := map[string]time.Duration{}
	stale := map[string]bool{}
	tick := time.NewTicker(o.poll)
	defer tick.Stop()
	for len(backAt) < len(manifest) {
		// pre is what ran before the states were asked for, looked at
		// just before; post what runs once they came. (pre was the
		// previous answer's post, which counted a workload whose process
		// started meanwhile one answer late: 20–40 ms under load.)
		pre, err := running(procs)
		if err != nil {
			return pc, err
		}
		ws, qerr := reader.States(bctx, time.Second)
		at := time.Since(d.Started)
		if qerr == nil {
			pc.answers++
			post, err := running(procs)
			if err != nil {
				return pc, err
			}
			staleNow := false
			for wl := range manifest {
				s, ok := bench.StateOf(ws, wl)
				if !ok || s.State.State != state.StateRunning {
					continue
				}
				switch {
				case !post[wl]:
					stale[wl], staleNow = true, true
				case pre[wl] && backAt[wl] == 0:
					backAt[wl] = at
				}
			}
			if staleNow {
				pc.staleAnswers++
				pc.lastStale = at
			}
		}
		if len(backAt) == len(manifest) {
			break
		}
		select {
		case <-bctx.Done():
			if ctx.Err() != nil {
				return pc, ctx.Err()
			}
			bench.Logf("not every workload came back within %v of power-on (last error: %v)", o.bound, qerr)
			pc.back, pc.stale = len(backAt), len(stale)
			return pc, nil
		case <-tick.C:
		}
	}
	pc.back, pc.stale = len(backAt), len(stale)
	for _, t := range backAt {
		pc.all = max(pc.all, t)
	}
	return pc, nil
}

// raftTerm is the highest Raft term the replicas report, asked until one
// answers.
func raftTerm(ctx context.Context, g *bench.Grapnel, bound time.Duration) (uint64, error) {
	ctx, cancel := context.WithTimeout(ctx, bound)
	defer cancel()
	var term uint64
	var last error
	err := bench.PollUntil(ctx, 20*time.Millisecond, func() (bool, error) {
		for i := range g.Replicas {
			st, err := g.Status(ctx, i)
			if err != nil {
				last = err
				continue
			}
			term = max(term, st.GetTerm())
		}
		return term > 0, nil
	})
	if err != nil {
		return 0, fmt.Errorf("the replicas' Raft term: %w (last error %v)", err, last)
	}
	return term, nil
}

// workloadOf names the workload whose sleep argv is.
func workloadOf(argv []string, byArg map[string]string) (string, bool) {
	if len(argv) != 2 || filepath.Base(argv[0]) != "sleep" {
		return "", false
	}
	wl, ok := byArg[argv[1]]
	return wl, ok
}

func powerReport(b *strings.Builder, o options, cycles []powerCycle, expected int) {
	var api, all []time.Duration
	back, stale, staleAnswers, answers, staleCycles := 0, 0, 0, 0, 0
	var lastStale time.Duration
	for _, c := range cycles {
		api = append(api, c.api)
		if c.all > 0 {
			all = append(all, c.all)
		}
		back += c.back
		stale += c.stale
		staleAnswers += c.staleAnswers
		answers += c.answers
		if c.stale > 0 {
			staleCycles++
		}
		lastStale = max(lastStale, c.lastStale)
	}
	report(b, "power-on -> API", api)
	if len(all) > 0 {
		report(b, "-> all Running", all)
	}
	if n := len(cycles) - len(all); n > 0 {
		fmt.Fprintf(b, "%-16s %d of %d cycles did not have every workload Running within %v\n", "-> all Running", n, len(cycles), o.bound)
	}
	fmt.Fprintf(b, "%-16s %d of %d (shown Running, their process running in the new domain, within %v of power-on)\n",
		"workloads back", back, expected*len(cycles), o.bound)
	fmt.Fprintf(b, "%-16s %d workloads in %d of %d cycles (%d of %d state answers), the last %.1f ms after power-on\n",
		"stale Running", stale, staleCycles, len(cycles), staleAnswers, answers, float64(lastStale)/float64(time.Millisecond))
	slices.Sort(api)
	slices.Sort(all)
	apiP99 := bench.Percentile(api, 99)
	allP99 := bench.Percentile(all, 99)
	fmt.Fprintf(b, "target: a leader answers within %v of power-on (p99 %.1f ms): %s\n", apiTarget,
		float64(apiP99)/float64(time.Millisecond), met(apiP99 < apiTarget))
	fmt.Fprintf(b, "target: every workload Running within %v of power-on (p99 %.1f ms, %d of %d cycles): %s\n", runningTarget,
		float64(allP99)/float64(time.Millisecond), len(all), len(cycles), met(len(all) == len(cycles) && allP99 < runningTarget))
	fmt.Fprintf(b, "no Running shown for a workload that did not run: %s\n", met(stale == 0))
	more := 0
	for _, c := range cycles {
		if c.elections > 1 {
			more++
		}
	}
	fmt.Fprintf(b, "power-ons with more than one election (a leader lost its followers while the workloads started): %d of %d\n", more, len(cycles))
	var polled time.Duration
	for _, c := range cycles {
		end := c.all
		if end == 0 {
			end = o.bound
		}
		polled += max(0, end-c.api)
	}
	every := "-"
	if answers > 0 {
		every = fmt.Sprintf("%.0f ms", float64(polled)/float64(answers)/float64(time.Millisecond))
	}
	fmt.Fprintf(b, "states asked for every %v, answered every %s on average: a workload counts as back at the first answer that shows it Running once its process runs\n", o.poll, every)
	var domainSec []time.Duration
	shares := make([][]float64, 3)
	for _, c := range cycles {
		if c.capacity <= 0 {
			continue
		}
		domainSec = append(domainSec, time.Duration(c.domain)*time.Second/100)
		for i, t := range []int64{c.domain, c.self, c.rest} {
			shares[i] = append(shares[i], 100*float64(t)/float64(c.capacity))
		}
	}
	if len(domainSec) > 0 {
		slices.Sort(domainSec)
		med := func(v []float64) float64 { slices.Sort(v); return v[(len(v)-1)/2] }
		fmt.Fprintf(b, "CPU from power-on until all Running (median): the domain used %.2f s, %.0f%% of the machine; this bench %.0f%%; the rest (other processes, kernel threads, interrupts) %.0f%%\n",
			bench.Percentile(domainSec, 50).Seconds(), med(shares[0]), med(shares[1]), med(shares[2]))
		var parts []string
		for _, class := range procClasses {
			var v []time.Duration
			for _, c := range cycles {
				if c.capacity > 0 {
					v = append(v, time.Duration(c.byClass[class])*time.Second/100)
				}
			}
			slices.Sort(v)
			parts = append(parts, fmt.Sprintf("%s %.2f s", class, bench.Percentile(v, 50).Seconds()))
		}
		fmt.Fprintf(b, "the domain's CPU by process (median): %s\n", strings.Join(parts, ", "))
	}
	tw := tabwriter.NewWriter(b, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "cycle\tAPI\tall Running\tback\tstale Running\tlast stale\telections\tCPU domain / bench / rest / idle\t")
	for i, c := range cycles {
		all := "-"
		if c.all > 0 {
			all = fmt.Sprintf("%.1f ms", float64(c.all)/float64(time.Millisecond))
		}
		last := "-"
		if c.stale > 0 {
			last = fmt.Sprintf("%.1f ms", float64(c.lastStale)/float64(time.Millisecond))
		}
		fmt.Fprintf(tw, "%d\t%.1f ms\t%s\t%d/%d\t%d\t%s\t%d\t%s\t\n", i+1, float64(c.api)/float64(time.Millisecond), all,
			c.back, expected, c.stale, last, c.elections, cpuText(c))
	}
	tw.Flush()
}

// emptyDir removes what dir holds, as a reboot empties a tmpfs.
func emptyDir(dir string) error {
	entries, err := os.ReadDir(dir)
	if err != nil && !errors.Is(err, os.ErrNotExist) {
		return err
	}
	for _, e := range entries {
		if err := os.RemoveAll(filepath.Join(dir, e.Name())); err != nil {
			return err
		}
	}
	return nil
}

// cpuText shows the CPU of a cycle as shares of the machine's capacity
// (all cores, power-on to the end of the measurement): the domain's,
// this bench's, the rest's and idle.
func cpuText(c powerCycle) string {
	if c.capacity <= 0 {
		return "-"
	}
	pct := func(t int64) float64 { return 100 * float64(t) / float64(c.capacity) }
	idle := max(0, c.capacity-c.domain-c.self-c.rest)
	return fmt.Sprintf("%.0f%% / %.0f%% / %.0f%% / %.0f%%", pct(c.domain), pct(c.self), pct(c.rest), pct(idle))
}

// loadAverage is the 1-minute load average; 0 when unknown.
func loadAverage() float64 {
	b, err := os.ReadFile("/proc/loadavg")
	if err != nil {
		return 0
	}
	f := strings.Fields(string(b))
	if len(f) == 0 {
		return 0
	}
	v, _ := strconv.ParseFloat(f[0], 64)
	return v
}
