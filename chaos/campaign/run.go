package campaign

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/signal"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/grapnel-io/grapnel/chaos/bench"
	"github.com/grapnel-io/grapnel/chaos/check"
	"github.com/grapnel-io/grapnel/chaos/clients"
	"github.com/grapnel-io/grapnel/chaos/history"
	"github.com/grapnel-io/grapnel/chaos/netns"
	"github.com/grapnel-io/grapnel/chaos/report"
	"github.com/grapnel-io/grapnel/state"
)

// Bounds of the waits; every loop of a campaign ends.
const (
	settleBound   = 45 * time.Second
	setupBound    = 90 * time.Second
	linearTimeout = 2 * time.Minute
	// longStepLimit caps the steps drawn for a long campaign; the
	// duration ends it long before.
	longStepLimit = 100000
)

// Result is a finished campaign: its report and where it was written.
type Result struct {
	Report *report.Report
	Dir    string
	// Log lists what went wrong without failing a check: faults that
	// could not be injected, a cluster that did not settle.
	Log []string
}

// Run runs a campaign: sets up the namespaces, starts the cluster, the
// observer and the clients, injects the faults, runs the comparison and
// the checkers, and writes report.json, summary.md and timeline.svg into
// cfg.Dir. An error means the campaign could not run; failed checks are
// in the report.
func Run(ctx context.Context, cfg Config) (*Result, error) {
	cfg, err := cfg.withDefaults()
	if err != nil {
		return nil, err
	}
	fl, err := cfg.mountFlash()
	if err != nil {
		return nil, err
	}
	defer fl.close()
	if err := cfg.checkFlashSteps(); err != nil {
		return nil, err
	}
	steps := cfg.Steps
	if len(steps) == 0 {
		steps = Plan(cfg.kinds(), cfg.Seed, cfg.Short, longStepLimit, cfg.Grace)
		if !cfg.Short {
			steps = ConfineUpgrades(steps, max(1, cfg.MinRounds/2))
		}
	}
	n, err := netns.Setup(netns.Config{Prefix: cfg.Prefix, Hosts: hosts})
	if err != nil {
		return nil, err
	}
	stopSignals := closeOnSignal(n, fl)
	defer stopSignals()
	defer n.Close()
	c, err := newCluster(n, cfg.Bins, cfg.Dir, cfg.Grace, nil, !cfg.Insecure, fl)
	if err != nil {
		return nil, err
	}
	defer c.close()
	c.selfBin = cfg.Self
	c.logStore = cfg.RaftLogStore
	c.logf = cfg.Logf
	r := &runner{cfg: cfg, c: c, res: &Result{Dir: cfg.Dir}}
	if i := PreviousAtStart(steps, len(c.reps)); i >= 0 {
		c.prev = cfg.Previous
		c.reps[i].previous = true
		r.upgrading = true
	}
	return r.res, r.run(ctx, steps)
}

// hosts is the number of test hosts: a replica and an agent on each.
const hosts = 3

// mountFlash mounts the flash of every host when c.Flash is set. A mount
// point with something on it is an error; a mount that fails (no FUSE,
// not root) turns c.Flash off with the reason in c.NoFlash, said loudly,
// unless c.RequireFlash makes it an error.
func (c *Config) mountFlash() (*flash, error) {
	if !c.Flash {
		return nil, nil
	}
	for i := range hosts {
		_, mp := flashDirs(c.Dir, i)
		if err := mountedOver(mp); err != nil {
			return nil, err
		}
	}
	fl, err := newFlash(c.Dir, hosts, c.Seed, c.FlashModel, c.Logf)
	switch {
	case err == nil:
		c.Logf("flash: every host's data dirs and run folder on a flashfs mount (%s model) under %s",
			c.FlashModel, filepath.Join(c.Dir, "mnt"))
		return fl, nil
	case c.RequireFlash:
		return nil, fmt.Errorf("%w: %v", ErrNoFlash, err)
	}
	c.Flash = false
	c.NoFlash = "the flash file system could not be mounted: " + err.Error()
	c.Logf("NO FLASH: %s. The campaign runs on the run directory's disk and leaves out %v (GRAPNEL_REQUIRE_FUSE=1 makes this an error)",
		c.NoFlash, FlashKinds)
	return nil, nil
}

