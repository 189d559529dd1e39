package upgrade

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"time"

	"github.com/grapnel-io/grapnel/agent/runtime/podman"
	"github.com/grapnel-io/grapnel/chaos/bench"
	"github.com/grapnel-io/grapnel/chaos/check"
	"github.com/grapnel-io/grapnel/chaos/clients"
	"github.com/grapnel-io/grapnel/rpc/grapnelpb"
	"github.com/grapnel-io/grapnel/state"
)

// PodmanImage is the image of the podman workloads, built offline by
// scripts/podman-setup.sh.
const PodmanImage = "localhost/grapnel-busybox:latest"

// Config is one run.
type Config struct {
	// Dir is the run directory: data dirs, logs, history, report.
	Dir string
	// Builds are the two releases' binaries.
	Builds map[Release]*Build
	// Short is the CI version: no bursts, no replica kept behind,
	// shorter writes, probes once per phase.
	Short bool
	// Insecure runs every channel without TLS; by default the run makes
	// a CA and certificates, as a vehicle runs.
	Insecure bool
	// RequirePodman fails the run when podman cannot run the podman
	// workloads; otherwise they are left out with a note.
	RequirePodman bool
	Replicas      int
	Agents        int
	Seed          int64
	// StepWrite is how long the writers go on after the cluster is
	// healthy again, before the checks.
	StepWrite time.Duration
	// Logf reports progress.
	Logf func(format string, args ...any)
}

func (c Config) withDefaults() Config {
	if c.Replicas == 0 {
		c.Replicas = 3
	}
	if c.Agents == 0 {
		c.Agents = 3
	}
	if c.StepWrite == 0 {
		c.StepWrite = 5 * time.Second
		if c.Short {
			c.StepWrite = 2 * time.Second
		}
	}
	if c.Logf == nil {
		c.Logf = func(string, ...any) {}
	}
	return c
}

// The writers' keys: unscheduled workloads, so no agent runs them.
const numKeys = 6

// Run runs the upgrade test and returns its report (also written to
// report.json and summary.md in cfg.Dir). An error means it could not
// run at all; a failed step is in the report.
func Run(ctx context.Context, cfg Config) (*Report, error) {
	cfg = cfg.withDefaults()
	rep := &Report{Mode: "full", Start: time.Now(), Secure: !cfg.Insecure}
	if cfg.Short {
		rep.Mode = "short"
	}
	rep.Old = BuildInfo{Commit: cfg.Builds[Old].Commit, SnapshotTypes: cfg.Builds[Old].SnapshotTypes, EntryTypes: cfg.Builds[Old].EntryTypes}
	rep.New = BuildInfo{Commit: cfg.Builds[New].Commit, SnapshotTypes: cfg.Builds[New].SnapshotTypes, EntryTypes: cfg.Builds[New].EntryTypes}
	withPodman, why := podmanReady()
	switch {
	case withPodman:
		rep.Podman = "on (" + PodmanImage + ")"
	case cfg.RequirePodman:
		return nil, fmt.Errorf("podman workloads required (GRAPNEL_REQUIRE_PODMAN=1) but %s: run scripts/podman-setup.sh", why)
	default:
		rep.Podman = "off: " + why
		cfg.Logf("podman workloads left out: %s", why)
	}
	finalize := HasFinalize(ctx, cfg.Builds[New].CLI())
	if !finalize {
		rep.Skipped = append(rep.Skipped, Skip{What: "phase " + PhaseFinalize,
			Reason: fmt.Sprintf("the new build's CLI has no `cluster upgrade finalize` (`grapnel cluster upgrade finalize --help` does not print %q)", FinalizeUsage)})
	}
	steps := Plan(PlanConfig{Replicas: cfg.Replicas, Agents: cfg.Agents, Bursts: !cfg.Short, Behind: !cfg.Short, Finalize: true, AgentAhead: true})
	s, err := newSystem(ctx, cfg.Dir, cfg.Builds, !cfg.Insecure, withPodman, cfg.Replicas, cfg.Agents)
	if err != nil {
		return nil, err
	}
	defer s.close()
	var keys []string
	for i := range numKeys {
		keys = append(keys, fmt.Sprintf("upg_k%d", i))
	}
	var names []string
	for _, r := range s.g.Replicas {
		names = append(names, r.Name)
	}
	var tls = s.clientOptions().TLS
	w := newWriters(keys, s.g.Addrs(), names, nil, cfg.Seed)
	if s.pki != nil {
		w.tls = &tls
	}
	r := &runner{cfg: cfg, s: s, w: w, keys: keys, rep: rep, finalize: finalize, probes: &prober{s: s, locks: map[Release]lockHeld{}}}
	r.run(ctx, steps)
	rep.End = time.Now()
	if err := w.rec.Save(filepath.Join(cfg.Dir, "history.json")); err != nil {
		cfg.Logf("history: %v", err)
	}
	return rep, errors.Join(rep.WriteJSON(filepath.Join(cfg.Dir, "report.json")),
		os.WriteFile(filepath.Join(cfg.Dir, "summary.md"), []byte(rep.Markdown()), 0o644))
}

