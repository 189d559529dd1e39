package server

import (
	"fmt"
	"testing"
	"time"

	"github.com/grapnel-io/grapnel/fsm"
	"github.com/grapnel-io/grapnel/server/plan"
	"github.com/grapnel-io/grapnel/state"
	"github.com/grapnel-io/grapnel/state/render"
)

// bigState is a desired state of n workloads spread over agents, half of
// them templated with a config item.
func bigState(n int) *state.State {
	s := state.State{APIVersion: state.APIVersion, Workloads: map[string]*state.Workload{}, Configs: map[string]any{
		"img": map[string]any{"name": "busybox", "tag": "1.36"},
	}}
	for i := 0; i < n; i++ {
		w := &state.Workload{
			Agent: fmt.Sprintf("agent_%d", i%100), Runtime: "podman", RestartPolicy: state.RestartNever,
			RuntimeConfig: fmt.Sprintf("image: busybox\ncommandArgs: [\"sleep\", \"%d\"]\n", i),
			Tags:          map[string]string{"i": fmt.Sprint(i)},
		}
		if i%2 == 0 {
			w.Configs = map[string]string{"c": "img"}
			w.RuntimeConfig = fmt.Sprintf("image: {{c.name}}:{{c.tag}}\ncommandArgs: [\"sleep\", \"%d\"]\n", i)
		}
		s.Workloads[fmt.Sprintf("wl_%05d", i)] = w
	}
	return &s
}

// BenchmarkUpdateOneWorkloadOf10k: an UpdateState that changes one
// workload in a state of 10,000, end to end: the CLI stream, mask,
// validation, rendering, diff, the Raft commit (bolt fsync) and the answer.
func BenchmarkUpdateOneWorkloadOf10k(b *testing.B) {
	// 10,000 workloads are over the default limits (1,000, 3 MiB).
	ts := startServerCfg(b, b.TempDir(), bigState(10000), func(c *Config) { c.Limits = &state.Limits{} })
	cli := ts.cli()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		y := fmt.Sprintf("apiVersion: v1\nworkloads:\n  wl_00001:\n    runtime: podman\n    agent: agent_1\n    runtimeConfig: \"image: busybox\\ncommandArgs: [sleep, %d]\"\n", i)
		tr, err := state.ParseTree([]byte(y))
		if err != nil {
			b.Fatal(err)
		}
		r := cli.update(state.Tree{"desiredState": tr}, "desiredState.workloads.wl_00001")
		if r.GetUpdateStateSuccess() == nil {
			b.Fatalf("rejected: %v", r)
		}
	}
}

// BenchmarkPlanOneWorkloadOf10k is the server's CPU part of the same
// update without Raft: mask, validation, rendering and diff.
func BenchmarkPlanOneWorkloadOf10k(b *testing.B) {
	st := state.NewStore()
	r := render.New()
	p, err := plan.Make(r, state.Limits{}, plan.Admission{}, st, *bigState(10000), nil, nil)
	if err != nil {
		b.Fatal(err)
	}
	st.ApplyDesired(&p.Update, 1)
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		nt := state.Tree{"desiredState": state.Tree{"workloads": state.Tree{"wl_00002": map[string]any{
			"runtime": "podman", "agent": "agent_2", "configs": map[string]any{"c": "img"},
			"runtimeConfig": fmt.Sprintf("image: {{c.name}}\nargs: [%d]", i)}}}}
		next, _, err := state.ApplyUpdateMask(st.Desired, nil, nt, []string{"desiredState.workloads.wl_00002"})
		if err != nil {
			b.Fatal(err)
		}
		if _, err := plan.Make(r, state.Limits{}, plan.Admission{}, st, next, nil, nil); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkGetWorkloadStates1000x10: GetCompleteState with
// workloadStates.*.*.*.state on 1,000 agents × 10 workloads.
func BenchmarkGetWorkloadStates1000x10(b *testing.B) {
	ts := startServer(b, nil)
	var ws []state.WorkloadState
	for a := 0; a < 1000; a++ {
		for w := 0; w < 10; w++ {
			ws = append(ws, state.WorkloadState{Instance: state.NewInstanceName(fmt.Sprintf("wl_%d", w), fmt.Sprintf("agent_%d", a), fmt.Sprint(a, w)), State: state.RunningOk})
		}
	}
	buf, err := fsm.Encode(&fsm.WorkloadReportsRequest{Reports: []fsm.AgentReport{{Agent: "bench", States: ws}}})
	if err != nil {
		b.Fatal(err)
	}
	if _, _, err := ts.node.Apply(buf, 10*time.Second); err != nil {
		b.Fatal(err)
	}
	cli := ts.cli()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		cs := cli.get("workloadStates.*.*.*.state")
		if len(cs.GetWorkloadStates().GetAgentStateMap()) != 1000 {
			b.Fatalf("got %d agents", len(cs.GetWorkloadStates().GetAgentStateMap()))
		}
	}
}