// closeOnSignal makes SIGINT or SIGTERM end the campaign at once: the
// network closed with every process in it (netns Net.Close), the flash
// mounts detached, and exit with 128+signal, so an interrupted campaign
// leaves nothing behind. The returned func uninstalls it.
func closeOnSignal(n *netns.Net, fl *flash) func() {
	ch := make(chan os.Signal, 1)
	signal.Notify(ch, syscall.SIGINT, syscall.SIGTERM)
	done := make(chan struct{})
	go func() {
		select {
		case s := <-ch:
			if err := n.Close(); err != nil {
				fmt.Fprintln(os.Stderr, "campaign: close on signal:", err)
			}
			fl.detach()
			code := 1
			if sig, ok := s.(syscall.Signal); ok {
				code = 128 + int(sig)
			}
			os.Exit(code)
		case <-done:
		}
	}()
	var once sync.Once
	return func() { once.Do(func() { signal.Stop(ch); close(done) }) }
}

// runner holds one campaign's state.
type runner struct {
	cfg Config
	c   *cluster
	res *Result

	want      map[string]string // stable workload → agent
	idsBefore map[string]string
	keys      []string
	faults    []injected
	compare   []injected
	// faultsEnd is when the comparison began: the window of the last
	// fault ends there, or its figures would count the comparison's
	// restart as that fault's election.
	faultsEnd time.Time
	// upgrading is set while the plan's upgrades are not finalized: a
	// replica started on the previous release.
	upgrading bool
	// n numbers the faults injected; start is when the run began.
	n     int
	start time.Time
	// idFaults are the stable workloads that changed pid between the
	// start or a power cut and the next power cut; powerCuts counts the
	// power cuts after which every stable workload ran again (each
	// replaces them all).
	idFaults  []string
	powerCuts int
	// flash are the flash faults' measurements, for the check.
	flash []FlashMeasured
}

func (r *runner) logf(format string, args ...any) {
	msg := fmt.Sprintf(format, args...)
	r.cfg.Logf("%s", msg)
}

// problem is logged and kept in the result.
func (r *runner) problem(format string, args ...any) {
	msg := fmt.Sprintf(format, args...)
	r.res.Log = append(r.res.Log, msg)
	r.cfg.Logf("PROBLEM: %s", msg)
}

func (r *runner) run(ctx context.Context, steps []Step) error {
	start := time.Now()
	r.start = start
	if err := r.setup(ctx); err != nil {
		return err
	}
	obsCtx, stopObs := context.WithCancel(ctx)
	o := &observer{c: r.c}
	var obsDone sync.WaitGroup
	obsDone.Go(func() { o.run(obsCtx) })
	defer func() { stopObs(); obsDone.Wait() }()

	histPath := filepath.Join(r.cfg.Dir, "history.json")
	cl, err := r.startClients(histPath)
	if err != nil {
		return err
	}
	defer cl.kill()
	sleep(ctx, 2*time.Second) // a steady state before the first fault

	r.inject(ctx, steps)
	if err := r.c.waitSettled(ctx, settleBound); err != nil {
		r.problem("after the faults: %v", err)
	}
	r.faultsEnd = time.Now()
	r.comparison(ctx)
	if err := r.c.waitSettled(ctx, settleBound); err != nil {
		r.problem("after the comparison: %v", err)
	}
	sleep(ctx, time.Second)

	// Stop the clients; they save the history on the interrupt.
	_ = cl.signal(syscall.SIGINT)
	select {
	case <-cl.done:
	case <-time.After(30 * time.Second):
		cl.kill()
		return fmt.Errorf("clients did not end within 30 s after the interrupt")
	}
	ops, err := history.Load(histPath)
	if err != nil {
		return fmt.Errorf("clients history: %w", err)
	}
	rep := r.check(ctx, ops, o, start)
	r.res.Report = rep
	return r.write(rep)
}

