package campaign

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials"

	"github.com/grapnel-io/grapnel/chaos/check"
	"github.com/grapnel-io/grapnel/chaos/clients"
	"github.com/grapnel-io/grapnel/chaos/intruder"
	"github.com/grapnel-io/grapnel/chaos/pki"
	"github.com/grapnel-io/grapnel/rpc"
	"github.com/grapnel-io/grapnel/rpc/ankbase"
	"github.com/grapnel-io/grapnel/rpc/client"
	"github.com/grapnel-io/grapnel/rpc/grapnelpb"
	"github.com/grapnel-io/grapnel/rpc/grpcapi"
	"github.com/grapnel-io/grapnel/rpc/wire"
	"github.com/grapnel-io/grapnel/state"
)

// The names an accepted intrusion would leave in the cluster, and what
// the intruder aims at.
const (
	intruderServer   = "intruder_srv"
	intruderWorkload = "intruder_wl"
	replayWorkload   = "chaos_replay"
	// victimWorkload is the process workload whose privileges the
	// intruder's commander tries to widen and whose logs it follows;
	// otherWorkload runs under the uid it tries to take. Both run on
	// agent_h1 (runner.setup).
	victimWorkload = "stable_h1_a"
	otherWorkload  = "stable_h1_b"
	// lockedObject is what the operator locks before the intrusion and
	// the intruder, as a commander of the operator's name, tries to
	// release.
	lockedObject = "workload/stable_h2_a"
	// fallbackUID is a uid of the agents' range when the agent's
	// assignment cannot be read.
	fallbackUID = 60123
	// intruderHold is how long the intruder stays in gossip: a leader
	// that admitted servers from gossip promoted one within about 3 s.
	intruderHold = 6 * time.Second
	// intruderBound bounds the whole intrusion.
	intruderBound = 2 * time.Minute
	// stallBound is the longest the leader may go without committing
	// while the flood holds its gRPC port, and the longest an operator's
	// get state may take on it while the render bomb's dry-run runs.
	stallBound = 2 * time.Second
	// readEvery paces the operator's reads during the intrusion.
	readEvery = 50 * time.Millisecond
)

// MetricsPort is the port of every replica's --metrics-address :PORT,
// its loopback: the intruder must find it closed from another host.
const MetricsPort = 25581

// intruderBounds are the bounds the replicas run with (boundFlags) that
// the intruder tries to pass: small where the default would make the
// attempt long or heavy (a flood of 256 connections, a 10 s hello).
var intruderBounds = intruder.Bounds{ConnsPerSource: 64, HandshakeTimeout: 5 * time.Second, StreamsPerAgent: 4,
	HelloTimeout: 3 * time.Second, LogCampaigns: 4, RenderSteps: state.DefaultMaxRenderStepsPerRequest, MetricsPort: MetricsPort}

// boundFlags are intruderBounds as grapnel-server's flags.
func boundFlags() []string {
	b := intruderBounds
	return []string{"--grpc-max-conns-per-source", fmt.Sprint(b.ConnsPerSource), "--grpc-handshake-timeout", b.HandshakeTimeout.String(),
		"--max-streams-per-agent", fmt.Sprint(b.StreamsPerAgent), "--hello-timeout", b.HelloTimeout.String(),
		"--max-log-campaigns-per-requester", fmt.Sprint(b.LogCampaigns), "--max-render-steps-per-request", fmt.Sprint(b.RenderSteps),
		"--metrics-address", fmt.Sprintf(":%d", b.MetricsPort)}
}