// podmanReady says whether podman can run the podman workloads here.
func podmanReady() (bool, string) {
	if !podman.Available("") {
		return false, "podman is not installed or does not answer"
	}
	if err := exec.Command("podman", "image", "exists", PodmanImage).Run(); err != nil {
		return false, "the image " + PodmanImage + " is missing"
	}
	return true, ""
}

// runner holds one run's state.
type runner struct {
	cfg      Config
	s        *system
	w        *writers
	keys     []string
	rep      *Report
	finalize bool
	// finalized says the finalize step passed.
	finalized bool
	probes    *prober
}

func (r *runner) run(ctx context.Context, steps []Step) {
	for i, st := range steps {
		if ctx.Err() != nil {
			r.rep.Aborted = "interrupted"
			return
		}
		sr := StepReport{Step: st, Start: time.Now(), Healthy: -1, NextAck: -1}
		r.cfg.Logf("step %s", st)
		abort := r.step(ctx, st, &sr, i == len(steps)-1)
		sr.Took = time.Since(sr.Start)
		sr.Releases = r.s.releases()
		if sr.Skipped != "" {
			r.cfg.Logf("  skipped: %s", sr.Skipped)
		} else if sr.Failed() {
			r.cfg.Logf("  FAILED (%d): healthy %s, next ack %s", countFailures(&sr), ms(sr.Healthy), ms(sr.NextAck))
			for _, f := range sr.Failures {
				r.cfg.Logf("    %s: %s", f.What, firstLine(f.Detail))
			}
			for _, c := range sr.Checks {
				if !c.OK {
					r.cfg.Logf("    check %s: %s", c.Name, firstLine(c.Detail))
				}
			}
			for _, p := range sr.Probes {
				if !p.OK {
					r.cfg.Logf("    probe %s %s: %s", p.Kind, p.Via, firstLine(p.Detail))
				}
			}
		} else {
			r.cfg.Logf("  ok in %v: healthy %s, next ack %s", sr.Took.Round(time.Millisecond), ms(sr.Healthy), ms(sr.NextAck))
		}
		r.rep.Steps = append(r.rep.Steps, sr)
		if abort != nil {
			r.rep.Aborted = fmt.Sprintf("step %d: %v", st.N, abort)
			r.cfg.Logf("ABORTED: %v", abort)
			return
		}
	}
}