// setup starts the replicas and agents, applies the stable workloads
// through the leader, waits until they run and records their pids.
func (r *runner) setup(ctx context.Context) error {
	for i := range r.c.reps {
		if err := r.c.startReplica(i); err != nil {
			return err
		}
	}
	for i := range r.c.agents {
		if err := r.c.startAgent(i); err != nil {
			return err
		}
	}
	if err := r.c.waitSettled(ctx, setupBound); err != nil {
		return err
	}
	r.want = map[string]string{}
	ws := map[string]*state.Workload{}
	for i, a := range r.c.agents {
		first, second := fmt.Sprintf("stable_h%d_a", i+1), fmt.Sprintf("stable_h%d_b", i+1)
		ws[first] = &state.Workload{Agent: a.name, Runtime: "process", RestartPolicy: state.RestartNever,
			RuntimeConfig: "command: /bin/sleep\nargs: [\"86400\"]\n"}
		ws[second] = &state.Workload{Agent: a.name, Runtime: "process", RestartPolicy: state.RestartNever,
			Dependencies:  map[string]state.AddCondition{first: state.AddCondRunning},
			RuntimeConfig: "command: /bin/sleep\nargs: [\"86400\"]\n"}
		r.want[first], r.want[second] = a.name, a.name
	}
	r.c.stable = r.want
	actx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	if err := bench.ApplyWorkloadsWith(actx, r.c.clientOptions(), ws); err != nil {
		return fmt.Errorf("apply the stable workloads: %w", err)
	}
	wctx, wcancel := context.WithTimeout(ctx, setupBound)
	defer wcancel()
	states, err := bench.WaitStatesWith(wctx, r.c.clientOptions(), "stable workloads running", func(s []state.WorkloadState) bool {
		return check.Converged(r.want, s).OK
	})
	if err != nil {
		return err
	}
	r.idsBefore, err = bench.HostIDs(r.c.benchAgents(), states)
	if err != nil {
		return err
	}
	for i := range DefaultKeys {
		r.keys = append(r.keys, fmt.Sprintf("chaos_k%d", i))
	}
	r.logf("cluster up: %d replicas, agents %v, %d stable workloads", len(r.c.reps), r.c.agentNames(), len(r.idsBefore))
	if r.upgrading {
		v, err := r.c.clusterVersion(ctx)
		if err != nil {
			return err
		}
		prev := r.c.onPrevious()
		r.logf("%s runs the previous release %s: the cluster runs at cluster version %d until the campaign finalizes the upgrade",
			r.c.replicaName(prev[0]), short(r.cfg.Previous.Commit), v)
		if v != state.ClusterVersionBaseline {
			return fmt.Errorf("the cluster bootstrapped at cluster version %d with %s on the previous release, which reads only %d",
				v, r.c.replicaName(prev[0]), state.ClusterVersionBaseline)
		}
	}
	return nil
}

// startClients runs `grapnel-chaos clients` in the client namespace.
func (r *runner) startClients(histPath string) (*proc, error) {
	cc := ClientsConfig{Addrs: r.c.addrs(), Keys: r.keys, Clients: r.cfg.Clients,
		Duration: 24 * time.Hour, Seed: r.cfg.Seed, Rate: DefaultRate, Out: histPath}
	if p := r.c.pki; p != nil {
		cc.TLS = &p.Operator
	}
	if !r.cfg.Short && len(r.cfg.Steps) == 0 {
		cc.Duration = r.cfg.Duration + 30*time.Minute
	} else {
		cc.Duration = time.Hour
	}
	args := append([]string{"clients"}, cc.Args()...)
	return startProc("clients", r.c.net.Command(r.c.net.Client(), r.cfg.Self, args...), filepath.Join(r.cfg.Dir, "clients.log"))
}

