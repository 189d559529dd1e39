//go:build unix

package server

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/grapnel-io/grapnel/fsm"
	"github.com/grapnel-io/grapnel/rpc"
	"github.com/grapnel-io/grapnel/rpc/ankbase"
	"github.com/grapnel-io/grapnel/rpc/grapnelpb"
	"github.com/grapnel-io/grapnel/server/plan"
	"github.com/grapnel-io/grapnel/state"
	"github.com/grapnel-io/grapnel/state/render"
)

// loopWorkload is a workload whose runtimeConfig, a template of its own
// (id), loops over c.l<n> for each of its n items: n² iterations, the
// audit's template-heavy shape (issue 27 point 6). saltMark in it is
// replaced by a number of the same width for every request, so that no
// request finds its templates parsed already.
func loopWorkload(id, n int) *state.Workload {
	return &state.Workload{Agent: "agent_A", Runtime: "podman", Configs: map[string]string{"c": "c"},
		RuntimeConfig: fmt.Sprintf("image: app-%d-%s\nargs: [{{#each c.l%d}}{{#each ../c.l%d}}x{{/each}}{{/each}}]", id, saltMark, n, n)}
}

const saltMark = "SALT000000"

// budgetRequest makes updates of workloads that, rendered together, take
// just under budget render steps (over is false) or run past it (over
// is true); each workload is within every per-workload limit. Every
// salt gives other template texts of the same cost.
func budgetRequest(tb testing.TB, budget int, over bool) (func(salt int) *ankbase.UpdateStateRequest, int) {
	tb.Helper()
	s := state.State{APIVersion: state.APIVersion, Workloads: map[string]*state.Workload{}, Configs: map[string]any{}}
	c := map[string]any{}
	s.Configs["c"] = c
	list := func(n int) {
		l := make([]any, n)
		for i := range l {
			l[i] = "x"
		}
		c[fmt.Sprintf("l%d", n)] = l
	}
	steps := func() int {
		b := render.NewBudget(0, 0)
		r := render.New()
		for _, n := range state.SortedKeys(s.Workloads) {
			if _, _, err := r.WorkloadWithin(n, s.Workloads[n], s.Configs, b); err != nil {
				tb.Fatal(err)
			}
		}
		return b.Steps()
	}
	const big = 300
	list(big)
	for i := 0; ; i++ {
		s.Workloads[fmt.Sprintf("wl_%02d", i)] = loopWorkload(i, big)
		if steps() > budget {
			delete(s.Workloads, fmt.Sprintf("wl_%02d", i))
			// A last, smaller loop fills what is left of the budget.
			lo, hi := 1, big
			for lo < hi {
				mid := (lo + hi + 1) / 2
				list(mid)
				s.Workloads["wl_zz"] = loopWorkload(i, mid)
				if steps() <= budget {
					lo = mid
				} else {
					hi = mid - 1
				}
			}
			n := lo
			if over {
				n = lo + 1
			}
			list(n)
			s.Workloads["wl_zz"] = loopWorkload(i, n)
			break
		}
	}
	used := steps()
	if (used > budget) != over {
		tb.Fatalf("the request takes %d steps of a budget of %d", used, budget)
	}
	return func(salt int) *ankbase.UpdateStateRequest {
		salted := s
		salted.Workloads = map[string]*state.Workload{}
		for n, w := range s.Workloads {
			c := w.Clone()
			c.RuntimeConfig = strings.Replace(c.RuntimeConfig, saltMark, fmt.Sprintf("%0*d", len(saltMark), salt), 1)
			salted.Workloads[n] = c
		}
		cs, err := rpc.CompleteStateFromTree(state.Tree{"desiredState": salted.ToTree()})
		if err != nil {
			tb.Fatal(err)
		}
		return &ankbase.UpdateStateRequest{NewState: cs, UpdateMask: []string{"desiredState"}}
	}, used
}