// step runs one step with the writers going, then the checks; an error
// means the run cannot go on.
func (r *runner) step(ctx context.Context, st Step, sr *StepReport, last bool) error {
	marks := r.s.markLogs()
	if st.Kind == Start {
		if err := r.start(ctx, sr); err != nil {
			sr.fail("start", err.Error(), r.s.logLines(marks)...)
			return err
		}
	}
	if (st.Kind == Finalize || st.Kind == RollbackRefused) && !r.finalize {
		sr.Skipped = r.rep.Skipped[len(r.rep.Skipped)-1].Reason
		return nil
	}
	if st.Kind == RollbackRefused && !r.finalized {
		sr.Skipped = "the finalize step failed"
		return nil
	}
	sr.LeaderBefore = r.s.replicaName(r.s.leader(ctx))
	stop := r.w.start(ctx)
	from := time.Now()
	// The writers must be writing before anything is swapped: the next
	// acknowledged write is measured from the swap.
	if d, ok := r.waitAck(ctx, from, 10*time.Second); !ok {
		sr.fail("writes before the step", fmt.Sprintf("no write acknowledged within %v before the step", d), r.s.logLines(marks)...)
	}
	var abort error
	at := time.Now()
	switch st.Kind {
	case Start:
		sr.note("every replica and agent started on %s", st.To)
	case SwapReplica:
		abort = r.swapReplica(ctx, st, sr, marks)
	case SwapAgent:
		abort = r.swapAgent(ctx, st, sr, marks)
	case Burst:
		r.burst(ctx, sr)
	case Finalize:
		r.doFinalize(ctx, sr, marks)
	case RollbackRefused:
		abort = r.rollbackRefused(ctx, st, sr, marks)
	}
	if st.Kind != Start {
		if d, ok := NextAck(r.w.rec.Ops(), at, nil); ok {
			sr.NextAck = d
		} else if d, ok := r.waitAck(ctx, at, 20*time.Second); ok {
			sr.NextAck = d
		}
	}
	healthyAt := time.Now()
	sr.Probes = r.probes.run(ctx, st.N)
	sleep(ctx, r.cfg.StepWrite)
	end := time.Now()
	if err := stop(); err != nil {
		sr.fail("writers", err.Error())
	}
	ops := r.w.rec.Ops()
	if st.Kind != Start {
		sr.LongestGap = LongestGap(ops, at, end)
	}
	sr.Routes = Routes(ops, from, end, r.w.route, r.w.routes())
	if abort != nil {
		return abort
	}
	settled := healthyAt.Add(routeSettle)
	sr.Checks = append(sr.Checks, RoutesServe(Routes(ops, settled, end, r.w.route, r.w.routes()),
		Refusals(ops, settled, end, r.w.route), r.w.routes()[:len(r.w.routes())-1]))
	r.checks(ctx, sr, marks, last)
	sr.LeaderAfter = r.s.replicaName(r.s.leader(ctx))
	return nil
}

// waitAck waits until a write or delete called at or after t is
// acknowledged; it returns the time from t and whether one was.
func (r *runner) waitAck(ctx context.Context, t time.Time, bound time.Duration) (time.Duration, bool) {
	deadline := time.Now().Add(bound)
	for time.Now().Before(deadline) && ctx.Err() == nil {
		if d, ok := NextAck(r.w.rec.Ops(), t, nil); ok {
			return d, true
		}
		sleep(ctx, 20*time.Millisecond)
	}
	return bound, false
}

func sleep(ctx context.Context, d time.Duration) {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
	case <-t.C:
	}
}

// workloads are what every agent keeps: a process, a process that logs a
// line a second and waits for the first, and a podman container.
func (r *runner) workloads() map[string]*state.Workload {
	ws := map[string]*state.Workload{}
	for i, a := range r.s.agents {
		n := i + 1
		sleeper := fmt.Sprintf("upg_a%d", n)
		ws[sleeper] = &state.Workload{Agent: a.Name, Runtime: "process", RestartPolicy: state.RestartNever,
			RuntimeConfig: "command: /bin/sleep\nargs: [\"86400\"]\n"}
		ws[fmt.Sprintf("upg_tick%d", n)] = &state.Workload{Agent: a.Name, Runtime: "process", RestartPolicy: state.RestartNever,
			Dependencies:  map[string]state.AddCondition{sleeper: state.AddCondRunning},
			RuntimeConfig: "command: /bin/sh\nargs: [\"-c\", \"while :; do echo tick; sleep 1; done\"]\n"}
		if r.s.podman {
			ws[fmt.Sprintf("upg_pod%d", n)] = &state.Workload{Agent: a.Name, Runtime: "podman", RestartPolicy: state.RestartNever,
				RuntimeConfig: "image: " + PodmanImage + "\ncommandArgs: [\"sleep\", \"86400\"]\n"}
		}
	}
	return ws
}

