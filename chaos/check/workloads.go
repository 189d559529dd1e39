package check

import (
	"fmt"
	"strings"

	"github.com/grapnel-io/grapnel/state"
)

// StableIDs checks that no workload was restarted: every instance running
// before (instance name → "pid N" / "container ID", from bench.HostIDs)
// runs after with the same id. Instances that only appear after are new,
// not restarted, and are not judged here.
func StableIDs(before, after map[string]string) Result {
	res := Result{Name: "stable-ids"}
	var bad []string
	for _, inst := range sortedKeys(before) {
		now, ok := after[inst]
		switch {
		case !ok:
			bad = append(bad, fmt.Sprintf("%s: was %s, not running after", inst, before[inst]))
		case now != before[inst]:
			bad = append(bad, fmt.Sprintf("%s: restarted, %s became %s", inst, before[inst], now))
		}
	}
	if len(bad) == 0 {
		res.OK = true
		res.Detail = fmt.Sprintf("%d instances kept their pid or container id", len(before))
		return res
	}
	res.Detail = fmt.Sprintf("%d of %d instances restarted or gone:\n  %s", len(bad), len(before), strings.Join(bad, "\n  "))
	return res
}

// Converged checks that every wanted workload (workload name → agent) has
// an instance on that agent in state Running.
func Converged(want map[string]string, states []state.WorkloadState) Result {
	res := Result{Name: "converged"}
	// workload → agent → short states seen
	seen := map[string]map[string][]string{}
	running := map[string]bool{} // workload\x00agent
	for _, s := range states {
		n := s.Instance
		if seen[n.WorkloadName] == nil {
			seen[n.WorkloadName] = map[string][]string{}
		}
		seen[n.WorkloadName][n.AgentName] = append(seen[n.WorkloadName][n.AgentName], s.State.Short())
		if s.State.State == state.StateRunning {
			running[n.WorkloadName+"\x00"+n.AgentName] = true
		}
	}
	var bad []string
	for _, wl := range sortedKeys(want) {
		agent := want[wl]
		if running[wl+"\x00"+agent] {
			continue
		}
		got := "no state"
		if s := seen[wl][agent]; len(s) > 0 {
			got = strings.Join(s, ", ")
		}
		if others := sortedKeys(seen[wl]); len(seen[wl][agent]) == 0 && len(others) > 0 {
			got += " (states on " + strings.Join(others, ", ") + ")"
		}
		bad = append(bad, fmt.Sprintf("%s on %s: %s", wl, agent, got))
	}
	if len(bad) == 0 {
		res.OK = true
		res.Detail = fmt.Sprintf("all %d wanted workloads Running on their agents", len(want))
		return res
	}
	res.Detail = fmt.Sprintf("%d of %d workloads not Running on their agent:\n  %s", len(bad), len(want), strings.Join(bad, "\n  "))
	return res
}
