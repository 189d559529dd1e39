package upgrade

import (
	"strings"
	"testing"
)

// The issue's sequence: every replica then every agent to the new
// release, all back the same way, forward again, then finalize and a
// refused rollback.
func TestPlanFollowsTheIssuesSequence(t *testing.T) {
	steps := Plan(PlanConfig{Replicas: 3, Agents: 3, Finalize: true})
	var got []string
	for i, s := range steps {
		if s.N != i+1 {
			t.Fatalf("step %d numbered %d", i+1, s.N)
		}
		got = append(got, s.String())
	}
	want := []string{
		"1 start: start every replica and agent on old",
		"2 upgrade: replica r1 -> new, then r2 leads",
		"3 upgrade: replica r2 -> new, then it leads",
		"4 upgrade: replica r3 -> new, then it leads",
		"5 upgrade: agent 1 -> new",
		"6 upgrade: agent 2 -> new",
		"7 upgrade: agent 3 -> new",
		"8 rollback: replica r1 -> old, then r2 leads",
		"9 rollback: replica r2 -> old, then it leads",
		"10 rollback: replica r3 -> old, then it leads",
		"11 rollback: agent 1 -> old",
		"12 rollback: agent 2 -> old",
		"13 rollback: agent 3 -> old",
		"14 upgrade-again: replica r1 -> new, then r2 leads",
		"15 upgrade-again: replica r2 -> new, then it leads",
		"16 upgrade-again: replica r3 -> new, then it leads",
		"17 upgrade-again: agent 1 -> new",
		"18 upgrade-again: agent 2 -> new",
		"19 upgrade-again: agent 3 -> new",
		"20 finalize: cluster upgrade finalize",
		"21 finalize: replica r1 -> old must be refused, then new again",
	}
	if strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Fatalf("plan:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
}

// A full run adds the bursts (not after the last replica phase), keeps
// the first replica of each phase behind, and moves an agent ahead.
func TestPlanFullAddsBurstsBehindAndAgentAhead(t *testing.T) {
	steps := Plan(PlanConfig{Replicas: 3, Agents: 3, Bursts: true, Behind: true, AgentAhead: true})
	var bursts []string
	behind := 0
	for _, s := range steps {
		switch {
		case s.Kind == Burst:
			bursts = append(bursts, s.Phase)
		case s.Behind:
			behind++
			if s.Kind != SwapReplica || s.Target != 0 {
				t.Errorf("behind step %s is not the first replica swap", s)
			}
		}
	}
	if strings.Join(bursts, ",") != "upgrade,rollback" {
		t.Errorf("bursts in phases %v, want upgrade and rollback", bursts)
	}
	if behind != 3 {
		t.Errorf("%d behind swaps, want one per replica phase", behind)
	}
	if steps[1].Phase != PhaseAhead || steps[1].Kind != SwapAgent || steps[1].To != New ||
		steps[2].Phase != PhaseAhead || steps[2].To != Old {
		t.Errorf("agent-ahead phase: %v, %v", steps[1], steps[2])
	}
	for _, s := range steps {
		if s.Kind == Finalize || s.Kind == RollbackRefused {
			t.Errorf("finalize step %s without Finalize", s)
		}
		if s.Kind != SwapReplica && s.LeadTo != -1 {
			t.Errorf("%s hands leadership to %d", s, s.LeadTo)
		}
	}
}

// After every step the releases are what the steps say; after the whole
// plan every process runs the new release.
func TestReleasesFollowTheSteps(t *testing.T) {
	steps := Plan(PlanConfig{Replicas: 3, Agents: 2, Finalize: true, AgentAhead: true})
	at := func(n int) string {
		reps, ags := Releases(steps[:n], 3, 2)
		return joinReleases(reps) + "|" + joinReleases(ags)
	}
	for n, want := range map[int]string{
		1:          "old old old|old old",
		2:          "old old old|new old", // the agent ahead
		3:          "old old old|old old",
		4:          "new old old|old old",
		6:          "new new new|old old",
		8:          "new new new|new new",
		9:          "old new new|new new",
		13:         "old old old|old old",
		len(steps): "new new new|new new",
	} {
		if got := at(n); got != want {
			t.Errorf("after %d steps: %s, want %s", n, got, want)
		}
	}
}

func joinReleases(rs []Release) string {
	var out []string
	for _, r := range rs {
		out = append(out, string(r))
	}
	return strings.Join(out, " ")
}

// A single replica has nobody to hand leadership to.
func TestPlanSingleReplicaKeepsLeadership(t *testing.T) {
	for _, s := range Plan(PlanConfig{Replicas: 1, Agents: 1}) {
		if s.Kind == SwapReplica && s.LeadTo != 0 {
			t.Errorf("%s: leadership to %d", s, s.LeadTo)
		}
	}
}
