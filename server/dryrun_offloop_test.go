package server

import (
	"bytes"
	"errors"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/grapnel-io/grapnel/fsm"
	"github.com/grapnel-io/grapnel/internal/clock"
	"github.com/grapnel-io/grapnel/internal/errs"
	"github.com/grapnel-io/grapnel/internal/testwait"
	"github.com/grapnel-io/grapnel/rpc"
	"github.com/grapnel-io/grapnel/rpc/grapnelpb"
	"github.com/grapnel-io/grapnel/server/metrics"
	"github.com/grapnel-io/grapnel/state"
)

// blockDryRuns makes every dry-run of ts wait, on its own goroutine and
// before it plans, until the returned release is called; entered gets
// one value per dry-run that reached that point, and peak is the most
// that waited there at once.
func blockDryRuns(ts *testServer) (entered chan struct{}, peak *atomic.Int32, release func()) {
	gate := make(chan struct{})
	entered = make(chan struct{}, 64)
	peak = &atomic.Int32{}
	var inside atomic.Int32
	ts.srv.dryRunHook = func() {
		n := inside.Add(1)
		for {
			p := peak.Load()
			if n <= p || peak.CompareAndSwap(p, n) {
				break
			}
		}
		entered <- struct{}{}
		<-gate
		inside.Add(-1)
	}
	return entered, peak, sync.OnceFunc(func() { close(gate) })
}

// waitEntered waits until a blocked dry-run has reached its hook.
func waitEntered(t *testing.T, entered chan struct{}) {
	t.Helper()
	select {
	case <-entered:
	case <-time.After(10 * time.Second):
		t.Fatal("no dry-run started planning")
	}
}

// A dry-run is planned off the leader loop (issue 27 point 6): while one
// is held in the middle of planning, the leader answers a CLI's complete
// state request and makes an update; the dry-run is answered once it is
// let go.
func TestDryRunDoesNotHoldTheLeaderLoop(t *testing.T) {
	ts := startServer(t, mustState(t, dbWeb))
	ts.agent("agent_A", nil)
	entered, _, release := blockDryRuns(ts)
	t.Cleanup(release)
	pc := planClient(t, ts.addr)
	ctx := callCtx(t)

	type result struct {
		plan *grapnelpb.PlanResponse
		err  error
	}
	done := make(chan result, 1)
	go func() {
		p, err := pc.DryRun(ctx, &grapnelpb.PlanRequest{Update: oneWorkload(t, "cache", "redis")})
		done <- result{p, err}
	}()
	waitEntered(t, entered)

	cli := ts.cli()
	if cs := cli.get("desiredState.workloads"); len(cs.GetDesiredState().GetWorkloads().GetWorkloads()) != 2 {
		t.Fatalf("complete state while a dry-run plans: %v", cs)
	}
	if resp := cli.update(manifest(t, "apiVersion: v1\nworkloads:\n  queue:\n    runtime: podman\n    agent: agent_A\n    runtimeConfig: \"image: q\"\n"),
		"desiredState.workloads.queue"); resp.GetUpdateStateSuccess() == nil {
		t.Fatalf("update while a dry-run plans: %v", resp)
	}
	select {
	case r := <-done:
		t.Fatalf("the dry-run was answered while held: %v %v", r.plan, r.err)
	default:
	}

	release()
	r := <-done
	if r.err != nil || !r.plan.GetAccepted() || len(r.plan.GetWorkloads()) != 1 || r.plan.GetWorkloads()[0].GetName() != "cache" {
		t.Fatalf("the dry-run: %v %v", r.plan, r.err)
	}
}