// start brings every replica and agent up on the old release, applies
// the workloads and records what identifies each instance on its host.
func (r *runner) start(ctx context.Context, sr *StepReport) error {
	begin := time.Now()
	for i := range r.s.g.Replicas {
		if err := r.s.startReplica(i, Old); err != nil {
			return err
		}
	}
	wctx, cancel := context.WithTimeout(ctx, setupBound)
	defer cancel()
	if _, err := r.s.g.WaitHealthy(wctx); err != nil {
		return err
	}
	for i := range r.s.agents {
		if err := r.s.startAgent(i, Old); err != nil {
			return err
		}
	}
	if _, err := r.s.waitHealthy(ctx, setupBound); err != nil {
		return err
	}
	ws := r.workloads()
	if err := bench.ApplyWorkloadsWith(wctx, r.s.clientOptions(), ws); err != nil {
		return fmt.Errorf("apply the workloads: %w", err)
	}
	r.s.want = map[string]string{}
	for n, w := range ws {
		r.s.want[n] = w.Agent
	}
	states, err := bench.WaitStatesWith(wctx, r.s.clientOptions(), "every workload running", func(ss []state.WorkloadState) bool {
		return check.Converged(r.s.want, ss).OK
	})
	if err != nil {
		return err
	}
	if r.s.ids, err = bench.HostIDs(r.s.agents, states); err != nil {
		return err
	}
	sr.Healthy = time.Since(begin)
	sr.note("%d workloads running: %s", len(r.s.ids), strings.Join(sortedKeys(r.s.ids), ", "))
	return nil
}

func sortedKeys(m map[string]string) []string {
	var out []string
	for k := range m {
		out = append(out, k)
	}
	return sortedStrings(out)
}

// stopText says how a stop went.
func stopText(err error, took time.Duration) string {
	if err == nil {
		return fmt.Sprintf("SIGTERM, exit 0 in %d ms", took.Milliseconds())
	}
	return err.Error()
}

// swapReplica stops replica st.Target gracefully and starts st.To on its
// data dir (after the others wrote past its log, when Behind); when it
// does not become healthy it is put back on the release it ran.
func (r *runner) swapReplica(ctx context.Context, st Step, sr *StepReport, marks logMarks) error {
	i, rep := st.Target, r.s.g.Replicas[st.Target]
	from := r.s.reps[i]
	if from == st.To {
		sr.note("%s already ran %s (an earlier step failed): restarted on it", rep.Name, st.To)
	}
	applied := uint64(0)
	if s, err := r.s.g.Status(ctx, i); err == nil {
		applied = s.GetAppliedIndex()
	}
	t := time.Now()
	err := r.s.g.Stop(i, stopGrace)
	sr.Stop = stopText(err, time.Since(t))
	if err != nil {
		sr.fail("graceful stop of "+rep.Name+" ("+string(from)+")", err.Error(), r.s.logLines(marks, rep.Name)...)
	}
	if st.Behind {
		r.fallBehind(ctx, i, applied, sr)
	}
	if err := r.s.startReplica(i, st.To); err != nil {
		return err
	}
	if _, err := r.s.waitHealthy(ctx, healthyBound); err != nil {
		detail := err.Error()
		if xe := r.s.g.ExitErr(i); xe != nil {
			detail = fmt.Sprintf("%s on %s exited: %v\n%s", rep.Name, st.To, xe, detail)
		}
		sr.fail(fmt.Sprintf("%s on %s healthy in the cluster (from %s)", rep.Name, st.To, from), detail, r.s.logLines(marks)...)
		return r.putBack(ctx, i, from, sr)
	}
	sr.Healthy = time.Since(t)
	if st.LeadTo >= 0 {
		r.lead(ctx, st.LeadTo, sr, marks)
	}
	return nil
}

// putBack starts replica i on the release it ran before a failed swap, so
// that the run can go on; an error means the cluster could not be made
// healthy again.
func (r *runner) putBack(ctx context.Context, i int, rel Release, sr *StepReport) error {
	name := r.s.g.Replicas[i].Name
	if r.s.g.Running(i) {
		_ = r.s.g.Stop(i, stopGrace)
	}
	if err := r.s.startReplica(i, rel); err != nil {
		return err
	}
	if _, err := r.s.waitHealthy(ctx, healthyBound); err != nil {
		return fmt.Errorf("%s put back on %s: %w", name, rel, err)
	}
	sr.note("%s put back on %s; the cluster is healthy again", name, rel)
	return nil
}