// BenchmarkUpdateAtRenderBudget is the longest a single update holds the
// leader loop at the default limits: the template-heavy request that
// takes all of the default render budget (accepted) or runs past it
// (refused where it runs out), planned as the leader loop plans an
// update (mask, checks, rendering, diff, cycles, the encoded command).
// ns/op is the time the loop is held; cpu-ns/op the process's CPU time.
func BenchmarkUpdateAtRenderBudget(b *testing.B) {
	for _, over := range []bool{false, true} {
		name := "accepted"
		if over {
			name = "refused"
		}
		b.Run(name, func(b *testing.B) {
			lim := state.DefaultLimits()
			req, steps := budgetRequest(b, lim.MaxRenderStepsPerRequest, over)
			l := planLeader(state.NewStore(), lim)
			l.s.renderer = render.NewLimited(lim.MaxWorkloadBytes)
			reqs := make([]*ankbase.UpdateStateRequest, 0, b.N)
			for i := range b.N {
				reqs = append(reqs, req(i))
			}
			b.ResetTimer()
			defer cpuPerOp(b)()
			for i := 0; i < b.N; i++ {
				p, err := l.planUpdate(reqs[i], plan.Admission{}, plan.Guard{})
				if over != (err != nil) {
					b.Fatalf("over the budget %v: %v", over, err)
				}
				if err == nil {
					if _, err := l.encodeChecked(&fsm.UpdateDesiredStateRequest{Update: p.Update, Seq: 1}); err != nil {
						b.Fatal(err)
					}
				}
			}
			b.ReportMetric(float64(steps), "steps")
		})
	}
}

// BenchmarkCompleteStateDuringDryRuns is the wait of an operator's `get
// workloads` (a complete state request on a CLI stream, answered on the
// leader loop) while commanders send dry-runs that each take the whole
// default render budget, back to back: none (the baseline), or four at a
// time (one plans, three wait: max_concurrent_dry_runs is 1). The
// dry-runs plan off the loop, so the request never waits for them; what
// it loses is CPU, shared with the dry-run that plans. p50/p99/max-ms
// are its answer times, dry-runs/s what the commanders got done.
func BenchmarkCompleteStateDuringDryRuns(b *testing.B) {
	for _, commanders := range []int{0, 4} {
		b.Run(fmt.Sprintf("dry-runs=%d", commanders), func(b *testing.B) {
			ts := startServerCfg(b, b.TempDir(), mustStateTB(b, dbWeb), nil)
			req, _ := budgetRequest(b, state.DefaultLimits().MaxRenderStepsPerRequest, false)
			pc := planClient(b, ts.addr)
			ctx, cancel := context.WithCancel(context.Background())
			var (
				wg      sync.WaitGroup
				planned atomic.Int64
				salt    atomic.Int64
				first   = make(chan struct{})
				once    sync.Once
			)
			for range commanders {
				wg.Add(1)
				go func() {
					defer wg.Done()
					for ctx.Err() == nil {
						p, err := pc.DryRun(ctx, &grapnelpb.PlanRequest{Update: req(int(salt.Add(1)))})
						if err == nil && p.GetAccepted() {
							planned.Add(1)
							once.Do(func() { close(first) })
						}
					}
				}()
			}
			if commanders > 0 {
				<-first // the dry-runs are under way
			}
			cli := ts.cli()
			lat := make([]time.Duration, 0, b.N)
			start := time.Now()
			b.ResetTimer()
			for b.Loop() {
				t0 := time.Now()
				cli.get("desiredState.workloads", "workloadStates")
				lat = append(lat, time.Since(t0))
			}
			b.StopTimer()
			elapsed := time.Since(start)
			cancel()
			wg.Wait()
			slices.Sort(lat)
			pct := func(q float64) float64 { return float64(lat[int(q*float64(len(lat)-1))].Microseconds()) / 1000 }
			b.ReportMetric(pct(0.5), "p50-ms")
			b.ReportMetric(pct(0.99), "p99-ms")
			b.ReportMetric(pct(1), "max-ms")
			b.ReportMetric(float64(planned.Load())/elapsed.Seconds(), "dry-runs/s")
		})
	}
}

// mustStateTB is mustState for benchmarks.
func mustStateTB(tb testing.TB, y string) *state.State {
	tb.Helper()
	s, _, err := state.ParseManifest([]byte(y))
	if err != nil {
		tb.Fatal(err)
	}
	return &s
}