// At most max_concurrent_dry_runs dry-runs plan at once and four times
// as many wait; the next is refused at once with ResourceExhausted
// (BUSY), naming the setting, and counted. Those that waited are
// answered once the first is done.
func TestDryRunsBeyondTheBoundAreRefused(t *testing.T) {
	m := metrics.NewSet()
	ts := startServerCfg(t, t.TempDir(), mustState(t, dbWeb), func(c *Config) { c.MaxConcurrentDryRuns = 1; c.Metrics = m })
	ts.agent("agent_A", nil)
	entered, peak, release := blockDryRuns(ts)
	t.Cleanup(release)
	pc := planClient(t, ts.addr)
	ctx := callCtx(t)

	errc := make(chan error, 1+dryRunQueueFactor)
	call := func() {
		_, err := pc.DryRun(ctx, &grapnelpb.PlanRequest{Update: oneWorkload(t, "cache", "redis")})
		errc <- err
	}
	go call()
	waitEntered(t, entered)
	for range dryRunQueueFactor {
		go call()
	}
	testwait.For(t, 10*time.Second, func() bool { return ts.srv.dryRuns.waiting.Load() == dryRunQueueFactor }, "%d dry-runs waiting", dryRunQueueFactor)

	_, err := pc.DryRun(ctx, &grapnelpb.PlanRequest{Update: oneWorkload(t, "cache", "redis")})
	if status.Code(err) != codes.ResourceExhausted || !errors.Is(rpc.FromStatus(err), errs.ErrBusy) ||
		!strings.Contains(status.Convert(err).Message(), "max_concurrent_dry_runs") {
		t.Fatalf("a dry-run beyond the bound: %v", err)
	}
	var text bytes.Buffer
	if _, err := m.Registry.WriteTo(&text); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(text.String(), "grapnel_dry_runs_refused_total 1") {
		t.Error("the refusal is not counted")
	}

	release()
	for range 1 + dryRunQueueFactor {
		if err := <-errc; err != nil {
			t.Fatalf("a dry-run that waited: %v", err)
		}
	}
	if p := peak.Load(); p != 1 {
		t.Fatalf("%d dry-runs planned at once, want 1", p)
	}
}

// A dry-run planned off the loop is still answered only after the
// proposals queued before it have settled, and with its plan when they
// came to be.
func TestDryRunAnsweredAfterEarlierProposals(t *testing.T) {
	st := storeOf(t, dbWeb, "agent_A")
	l := planLeader(st, state.DefaultLimits())
	l.pipe = &pipeline{clock: clock.Real()}
	inFlight := &entry{typ: fsm.UpdateDesiredStatePackedType}
	l.pipe.queue = append(l.pipe.queue, inFlight)
	l.pipe.inFlight++

	planned := make(chan struct{})
	c := &planCall{update: replaceAll(t, "apiVersion: v1\n"), reply: make(chan planAnswer, 1),
		release: sync.OnceFunc(func() { close(planned) })}
	l.planCall(c)
	<-planned // the plan is made
	select {
	case a := <-c.reply:
		t.Fatalf("answered before the proposal ahead of it settled: %v", a)
	default:
	}
	inFlight.done = true
	l.pipe.settle(inFlight, func(fsm.MessageType, time.Duration, uint64) {})
	if a := <-c.reply; a.err != nil || len(a.plan.GetWorkloads()) != 2 {
		t.Fatalf("answer %v %v", a.plan, a.err)
	}
}

// A dry-run its caller gave up on before the leader loop took it is not
// planned: the loop starts nothing, and the caller frees its place.
func TestAbandonedDryRunIsNotPlanned(t *testing.T) {
	l := planLeader(storeOf(t, dbWeb, "agent_A"), state.DefaultLimits())
	l.pipe = &pipeline{clock: clock.Real()}
	var started atomic.Bool
	l.s.dryRunHook = func() { started.Store(true) }
	c := &planCall{update: replaceAll(t, "apiVersion: v1\n"), reply: make(chan planAnswer, 1)}
	if !c.abandon() {
		t.Fatal("a waiting call could not be abandoned")
	}
	l.planCall(c)
	if c.take() || len(l.pipe.queue) != 0 || started.Load() {
		t.Fatal("the loop planned an abandoned dry-run")
	}
}