// inject runs the steps: each fault, then recovery (heal, every replica
// running and unfrozen) and a settled cluster, then the step's gap. A long
// campaign stops at the first end of a round of every kind after its
// duration has passed and at least MinRounds rounds ran, so every kind
// runs equally often (upgrade, confined to the first half of those
// rounds, excepted).
//
// After the plan's last upgrade every replica still on the previous release is upgraded too,
// and the campaign finalizes: the steps before run at cluster version 0,
// those after at 1.
//
// A flash fault while a replica runs the previous release waits until
// the upgrade is finalized: that release predates issue 29 (it syncs no
// directory, so a power cut under the per-directory model undoes its
// data dir, and it has no storage guard), and what it loses this release
// has fixed; the deferred faults run right after the finalize.
func (r *runner) inject(ctx context.Context, steps []Step) {
	var deadline time.Time
	if !r.cfg.Short && len(r.cfg.Steps) == 0 {
		deadline = time.Now().Add(r.cfg.Duration)
	}
	last := LastUpgrade(steps)
	var deferred []Step
	runDeferred := func() {
		for _, s := range deferred {
			r.step(ctx, s)
			sleep(ctx, s.Gap)
		}
		deferred = nil
	}
	for i, s := range steps {
		newRound := i > 0 && s.Round != steps[i-1].Round
		if ctx.Err() != nil || (!deadline.IsZero() && newRound && s.Round >= r.cfg.MinRounds && time.Now().After(deadline)) {
			break
		}
		if slices.Contains(FlashKinds, s.Kind) && len(r.c.onPrevious()) > 0 {
			r.logf("%s deferred until the upgrade is finalized: the previous release predates the flash faults", s)
			deferred = append(deferred, s)
		} else {
			r.step(ctx, s)
		}
		if i == last {
			r.finishUpgrade(ctx)
			runDeferred()
		}
		sleep(ctx, s.Gap)
	}
	r.finishUpgrade(ctx)
	if ctx.Err() == nil {
		runDeferred()
	}
}

// step injects one fault, then recovers.
func (r *runner) step(ctx context.Context, s Step) {
	r.n++
	r.logf("fault %d: %s", r.n, s)
	r.fault(ctx, fmt.Sprintf("fault %d %s", r.n, s.Kind), func() (injected, error) { return faults[s.Kind](ctx, r.c, s) })
	r.recover(ctx)
}

// fault runs one injection and keeps it; an error is a problem, also
// noted in the fault's detail.
func (r *runner) fault(ctx context.Context, name string, inject func() (injected, error)) {
	in, err := inject()
	if err != nil {
		r.problem("%s: %v", name, err)
		in.fault.Detail += " (error: " + err.Error() + ")"
	}
	if !in.fault.At.IsZero() {
		r.faults = append(r.faults, in)
	}
	if in.fault.Kind == string(PowerCut) && !in.fault.At.IsZero() {
		r.afterPowerCut(ctx, in)
	}
}

// afterPowerCut checks the stable workloads' pids up to the power cut
// against those of the start or the last power cut, and takes the pids
// they run with after it as the new ones: a power cut replaces every
// workload.
func (r *runner) afterPowerCut(ctx context.Context, in injected) {
	at := "the power cut at +" + in.fault.At.Sub(r.start).Round(time.Millisecond).String()
	if in.idsBefore == nil {
		r.idFaults = append(r.idFaults, "the pids could not be read before "+at)
	} else if res := check.StableIDs(r.idsBefore, in.idsBefore); !res.OK {
		r.idFaults = append(r.idFaults, "before "+at+": "+res.Detail)
	}
	after := in.idsAfter
	if after == nil {
		r.idFaults = append(r.idFaults, "not every stable workload ran again after "+at)
		after = r.c.stableIDs(ctx)
	} else {
		r.powerCuts++
	}
	r.idsBefore = after
}

// finishUpgrade ends the upgrade after the last upgrade fault: the
// replicas still on the previous release are upgraded (as upgrade
// faults, the leader last, as docs/upgrade.md orders), then the campaign
// finalizes. Nothing when the plan has no upgrade or it is finalized.
func (r *runner) finishUpgrade(ctx context.Context) {
	if !r.upgrading || ctx.Err() != nil {
		return
	}
	r.upgrading = false
	prev := r.c.onPrevious()
	if l, _ := r.c.leader(ctx); slices.Contains(prev, l) {
		prev = append(slices.DeleteFunc(prev, func(i int) bool { return i == l }), l)
	}
	for _, i := range prev {
		l, _ := r.c.leader(ctx)
		r.logf("closing upgrade: %s", r.c.replicaName(i))
		r.fault(ctx, "closing upgrade", func() (injected, error) {
			return swapRelease(ctx, r.c, Upgrade, i, i == l, 500*time.Millisecond)
		})
		r.recover(ctx)
	}
	r.logf("finalizing the upgrade")
	r.fault(ctx, "finalize", func() (injected, error) { return finalize(ctx, r.c) })
	r.recover(ctx)
}