// intrude runs the intruder fault: it records an operator's update on
// its way to the leader, sets the workload to another value, takes a
// lock as the operator, and runs `grapnel-chaos intrude` in the client
// namespace (a host that is not a replica), watching every replica's
// Raft configuration, the leader's commits and an operator's reads
// meanwhile. Then it looks for what an accepted attempt would have left,
// and releases the lock.
func intrude(ctx context.Context, c *cluster, s Step) (in injected, err error) {
	in = newFault(s.Kind, "every replica")
	defer func() { in.fault.Healed = time.Now() }()
	if c.pki == nil {
		in.fault.Detail = "insecure campaign: no intruder"
		return in, nil
	}
	l, f, err := findLeader(ctx, c, s.Pick)
	if err != nil {
		return in, err
	}
	var spared string
	if l, f, spared, err = c.intruderTargets(ctx, l, f, s.Pick); err != nil || l < 0 {
		in.fault.Detail = spared
		return in, err
	}
	leaderAddr := hostAddr(c.reps[l].host, GRPCPort)
	capture := filepath.Join(c.dir, fmt.Sprintf("intruder-%d-capture.bin", time.Now().UnixNano()))
	if err := recordUpdate(ctx, c.pki, leaderAddr, capture, "replayed"); err != nil {
		return in, fmt.Errorf("recording an operator's update: %w", err)
	}
	if err := writeValue(ctx, c.clientOptions(), replayWorkload, "current"); err != nil {
		return in, fmt.Errorf("the update after the recording: %w", err)
	}
	victim, err := readWorkload(ctx, c.clientOptions(), victimWorkload)
	if err != nil {
		return in, fmt.Errorf("reading the victim %s: %w", victimWorkload, err)
	}
	if err := lockAsOperator(ctx, c.clientOptions(), lockedObject, true); err != nil {
		return in, fmt.Errorf("the operator's lock on %s: %w", lockedObject, err)
	}
	// The lock's owner is role and name only once the cluster version is
	// 1 (the leader keys locks by the version it applies at).
	lockVersion, err := c.clusterVersion(ctx)
	if err != nil {
		return in, fmt.Errorf("the cluster version at the operator's lock: %w", err)
	}
	floodSource, err := c.net.ClientAlias()
	if err != nil {
		return in, fmt.Errorf("the flood's source address: %w", err)
	}

	cfg := c.intruderConfig(l, f)
	cfg.Replay, cfg.ReplayTo, cfg.FloodSource, cfg.Hold = capture, leaderAddr, floodSource, s.Hold
	cfg.LockClusterVersion = lockVersion
	base := strings.TrimSuffix(capture, "-capture.bin")
	cfgPath, outPath := base+".json", base+"-attempts.json"
	b, err := json.Marshal(cfg)
	if err != nil {
		return in, err
	}
	if err := os.WriteFile(cfgPath, b, 0o644); err != nil {
		return in, err
	}

	var finding check.IntruderFinding
	finding.Controls = append(finding.Controls, c.metricsServed(l, base))
	wctx, stopWatch := context.WithCancel(ctx)
	w := &watcher{c: c, id: intruderServer}
	w.start(wctx)
	p, err := startProc("intruder", c.net.Command(c.net.Client(), c.selfBin, "intrude", "--config", cfgPath, "--out", outPath), base+".log")
	if err == nil {
		err = p.waitBound(intruderBound)
	}
	stopWatch()
	w.wait()
	if err != nil {
		return in, fmt.Errorf("the intruder: %w", err)
	}
	attempts, err := intruder.Load(outPath)
	if err != nil {
		return in, err
	}
	judged := w.judge(attempts, cfg.Leader)
	attempts = append(attempts, judged...)
	// The file then holds the campaign's judgements too, with their
	// figures.
	if err := intruder.Save(outPath, attempts); err != nil {
		return in, err
	}
	tallyAttempts(&finding, attempts)
	finding.Traces = append(finding.Traces, w.traces...)
	finding.Traces = append(finding.Traces, stateTraces(ctx, c, victim)...)
	finding.Traces = append(finding.Traces, lockTraces(ctx, c.clientOptions(), lockVersion)...)
	in.intrusion = &finding
	skipped, unowed := 0, 0
	for _, t := range finding.Tally {
		skipped += t.Skipped
		unowed += t.NotExpected
	}
	in.fault.Detail = fmt.Sprintf("%d attempts (%d kinds), %d accepted, %d not tried, %d not expected refused, %d traces%s%s%s", finding.Attempts, len(finding.Tally),
		len(finding.Accepted), skipped, unowed, len(finding.Traces), removedKeys(cfg.Removed), spared, measured(attempts, judged, finding.Controls))
	return in, nil
}

// removedKeys says, for the fault's detail, which removed replicas' keys
// the intruder held and the cluster version at each removal.
func removedKeys(keys []intruder.RemovedKey) string {
	if len(keys) == 0 {
		return ""
	}
	var parts []string
	for _, k := range keys {
		parts = append(parts, fmt.Sprintf("%s at cluster version %d", filepath.Base(k.Files.Cert), k.ClusterVersion))
	}
	return "; removed keys: " + strings.Join(parts, ", ")
}