// lead hands leadership to replica i and waits until it leads.
func (r *runner) lead(ctx context.Context, i int, sr *StepReport, marks logMarks) {
	name := r.s.g.Replicas[i].Name
	l := r.s.leader(ctx)
	if l == i {
		return
	}
	if l < 0 {
		sr.fail("leadership to "+r.s.replicaName(i), "no leader to hand it over")
		return
	}
	tctx, cancel := context.WithTimeout(ctx, 15*time.Second)
	defer cancel()
	if _, err := r.s.g.Cluster(l).TransferLeadership(tctx, &grapnelpb.TransferLeadershipRequest{To: name}); err != nil {
		sr.fail(fmt.Sprintf("leadership from %s to %s", r.s.replicaName(l), r.s.replicaName(i)), err.Error(), r.s.logLines(marks)...)
		return
	}
	for tctx.Err() == nil {
		if r.s.leader(tctx) == i {
			if _, err := r.s.waitHealthy(ctx, healthyBound); err != nil {
				sr.fail("healthy under "+r.s.replicaName(i), err.Error(), r.s.logLines(marks)...)
			}
			return
		}
		sleep(tctx, 20*time.Millisecond)
	}
	sr.fail("leadership to "+r.s.replicaName(i), "it did not lead within 15 s of the transfer", r.s.logLines(marks)...)
}

// trailingLogs is the log hashicorp/raft keeps behind a snapshot
// (cluster.Node's TrailingLogs): a follower further behind needs the
// leader's snapshot.
const trailingLogs = 10240

// fallBehind writes while replica i is down until the leader's newest
// snapshot is past what its log keeps for i's last applied index.
func (r *runner) fallBehind(ctx context.Context, i int, applied uint64, sr *StepReport) {
	want := applied + trailingLogs + 500
	done := func() (bool, string) {
		l := r.s.leader(ctx)
		if l < 0 {
			return false, "no leader"
		}
		snap := newestSnapshot(r.s.g.Replicas[l])
		return snap > want, fmt.Sprintf("leader %s's newest snapshot at %d, wanted past %d", r.s.replicaName(l), snap, want)
	}
	ok, why, err := r.w.burst(ctx, 4*time.Minute, done)
	switch {
	case err != nil:
		sr.fail("burst", err.Error())
	case !ok:
		sr.fail("keep "+r.s.g.Replicas[i].Name+" behind", "could not write past its log: "+why)
	default:
		sr.note("%s kept down until it needs the leader's snapshot (%s)", r.s.g.Replicas[i].Name, why)
	}
}

// swapAgent stops agent st.Target gracefully and starts st.To on its run
// folder.
func (r *runner) swapAgent(ctx context.Context, st Step, sr *StepReport, marks logMarks) error {
	a := r.s.agents[st.Target]
	from := r.s.ags[st.Target]
	t := time.Now()
	err := a.StopWithin(stopGrace)
	sr.Stop = stopText(err, time.Since(t))
	if err != nil {
		sr.fail("graceful stop of "+a.Name+" ("+string(from)+")", err.Error(), r.s.logLines(marks, a.Name)...)
	}
	if err := r.s.startAgent(st.Target, st.To); err != nil {
		return err
	}
	if _, err := r.s.waitHealthy(ctx, attachedBound); err != nil {
		detail := err.Error()
		if xe := a.ExitErr(); xe != nil {
			detail = fmt.Sprintf("%s on %s exited: %v\n%s", a.Name, st.To, xe, detail)
		}
		sr.fail(fmt.Sprintf("%s on %s attached (from %s)", a.Name, st.To, from), detail, r.s.logLines(marks)...)
		a.Stop()
		if err := r.s.startAgent(st.Target, from); err != nil {
			return err
		}
		if _, err := r.s.waitHealthy(ctx, attachedBound); err != nil {
			return fmt.Errorf("%s put back on %s: %w", a.Name, from, err)
		}
		sr.note("%s put back on %s", a.Name, from)
		return nil
	}
	sr.Healthy = time.Since(t)
	return nil
}