// recover heals the network, wakes and starts every replica, and waits
// for a settled cluster.
func (r *runner) recover(ctx context.Context) {
	if err := r.c.net.Heal(); err != nil {
		r.problem("heal: %v", err)
	}
	if r.c.flash != nil {
		r.c.flash.group.Heal()
	}
	for i := range r.c.reps {
		if p := r.c.replicaProc(i); p != nil {
			_ = p.signal(syscall.SIGCONT)
			continue
		}
		if err := r.c.startReplica(i); err != nil {
			r.problem("restart %s: %v", r.c.replicaName(i), err)
		}
	}
	if err := r.c.waitSettled(ctx, settleBound); err != nil {
		r.problem("%v", err)
	}
}

// comparison restarts the cluster with hashicorp/raft's default timing
// and kills the leader cfg.ComparisonKills times.
func (r *runner) comparison(ctx context.Context) {
	r.logf("comparison: restarting with hashicorp/raft's default timing")
	r.c.setExtra(RaftDefaults)
	for i := range r.c.reps {
		r.c.stopReplica(i)
	}
	r.recover(ctx)
	for k := range r.cfg.ComparisonKills {
		if ctx.Err() != nil {
			return
		}
		s := Step{Kind: LeaderKill, Hold: time.Second, Pick: k}
		r.logf("comparison kill %d of %d", k+1, r.cfg.ComparisonKills)
		in, err := leaderKill(ctx, r.c, s)
		if err != nil {
			r.problem("comparison kill %d: %v", k+1, err)
		}
		if !in.fault.At.IsZero() {
			in.fault.Kind = string(LeaderKill) + "@raft-defaults"
			r.compare = append(r.compare, in)
		}
		r.recover(ctx)
		sleep(ctx, time.Second)
	}
}

// check reads the final state, measures the faults and runs the checkers.
func (r *runner) check(ctx context.Context, ops []history.Op, o *observer, start time.Time) *report.Report {
	qctx, cancel := context.WithTimeout(ctx, 20*time.Second)
	defer cancel()
	final, ferr := clients.FinalRead(qctx, r.c.clientOptions(), r.keys)
	states, serr := bench.WorkloadStatesWith(qctx, r.c.clientOptions())
	var idsAfter map[string]string
	var ierr error
	if serr == nil {
		idsAfter, ierr = bench.HostIDs(r.c.benchAgents(), states)
	}
	obs, samples, stateSamples := o.snapshot()
	FillAcks(samples, ops)

	rep := &report.Report{Seed: r.cfg.Seed, Start: start, End: time.Now(), Samples: samples, Agents: r.c.agentNames(),
		Skipped: r.cfg.skipped()}
	all := append(append([]injected(nil), r.faults...), r.compare...)
	var cuts []check.Cut
	for _, in := range all {
		rep.Faults = append(rep.Faults, in.fault)
		cuts = append(cuts, in.cuts...)
	}
	rep.Figures = r.measure(r.faults, samples, ops, r.faultsEnd)
	rep.Comparison = r.measure(r.compare, samples, ops, time.Time{})
	for k, f := range rep.Comparison {
		delete(rep.Comparison, k)
		rep.Comparison[string(LeaderKill)] = f
	}
	rep.Availability = report.Availability(samples)
	if r.c.flash != nil {
		rep.FlashModel = r.c.flash.model.String()
	}
	rep.Flash = r.measureFlash(ops)

	failed := func(name string, err error) check.Result {
		return check.Result{Name: name, Detail: err.Error()}
	}
	rep.Checks = append(rep.Checks, check.Linearizable(ops, r.cfg.Dir, linearTimeout))
	if ferr != nil {
		rep.Checks = append(rep.Checks, failed("no-lost-acks", fmt.Errorf("final read: %w", ferr)))
	} else {
		rep.Checks = append(rep.Checks, check.NoLostAcks(ops, final))
	}
	rep.Checks = append(rep.Checks, check.OneLeaderPerTerm(SelfClaims(obs)))
	switch {
	case serr != nil:
		rep.Checks = append(rep.Checks, failed("stable-ids", serr), failed("converged", serr))
	case ierr != nil:
		rep.Checks = append(rep.Checks, failed("stable-ids", ierr), check.Converged(r.want, states))
	default:
		rep.Checks = append(rep.Checks, StableAcrossPowerCuts(check.StableIDs(r.idsBefore, idsAfter), r.idFaults, r.powerCuts),
			check.Converged(r.want, states))
	}
	rep.Checks = append(rep.Checks, check.DisconnectedOnlyWhenCut(stateSamples, cuts, r.cfg.Grace))
	var intrusions []check.IntruderFinding
	for _, in := range r.faults {
		if in.intrusion != nil {
			intrusions = append(intrusions, *in.intrusion)
		}
	}
	rep.Checks = append(rep.Checks, check.IntruderRefused(intrusions))
	rep.Intrusions = check.MergeTallies(intrusions)
	if len(r.flash) > 0 {
		rep.Checks = append(rep.Checks, FlashChecked(r.flashFaults(), r.flash))
	}
	rep.Checks = append(rep.Checks, settled(r.res.Log))
	return rep
}