// intruderTargets keeps the intruder off replicas of the previous
// release (an upgrade in progress): that release predates the bounds and
// the forwarding checks the intruder tries (docs/chaos.md: run against it
// the whole intrusion is accepted 32 times), and what it lets through is
// fixed by this release, not something a campaign of this build can
// fail. The leader and follower attacked are of this build: when the
// leader runs the previous release, leadership is handed to a replica of
// this build first. spared says which were left out, for the fault's
// detail; l is -1 when no replica runs this build (nothing attacked).
func (c *cluster) intruderTargets(ctx context.Context, l, f, pick int) (leader, follower int, spared string, err error) {
	prev := c.onPrevious()
	if len(prev) == 0 {
		return l, f, "", nil
	}
	var names []string
	for _, i := range prev {
		names = append(names, c.replicaName(i))
	}
	var cur []int
	for i := range c.reps {
		if !slices.Contains(prev, i) {
			cur = append(cur, i)
		}
	}
	spared = fmt.Sprintf("; not attacked: %s on the previous release %s", strings.Join(names, ", "), short(c.prev.Commit))
	if len(cur) == 0 {
		return -1, -1, "every replica runs the previous release " + short(c.prev.Commit) + ": nothing of this build to attack", nil
	}
	if slices.Contains(prev, l) {
		to := cur[pick%len(cur)]
		if err := c.handLeadership(ctx, l, to); err != nil {
			return -1, -1, spared, fmt.Errorf("handing leadership from %s (previous release) to %s: %w", c.replicaName(l), c.replicaName(to), err)
		}
		spared += fmt.Sprintf("; leadership handed from %s to %s first", c.replicaName(l), c.replicaName(to))
		l = to
	}
	f = -1
	for _, i := range cur {
		if i != l {
			f = i
			break
		}
	}
	return l, f, spared, nil
}

// tallyAttempts counts attempts into f by kind and lists the accepted
// ones that owed a refusal: an attempt with no refusal owed (a key whose
// removal revoked nothing) is reported in the tally whatever its end.
func tallyAttempts(f *check.IntruderFinding, attempts []intruder.Attempt) {
	f.Attempts += len(attempts)
	for _, a := range attempts {
		f.Tally = check.Tally(f.Tally, a.Channel, a.What, check.Outcome{Accepted: a.Accepted, Skipped: a.Skipped != "", NotExpected: a.NotExpected})
		if a.Accepted && a.Skipped == "" && a.NotExpected == "" {
			f.Accepted = append(f.Accepted, fmt.Sprintf("%s %s: %s (%s)", a.Target, a.Channel, a.What, a.Detail))
		}
	}
}

// measured is what the timed attacks showed, for the fault's detail:
// the dry-run's and the flood's figures, the campaign's judgements of
// them, and the controls.
func measured(attempts, judged []intruder.Attempt, controls []check.Control) string {
	var parts []string
	for _, a := range attempts {
		switch a.What {
		case intruder.WhatDryRun:
			// Its figures, without the refusal's text.
			figures, _, _ := strings.Cut(a.Detail, ": ")
			parts = append(parts, "dry-run: "+figures)
		case intruder.WhatFlood, intruder.WhatHeld:
			parts = append(parts, "flood: "+a.Detail)
		}
	}
	for _, a := range judged {
		parts = append(parts, a.Detail)
	}
	for _, c := range controls {
		parts = append(parts, "control: "+c.What+": "+c.Detail)
	}
	if len(parts) == 0 {
		return ""
	}
	return "; " + strings.Join(parts, "; ")
}