// burst writes until every replica has taken a snapshot with the build it
// runs now.
func (r *runner) burst(ctx context.Context, sr *StepReport) {
	before := make([]uint64, len(r.s.g.Replicas))
	for i, rep := range r.s.g.Replicas {
		before[i] = newestSnapshot(rep)
	}
	done := func() (bool, string) {
		var missing []string
		for i, rep := range r.s.g.Replicas {
			if newestSnapshot(rep) <= before[i] {
				missing = append(missing, r.s.replicaName(i))
			}
		}
		return len(missing) == 0, "no new snapshot yet on " + strings.Join(missing, ", ")
	}
	ok, why, err := r.w.burst(ctx, 4*time.Minute, done)
	switch {
	case err != nil:
		sr.fail("burst", err.Error())
	case !ok:
		sr.fail("snapshots", why)
	default:
		var took []string
		for i, rep := range r.s.g.Replicas {
			took = append(took, fmt.Sprintf("%s at %d", r.s.replicaName(i), newestSnapshot(rep)))
		}
		sr.note("every replica took a snapshot with its build: %s", strings.Join(took, ", "))
	}
}

// doFinalize finalizes the upgrade with the new CLI.
func (r *runner) doFinalize(ctx context.Context, sr *StepReport, marks logMarks) {
	out, err := r.s.cli(ctx, New, time.Minute, "cluster", "upgrade", "finalize")
	if err != nil {
		sr.fail("cluster upgrade finalize", err.Error(), r.s.logLines(marks)...)
		return
	}
	sr.note("finalize: %s", strings.TrimSpace(out))
	if st, err := r.s.cli(ctx, New, probeTimeout, "cluster", "upgrade", "status"); err == nil {
		sr.note("status: %s", strings.TrimSpace(st))
	} else {
		sr.fail("cluster upgrade status", err.Error())
	}
	r.finalized = true
}

// refuseBound is how long an old build started on a finalized replica's
// data dir has to refuse.
const refuseBound = 30 * time.Second

// rollbackRefused starts the old build on a finalized replica's data dir:
// it must refuse (exit with an error, or stay out of the cluster with an
// error logged) and leave the data dir to the new build, which must come
// back healthy; the others serve meanwhile.
func (r *runner) rollbackRefused(ctx context.Context, st Step, sr *StepReport, marks logMarks) error {
	i, rep := st.Target, r.s.g.Replicas[st.Target]
	t := time.Now()
	err := r.s.g.Stop(i, stopGrace)
	sr.Stop = stopText(err, time.Since(t))
	if err != nil {
		sr.fail("graceful stop of "+rep.Name, err.Error(), r.s.logLines(marks, rep.Name)...)
	}
	if err := r.s.startReplica(i, Old); err != nil {
		return err
	}
	deadline := time.Now().Add(refuseBound)
	refused, how := false, ""
	for time.Now().Before(deadline) && ctx.Err() == nil {
		if xe := r.s.g.ExitErr(i); xe != nil {
			refused, how = true, xe.Error()
			break
		}
		sleep(ctx, 100*time.Millisecond)
	}
	lines := r.s.logLines(marks, rep.Name)
	if !refused {
		caughtUp := false
		if s, err := r.s.g.Status(ctx, i); err == nil {
			if l := r.s.leader(ctx); l >= 0 {
				if ls, err := r.s.g.Status(ctx, l); err == nil && s.GetAppliedIndex() >= ls.GetCommitIndex() {
					caughtUp = true
				}
			}
		}
		errorsLogged := 0
		for _, l := range lines {
			if strings.Contains(l, "ERROR") {
				errorsLogged++
			}
		}
		switch {
		case caughtUp:
			sr.fail("rollback of "+rep.Name+" to old after finalize", fmt.Sprintf("not refused: the old build ran %v on the finalized data dir and applied the cluster's log", refuseBound), lines...)
		case errorsLogged == 0:
			sr.fail("rollback of "+rep.Name+" to old after finalize", fmt.Sprintf("the old build ran %v without catching up and without logging an error: not a clean refusal", refuseBound), lines...)
		default:
			refused, how = true, fmt.Sprintf("still running after %v, out of the cluster, with %d error lines", refuseBound, errorsLogged)
		}
	}
	if refused {
		sr.note("rollback refused: %s", how)
		for _, l := range lines {
			sr.note("  %s", l)
		}
	}
	if r.s.g.Running(i) {
		_ = r.s.g.Stop(i, stopGrace)
	}
	if err := r.s.startReplica(i, New); err != nil {
		return err
	}
	if _, err := r.s.waitHealthy(ctx, healthyBound); err != nil {
		sr.fail(rep.Name+" on new again after the refused rollback", err.Error(), r.s.logLines(marks)...)
		return err
	}
	sr.Healthy = time.Since(t)
	return nil
}