// flashFaults are the flash faults injected, in order.
func (r *runner) flashFaults() []report.Fault {
	var out []report.Fault
	for _, in := range r.faults {
		if slices.Contains(FlashKinds, Kind(in.fault.Kind)) {
			out = append(out, in.fault)
		}
	}
	return out
}

// measureFlash measures every flash fault, keeps the measurements for
// the check, and groups them by kind; a fault's window ends at the next
// fault when its target never came back.
func (r *runner) measureFlash(ops []history.Op) map[string]report.FlashFigures {
	var kinds []Kind
	r.flash = nil
	for i, in := range r.faults {
		if !slices.Contains(FlashKinds, Kind(in.fault.Kind)) {
			continue
		}
		until := r.faultsEnd
		if i+1 < len(r.faults) {
			until = r.faults[i+1].fault.At
		}
		kinds = append(kinds, Kind(in.fault.Kind))
		r.flash = append(r.flash, MeasureFlash(in.fault, ops, until))
	}
	if len(kinds) == 0 {
		return nil
	}
	return FlashFigures(kinds, r.flash)
}

// settled fails when the run logged a problem: a fault that could not be
// injected or healed, or a cluster that did not settle after it (a
// replica that exited on its own, as one did when its log could not be
// read after a SIGKILL). The other checks may all pass on the replicas
// left, so this one says it.
func settled(problems []string) check.Result {
	if len(problems) == 0 {
		return check.Result{Name: "settled", OK: true, Detail: "every fault was injected and healed, and the cluster settled after each"}
	}
	return check.Result{Name: "settled", Detail: strings.Join(problems, "\n")}
}

// measure computes the figures of list; each fault's window ends where the
// next one begins, the last one's at end (zero: the end of the run).
func (r *runner) measure(list []injected, samples []report.Sample, ops []history.Op, end time.Time) map[string]report.Figures {
	var kinds []Kind
	var ms []Measured
	for i, in := range list {
		until := end
		if i+1 < len(list) {
			until = list[i+1].fault.At
		}
		kinds = append(kinds, Kind(in.fault.Kind))
		ms = append(ms, MeasureFault(in.fault, len(in.cuts) > 0, samples, ops, r.c.agentNames(), until))
	}
	return Figures(kinds, ms)
}

// write saves the report files; the history is already in the run dir.
func (r *runner) write(rep *report.Report) error {
	return errors.Join(
		rep.WriteJSON(filepath.Join(r.cfg.Dir, "report.json")),
		rep.WriteMarkdown(filepath.Join(r.cfg.Dir, "summary.md")),
		rep.WriteSVG(filepath.Join(r.cfg.Dir, "timeline.svg")),
	)
}