// intruderConfig is what the intruder gets: the replicas' addresses, the
// leader and a follower, and the certificates an attacker could hold —
// its own wrong-role, foreign, never-admitted and commander ones, the
// revoked keys of removed replicas, a member's key (stolen), and the
// operator's and an agent's certificates without their keys.
func (c *cluster) intruderConfig(l, f int) intruder.Config {
	cfg := intruder.Config{Leader: c.replicaName(l),
		WrongRole: c.pki.WrongRole, Foreign: c.pki.Foreign, StrayReplica: c.pki.StrayReplica, Removed: c.removedKeys(),
		Commander: c.pki.Commander, Impostor: c.pki.Impostor, OperatorCert: c.pki.Operator.Cert,
		AgentCert: c.pki.Agents[c.agents[0].name].Cert, Victim: victimWorkload, OtherUID: uidOf(c.agents[0].runFolder, otherWorkload),
		Lock: lockedObject, Bounds: intruderBounds,
		GossipName: intruderServer, Workload: intruderWorkload, Agent: pki.IntruderAgent}
	if f >= 0 {
		cfg.Follower = c.replicaName(f)
	}
	// The member key is the other follower's, so that the leader and the
	// follower attacked each see a key that is not their own.
	for i := range c.reps {
		if i != l && i != f {
			cfg.Member, _ = c.pki.Replica(c.replicaName(i))
		}
	}
	prev := c.onPrevious()
	for i, r := range c.reps {
		if slices.Contains(prev, i) {
			continue
		}
		cfg.Targets = append(cfg.Targets, intruder.Target{Name: r.name, GRPC: hostAddr(r.host, GRPCPort),
			Raft: hostAddr(r.host, RaftPort), Gossip: hostAddr(r.host, GossipPort)})
	}
	return cfg
}

// removedKeys are the removed replicas' keys, each with the cluster
// version at its removal (replaceReplica records it).
func (c *cluster) removedKeys() []intruder.RemovedKey {
	c.mu.Lock()
	defer c.mu.Unlock()
	var out []intruder.RemovedKey
	for _, f := range c.pki.RemovedReplicas() {
		v, ok := c.removedAt[f.Cert]
		if !ok {
			// Not recorded: the strict reading, its refusal is owed.
			v = state.ClusterVersionRevocation
		}
		out = append(out, intruder.RemovedKey{Files: f, ClusterVersion: v})
	}
	return out
}

// uidOf is the uid the agent of runFolder gave workload
// (agent/runtime/process keeps them in workload-uids.json), or
// fallbackUID.
func uidOf(runFolder, workload string) int {
	b, err := os.ReadFile(filepath.Join(runFolder, "workload-uids.json"))
	if err != nil {
		return fallbackUID
	}
	var body struct {
		Workloads map[string]int `json:"workloads"`
	}
	if json.Unmarshal(b, &body) != nil || body.Workloads[workload] == 0 {
		return fallbackUID
	}
	return body.Workloads[workload]
}

// metricsServed is the control of the metrics attempts: the leader
// serves /metrics on its own loopback (asked from inside its namespace),
// so that the refusal from another host means the address is loopback's,
// not that nothing listens.
func (c *cluster) metricsServed(l int, base string) check.Control {
	url := fmt.Sprintf("http://127.0.0.1:%d/metrics", MetricsPort)
	ctl := check.Control{What: c.replicaName(l) + " serves " + url + " inside its host"}
	logPath := base + "-metrics.log"
	p, err := startProc("metrics", c.net.Command(c.reps[l].host, c.selfBin, "http-get", url), logPath)
	if err == nil {
		err = p.waitBound(10 * time.Second)
	}
	out, _ := os.ReadFile(logPath)
	lines := strings.Split(strings.TrimSpace(string(out)), "\n")
	ctl.OK, ctl.Detail = err == nil, lines[len(lines)-1]
	if err != nil {
		ctl.Detail += " (" + err.Error() + ")"
	}
	return ctl
}

// watcher polls, while the intruder runs, every replica's view for id
// in a Raft configuration (gossip alone does not count: gossip is where
// a replica might be, not who votes) and the leader's commit index,
// and times an operator's reads of the state on the leader.
type watcher struct {
	c  *cluster
	id string

	done    sync.WaitGroup
	traces  []string
	commits []commitSample
	reads   []readSample
}

type commitSample struct {
	at    time.Time
	index uint64
}

type readSample struct {
	at   time.Time
	took time.Duration
	err  error
}

func (w *watcher) start(ctx context.Context) {
	w.done.Go(func() { w.membership(ctx) })
	w.done.Go(func() { w.read(ctx) })
}

func (w *watcher) wait() { w.done.Wait() }

func (w *watcher) membership(ctx context.Context) {
	seen := map[string]bool{}
	for ctx.Err() == nil {
		sts := w.c.statuses(ctx)
		if l := leaderOf(sts); l >= 0 {
			w.commits = append(w.commits, commitSample{at: time.Now(), index: sts[l].GetCommitIndex()})
		}
		for _, st := range sts {
			if st == nil {
				continue
			}
			for _, m := range st.GetMembers() {
				if m.GetId() == w.id && (m.GetVoter() || (m.GetRole() != "" && m.GetRole() != "unknown")) {
					key := st.GetReplicaId() + "/" + m.GetRole()
					if !seen[key] {
						seen[key] = true
						w.traces = append(w.traces, fmt.Sprintf("%s in %s's Raft configuration as %s", w.id, st.GetReplicaId(), m.GetRole()))
					}
				}
			}
		}
		sleep(ctx, 200*time.Millisecond)
	}
}

