//go:build unix

package server

import (
	"fmt"
	"testing"

	"github.com/grapnel-io/grapnel/fsm"
	"github.com/grapnel-io/grapnel/rpc"
	"github.com/grapnel-io/grapnel/rpc/ankbase"
	"github.com/grapnel-io/grapnel/server/plan"
	"github.com/grapnel-io/grapnel/state"
	"github.com/grapnel-io/grapnel/state/render"
)

// bench10k is a leader whose projected store holds bigState(10000), and
// the request that changes workload wl_00002 (templated) for run i.
func bench10k(b *testing.B) (*leader, func(i int) *ankbase.UpdateStateRequest) {
	st := state.NewStore()
	for a := range 100 {
		st.AgentConnected(fmt.Sprintf("agent_%d", a), nil)
	}
	p, err := plan.Make(render.New(), state.Limits{}, plan.Admission{}, st, *bigState(10000), nil, nil)
	if err != nil {
		b.Fatal(err)
	}
	st.ApplyDesired(&p.Update, 1)
	for _, r := range st.Rendered {
		st.States.Set(r.Instance, state.RunningOk)
	}
	l := planLeader(st, state.Limits{})
	req := func(i int) *ankbase.UpdateStateRequest {
		cs, err := rpc.CompleteStateFromTree(state.Tree{"desiredState": state.Tree{"apiVersion": "v1", "workloads": state.Tree{"wl_00002": map[string]any{
			"runtime": "podman", "agent": "agent_2", "configs": map[string]any{"c": "img"},
			"runtimeConfig": fmt.Sprintf("image: {{c.name}}\nargs: [%d]", i)}}}})
		if err != nil {
			b.Fatal(err)
		}
		return &ankbase.UpdateStateRequest{NewState: cs, UpdateMask: []string{"desiredState.workloads.wl_00002"}}
	}
	return l, req
}

// cpuPerOp reports, when the returned function is called at the end of
// the loop, the process's CPU time (user and system) per operation as
// cpu-ns/op: on a machine shared with other jobs the wall time per
// operation measures the load as much as the code.
func cpuPerOp(b *testing.B) func() {
	start := cpuTime()
	return func() { b.ReportMetric(float64(cpuTime()-start)/float64(b.N), "cpu-ns/op") }
}

// BenchmarkDryRunOneWorkloadOf10k: a dry-run of a one-workload change in
// a state of 10,000 workloads, from the request to the plan answered:
// mask, every check, rendering, diff, cycle check, the command's size,
// and the description (field diff, agent steps).
func BenchmarkDryRunOneWorkloadOf10k(b *testing.B) {
	l, req := bench10k(b)
	b.ResetTimer()
	defer cpuPerOp(b)()
	for i := 0; i < b.N; i++ {
		if resp := l.dryRun(req(i), "", plan.Admission{}); !resp.GetAccepted() || len(resp.GetAgents()[0].GetSteps()) != 2 {
			b.Fatalf("plan: %v", resp)
		}
	}
}

// BenchmarkPlanUpdateOneWorkloadOf10k is the same request planned as a
// real update plans it before proposing: mask, checks, rendering, diff,
// cycle check and the encoded command.
func BenchmarkPlanUpdateOneWorkloadOf10k(b *testing.B) {
	l, req := bench10k(b)
	b.ResetTimer()
	defer cpuPerOp(b)()
	for i := 0; i < b.N; i++ {
		p, err := l.planUpdate(req(i), plan.Admission{}, plan.Guard{})
		if err != nil {
			b.Fatal(err)
		}
		if _, err := l.encodeChecked(&fsm.UpdateDesiredStateRequest{Update: p.Update, Seq: 2}); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkDryRunConfigOf10k: a dry-run of a change to the config item
// that 5,000 of the 10,000 workloads render: every one of them is
// rendered again, updated, and gets two steps. It shows that describing
// a plan grows with the workloads it changes, not faster.
func BenchmarkDryRunConfigOf10k(b *testing.B) {
	l, _ := bench10k(b)
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		cs, err := rpc.CompleteStateFromTree(state.Tree{"desiredState": state.Tree{"apiVersion": "v1", "configs": state.Tree{
			"img": map[string]any{"name": "busybox", "tag": fmt.Sprint(i)}}}})
		if err != nil {
			b.Fatal(err)
		}
		resp := l.dryRun(&ankbase.UpdateStateRequest{NewState: cs, UpdateMask: []string{"desiredState.configs.img"}}, "", plan.Admission{})
		if !resp.GetAccepted() || len(resp.GetWorkloads()) != 5000 {
			b.Fatalf("plan: accepted %v, %d workloads", resp.GetAccepted(), len(resp.GetWorkloads()))
		}
	}
}

// BenchmarkDryRunInputOf10k is what a dry-run costs the leader loop in
// a state of 10,000 workloads on 100 agents: taking its input, a
// planning view of the projected store (input), and that plus the first
// state report of one agent after it, which copies that agent's states
// (input+report). The planning itself runs off the loop.
func BenchmarkDryRunInputOf10k(b *testing.B) {
	l, _ := bench10k(b)
	st := l.projected.store
	var report []state.WorkloadState
	for _, r := range st.Rendered {
		if r.Instance.AgentName == "agent_7" {
			report = append(report, state.WorkloadState{Instance: r.Instance, State: state.RunningOk})
			break
		}
	}
	b.Run("input", func(b *testing.B) {
		for b.Loop() {
			_ = l.dryRunInput()
		}
	})
	b.Run("input+report", func(b *testing.B) {
		for b.Loop() {
			_ = l.dryRunInput()
			st.ApplyStates(report)
		}
	})
}