// checks run after every step, on a cluster the writers no longer write to.
func (r *runner) checks(ctx context.Context, sr *StepReport, marks logMarks, last bool) {
	healthy := Check{Name: "healthy", OK: true}
	for i, rep := range r.s.g.Replicas {
		if xe := r.s.g.ExitErr(i); xe != nil || !r.s.g.Running(i) {
			healthy.OK = false
			healthy.Detail += fmt.Sprintf("%s does not run: %v; ", rep.Name, xe)
		}
	}
	for _, a := range r.s.agents {
		if xe := a.ExitErr(); xe != nil || !a.Alive() {
			healthy.OK = false
			healthy.Detail += fmt.Sprintf("%s does not run: %v; ", a.Name, xe)
		}
	}
	if healthy.OK {
		if l, err := r.s.waitHealthy(ctx, 30*time.Second); err != nil {
			healthy.OK, healthy.Detail = false, err.Error()
		} else {
			healthy.Detail = fmt.Sprintf("every replica a healthy voter that caught up with leader %s, every agent attached", r.s.replicaName(l))
		}
	}
	sr.Checks = append(sr.Checks, healthy)
	if !healthy.OK {
		sr.Failures = append(sr.Failures, Failure{What: "log lines of the step", Detail: "warnings and errors the processes logged", Logs: r.s.logLines(marks)})
	}

	qctx, cancel := context.WithTimeout(ctx, 20*time.Second)
	defer cancel()
	ops := r.w.rec.Ops()
	sr.Checks = append(sr.Checks, toCheck(check.Linearizable(ops, r.cfg.Dir, 2*time.Minute)))
	if final, err := clients.FinalRead(qctx, r.s.clientOptions(), r.keys); err != nil {
		sr.Checks = append(sr.Checks, Check{Name: "no-lost-acks", Detail: "final read: " + err.Error()})
	} else {
		sr.Checks = append(sr.Checks, toCheck(check.NoLostAcks(ops, final)))
	}
	states, err := bench.WorkloadStatesWith(qctx, r.s.clientOptions())
	if err != nil {
		sr.Checks = append(sr.Checks, Check{Name: "stable-ids", Detail: err.Error()}, Check{Name: "converged", Detail: err.Error()})
	} else {
		if ids, err := bench.HostIDs(r.s.agents, states); err != nil {
			sr.Checks = append(sr.Checks, Check{Name: "stable-ids", Detail: err.Error()})
		} else {
			sr.Checks = append(sr.Checks, toCheck(check.StableIDs(r.s.ids, ids)))
		}
		sr.Checks = append(sr.Checks, toCheck(check.Converged(r.s.want, states)))
	}
	sr.Checks = append(sr.Checks, r.s.sameState(ctx, r.cfg.Builds[Old].SnapshotTypes, last, sr))
}

func toCheck(c check.Result) Check {
	d := c.Detail
	if !c.OK && len(c.Window) > 0 {
		var w []string
		for _, op := range c.Window {
			w = append(w, op.String())
		}
		d += "\nsmallest window:\n  " + strings.Join(w, "\n  ")
	}
	if c.Artifact != "" {
		d += "\nvisualization: " + c.Artifact
	}
	return Check{Name: c.Name, OK: c.OK, Detail: d}
}