// read asks for the complete state as the operator, through the leader,
// one read after the other.
func (w *watcher) read(ctx context.Context) {
	var conn *client.Conn
	defer func() {
		if conn != nil {
			conn.Close()
		}
	}()
	for ctx.Err() == nil {
		if conn == nil {
			dctx, cancel := context.WithTimeout(ctx, 5*time.Second)
			var err error
			conn, err = client.Dial(dctx, w.c.clientOptions())
			cancel()
			if err != nil {
				conn = nil
				sleep(ctx, readEvery)
				continue
			}
		}
		rctx, cancel := context.WithTimeout(ctx, 10*time.Second)
		at := time.Now()
		_, err := conn.Request(rctx, &ankbase.Request{RequestContent: &ankbase.Request_CompleteStateRequest{
			CompleteStateRequest: &ankbase.CompleteStateRequest{}}})
		cancel()
		if ctx.Err() != nil {
			return
		}
		w.reads = append(w.reads, readSample{at: at, took: time.Since(at), err: err})
		sleep(ctx, readEvery)
	}
}

// judge turns what the watcher saw during the intruder's timed attacks
// into attempts of their own: the leader must commit while the flood
// holds its gRPC port (the campaign's clients keep writing, from
// another source), and an operator's get state must not wait on the
// render bomb.
func (w *watcher) judge(as []intruder.Attempt, leader string) []intruder.Attempt {
	var out []intruder.Attempt
	for _, a := range as {
		if a.Window == nil {
			continue
		}
		switch a.What {
		case intruder.WhatFlood:
			out = append(out, w.commitsDuring(*a.Window, leader))
		case intruder.WhatDryRun:
			out = append(out, w.readsDuring(*a.Window, leader))
		}
	}
	return out
}

// commitsDuring judges the leader's commits in win: accepted (the flood
// got through) when the commit index stood still longer than
// stallBound.
func (w *watcher) commitsDuring(win intruder.Window, leader string) intruder.Attempt {
	a := intruder.Attempt{Target: leader, Channel: "connections", What: "the leader commits while the flood holds its gRPC port (the clients write from another source)"}
	var first, last uint64
	n, stall := 0, time.Duration(0)
	since := win.From
	for _, s := range w.commits {
		if s.at.Before(win.From) || s.at.After(win.To) {
			continue
		}
		if n == 0 {
			first = s.index
		} else if s.index > last {
			stall = max(stall, s.at.Sub(since))
			since = s.at
		}
		last = s.index
		n++
	}
	stall = max(stall, win.To.Sub(since))
	a.Accepted = n < 2 || last == first || stall > stallBound
	a.Detail = fmt.Sprintf("while the flood held, the leader committed %d entries in %v (%d samples), longest without a commit %v (bound %v)",
		last-first, win.To.Sub(win.From).Round(time.Millisecond), n, stall.Round(time.Millisecond), stallBound)
	return a
}

// readsDuring judges the operator's reads that overlapped win: accepted
// (the bomb stalled the leader) when one took longer than stallBound or
// failed, or none overlapped.
func (w *watcher) readsDuring(win intruder.Window, leader string) intruder.Attempt {
	a := intruder.Attempt{Target: leader, Channel: "render", What: "an operator's get state on the leader while the render bomb's dry-run runs"}
	n, failed := 0, 0
	var longest time.Duration
	var failure error
	for _, r := range w.reads {
		if r.at.After(win.To) || r.at.Add(r.took).Before(win.From) {
			continue
		}
		n++
		longest = max(longest, r.took)
		if r.err != nil {
			failed++
			failure = r.err
		}
	}
	a.Accepted = n == 0 || failed > 0 || longest > stallBound
	a.Detail = fmt.Sprintf("the operator's get state on the leader: %d reads during the %v dry-run, the longest %v (bound %v)", n, win.To.Sub(win.From).Round(time.Millisecond),
		longest.Round(time.Millisecond), stallBound)
	if failed > 0 {
		a.Detail += fmt.Sprintf("; %d failed: %v", failed, failure)
	}
	return a
}

