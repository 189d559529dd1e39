package server

import (
	"bytes"
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/grapnel-io/grapnel/rpc"
	"github.com/grapnel-io/grapnel/rpc/ankbase"
	"github.com/grapnel-io/grapnel/rpc/grapnelpb"
	"github.com/grapnel-io/grapnel/server/metrics"
	"github.com/grapnel-io/grapnel/state"
	"github.com/grapnel-io/grapnel/state/render"
)

// heavyManifest is the audit's shape scaled down (issue 27 point 6): n
// workloads, each with a template of its own that loops over a list of
// 30 for each of 20 items, all well within every per-workload limit.
func heavyManifest(n int) (state.Tree, *state.State) {
	list := func(k int) []any {
		l := make([]any, k)
		for i := range l {
			l[i] = fmt.Sprint(i)
		}
		return l
	}
	s := &state.State{APIVersion: state.APIVersion, Workloads: map[string]*state.Workload{},
		Configs: map[string]any{"c": map[string]any{"outer": list(20), "inner": list(30)}}}
	for i := range n {
		s.Workloads[fmt.Sprintf("wl_%02d", i)] = &state.Workload{Agent: "agent_A", Runtime: "podman",
			Configs:       map[string]string{"c": "c"},
			RuntimeConfig: fmt.Sprintf("image: app-%d\nargs: [{{#each c.outer}}{{#each ../c.inner}}x{{/each}}{{/each}}]", i)}
	}
	return state.Tree{"desiredState": s.ToTree()}, s
}

// ranOutAt is where a budget of max steps runs out rendering s's
// workloads in name order, as the leader renders them.
func ranOutAt(t *testing.T, s *state.State, max int) string {
	t.Helper()
	b := render.NewBudget(max, 0)
	for _, n := range state.SortedKeys(s.Workloads) {
		if _, _, err := render.New().WorkloadWithin(n, s.Workloads[n], s.Configs, b); err != nil {
			if !errors.Is(err, state.ErrBudget) {
				t.Fatal(err)
			}
			return n
		}
	}
	t.Fatal("the budget did not run out")
	return ""
}

// A request whose workloads each render within every per-workload limit,
// but whose templates together take more than the render budget of one
// request, is refused before anything is committed, as an update and as
// a dry-run: the refusal names the budget, the workload where it ran out
// and the setting, rendering stops there (one rejection, nothing after),
// and the refusals are counted.
func TestRenderBudgetRefusesARequest(t *testing.T) {
	const budget = 8000
	tree, heavy := heavyManifest(10)
	lim := state.DefaultLimits()
	lim.MaxRenderStepsPerRequest = budget
	m := metrics.NewSet()
	ts := startServerCfg(t, t.TempDir(), nil, func(c *Config) { c.Limits = &lim; c.Metrics = m })
	ts.agent("agent_A", nil)
	where := ranOutAt(t, heavy, budget)
	if where == "wl_00" || where == "wl_09" {
		t.Fatalf("the test's budget runs out at %s: it should run out midway", where)
	}
	pc := planClient(t, ts.addr)
	ctx := callCtx(t)
	seq0, _ := fsmIndex(ts)

	// One such workload alone is accepted.
	one, _ := heavyManifest(1)
	cs, err := rpc.CompleteStateFromTree(one)
	if err != nil {
		t.Fatal(err)
	}
	plan, err := pc.DryRun(ctx, &grapnelpb.PlanRequest{Update: &ankbase.UpdateStateRequest{NewState: cs, UpdateMask: []string{"desiredState"}}})
	if err != nil || !plan.GetAccepted() {
		t.Fatalf("one heavy workload: %v %v", plan.GetRejections(), err)
	}

	cs, err = rpc.CompleteStateFromTree(tree)
	if err != nil {
		t.Fatal(err)
	}
	plan, err = pc.DryRun(ctx, &grapnelpb.PlanRequest{Update: &ankbase.UpdateStateRequest{NewState: cs, UpdateMask: []string{"desiredState"}}})
	if err != nil {
		t.Fatal(err)
	}
	rej := plan.GetRejections()
	if plan.GetAccepted() || len(rej) != 1 {
		t.Fatalf("dry-run: accepted %v, rejections %v", plan.GetAccepted(), rej)
	}
	field := "desiredState.workloads." + where + ".runtimeConfig"
	for _, want := range []string{field, "max_render_steps_per_request", fmt.Sprint(budget), "render steps"} {
		if !strings.Contains(rej[0].GetMessage(), want) {
			t.Errorf("the rejection %q does not name %q", rej[0].GetMessage(), want)
		}
	}
	if rej[0].GetField() != field {
		t.Errorf("rejection field %q, want %q", rej[0].GetField(), field)
	}

	resp := ts.cli().update(tree, "desiredState")
	if msg := resp.GetError().GetMessage(); !strings.HasPrefix(msg, "Update rejected") || !strings.Contains(msg, field) ||
		!strings.Contains(msg, "max_render_steps_per_request") {
		t.Fatalf("update: %v", resp)
	}
	if seq, _ := fsmIndex(ts); seq != seq0 {
		t.Fatalf("something was committed: seq %d, was %d", seq, seq0)
	}

	var text bytes.Buffer
	if _, err := m.Registry.WriteTo(&text); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{`grapnel_render_budget_refused_total{request="dry_run"} 1`, `grapnel_render_budget_refused_total{request="update"} 1`} {
		if !strings.Contains(text.String(), want) {
			t.Errorf("metrics lack %s", want)
		}
	}
}