// lockAsOperator takes (or, take false, releases) the operator's lock on
// object through the leader.
func lockAsOperator(ctx context.Context, o client.Options, object string, take bool) error {
	qctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	conn, err := client.Dial(qctx, o)
	if err != nil {
		return err
	}
	defer conn.Close()
	if take {
		_, err = conn.Locks().Lock(qctx, &grapnelpb.LockRequest{Objects: []string{object}, TtlMs: uint64(10 * time.Minute / time.Millisecond),
			Reason: "the intruder must not release it"})
		return err
	}
	_, err = conn.Locks().Unlock(qctx, &grapnelpb.UnlockRequest{Objects: []string{object}})
	return err
}

// lockTraces checks that the operator's lock survived the intrusion,
// then releases it. A lock taken below state.ClusterVersionRevocation
// may be gone: its owner is the name only, and the commander named as
// the operator released it (intruder.NotOwnerByRole); that is no trace.
func lockTraces(ctx context.Context, o client.Options, version uint32) []string {
	qctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	conn, err := client.Dial(qctx, o)
	if err != nil {
		return []string{"no locks to check: " + err.Error()}
	}
	defer conn.Close()
	resp, err := conn.Locks().List(qctx, &grapnelpb.ListLocksRequest{})
	if err != nil {
		return []string{"no locks to check: " + err.Error()}
	}
	var out []string
	held := false
	for _, lk := range resp.GetLocks() {
		held = held || (lk.GetObject() == lockedObject && lk.GetOwner() == "operator/"+pki.OperatorName)
	}
	if !held && version >= state.ClusterVersionRevocation {
		out = append(out, fmt.Sprintf("the operator's lock on %s gone (locks: %v)", lockedObject, resp.GetLocks()))
	}
	if err := lockAsOperator(ctx, o, lockedObject, false); err != nil {
		out = append(out, fmt.Sprintf("the operator could not release her lock on %s: %v", lockedObject, err))
	}
	return out
}

// readWorkload reads workload name from the desired state, as the
// operator.
func readWorkload(ctx context.Context, o client.Options, name string) (*ankbase.Workload, error) {
	qctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	conn, err := client.Dial(qctx, o)
	if err != nil {
		return nil, err
	}
	defer conn.Close()
	resp, err := conn.Request(qctx, &ankbase.Request{RequestContent: &ankbase.Request_CompleteStateRequest{
		CompleteStateRequest: &ankbase.CompleteStateRequest{FieldMask: []string{"desiredState.workloads." + name}}}})
	if err != nil {
		return nil, err
	}
	w := resp.GetCompleteStateResponse().GetCompleteState().GetDesiredState().GetWorkloads().GetWorkloads()[name]
	if w == nil {
		return nil, fmt.Errorf("%s not in the desired state", name)
	}
	return w, nil
}

// stateTraces reads the state through the leader for what an accepted
// attempt would have left: the intruder's agent or workload, the
// replayed value back in place of the later one, the victim changed.
func stateTraces(ctx context.Context, c *cluster, victim *ankbase.Workload) []string {
	qctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	conn, err := client.Dial(qctx, c.clientOptions())
	if err != nil {
		return []string{"no state to check: " + err.Error()}
	}
	defer conn.Close()
	resp, err := conn.Request(qctx, &ankbase.Request{RequestContent: &ankbase.Request_CompleteStateRequest{
		CompleteStateRequest: &ankbase.CompleteStateRequest{FieldMask: []string{"desiredState.workloads", "agents"}}}})
	if err != nil {
		return []string{"no state to check: " + err.Error()}
	}
	cs := resp.GetCompleteStateResponse().GetCompleteState()
	var out []string
	wls := cs.GetDesiredState().GetWorkloads().GetWorkloads()
	if _, ok := wls[intruderWorkload]; ok {
		out = append(out, "the workload "+intruderWorkload+" in the desired state")
	}
	if _, ok := cs.GetAgents().GetAgents()[pki.IntruderAgent]; ok {
		out = append(out, "the agent "+pki.IntruderAgent+" in the agent map")
	}
	if v, err := clients.ParseValue(wls[replayWorkload].GetRuntimeConfig()); err != nil || v != "current" {
		out = append(out, fmt.Sprintf("%s holding %q instead of the later value (a replayed update took effect, or the value is gone: %v)", replayWorkload, v, err))
	}
	if w := wls[victimWorkload]; w.GetRuntime() != victim.GetRuntime() || w.GetRuntimeConfig() != victim.GetRuntimeConfig() || w.GetAgent() != victim.GetAgent() {
		out = append(out, fmt.Sprintf("%s changed: runtime %q, runtimeConfig %q; was %q, %q", victimWorkload,
			w.GetRuntime(), w.GetRuntimeConfig(), victim.GetRuntime(), victim.GetRuntimeConfig()))
	}
	return out
}

// writeValue sets workload name to carry value, as a chaos client writes
// a key.
func writeValue(ctx context.Context, o client.Options, name, value string) error {
	qctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	conn, err := client.Dial(qctx, o)
	if err != nil {
		return err
	}
	defer conn.Close()
	resp, err := conn.Request(qctx, updateRequest(name, value))
	if err != nil {
		return err
	}
	if resp.GetUpdateStateSuccess() == nil {
		return fmt.Errorf("answered %v", resp.GetResponseContent())
	}
	return nil
}

func updateRequest(name, value string) *ankbase.Request {
	wl := &ankbase.Workload{Runtime: ptrTo(clients.Runtime), RuntimeConfig: ptrTo(clients.RuntimeConfig(value))}
	return &ankbase.Request{RequestContent: &ankbase.Request_UpdateStateRequest{UpdateStateRequest: &ankbase.UpdateStateRequest{
		NewState: &ankbase.CompleteState{DesiredState: &ankbase.State{ApiVersion: "v1",
			Workloads: &ankbase.WorkloadMap{Workloads: map[string]*ankbase.Workload{name: wl}}}},
		UpdateMask: []string{"desiredState.workloads." + name}}}}
}

// recordUpdate sends an operator's update of replayWorkload to the
// leader on a connection whose every written byte is kept, as a sniffer
// on the vehicle network would see them, and saves them to path.
func recordUpdate(ctx context.Context, p *pki.Set, addr, path, value string) error {
	tc, err := rpc.ClientTLSConfig(p.Operator, rpc.ServerName)
	if err != nil {
		return err
	}
	rec := &recorder{}
	cc, err := grpc.NewClient(addr, grpc.WithTransportCredentials(credentials.NewTLS(tc)),
		grpc.WithContextDialer(func(ctx context.Context, a string) (net.Conn, error) {
			var d net.Dialer
			conn, err := d.DialContext(ctx, "tcp", a)
			if err != nil {
				return nil, err
			}
			return &recordedConn{Conn: conn, rec: rec}, nil
		}))
	if err != nil {
		return err
	}
	defer cc.Close()
	qctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	st, err := wire.KindCLI.Open(qctx, cc)
	if err != nil {
		return err
	}
	req := updateRequest(replayWorkload, value)
	req.RequestId = "recorded"
	for _, m := range []*grpcapi.ToServer{
		{ToServerEnum: &grpcapi.ToServer_CommanderHello{CommanderHello: &grpcapi.CommanderHello{ProtocolVersion: rpc.ProtocolVersion}}},
		{ToServerEnum: &grpcapi.ToServer_Request{Request: req}},
	} {
		if err := st.Send(m); err != nil {
			return err
		}
	}
	for {
		m, err := st.Recv()
		if err != nil {
			return err
		}
		if r := m.GetResponse(); r.GetRequestId() == "recorded" {
			if r.GetUpdateStateSuccess() == nil {
				return fmt.Errorf("answered %v", r.GetResponseContent())
			}
			break
		}
	}
	_ = st.CloseSend()
	data := rec.bytes()
	if len(data) == 0 {
		return errors.New("nothing was recorded")
	}
	return os.WriteFile(path, data, 0o600)
}

// recorder keeps what a connection wrote.
type recorder struct {
	mu  sync.Mutex
	buf []byte
}

func (r *recorder) bytes() []byte {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]byte(nil), r.buf...)
}

type recordedConn struct {
	net.Conn
	rec *recorder
}

func (c *recordedConn) Write(b []byte) (int, error) {
	c.rec.mu.Lock()
	c.rec.buf = append(c.rec.buf, b...)
	c.rec.mu.Unlock()
	return c.Conn.Write(b)
}

func ptrTo[T any](v T) *T { return &v }
