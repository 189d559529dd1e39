package upgrade

import (
	"fmt"
	"strings"
)

// Release is one of the two builds under test.
type Release string

// The two builds: the previous release (.ci/previous-release) and this
// tree.
const (
	Old Release = "old"
	New Release = "new"
)

// Other is the other release.
func (r Release) Other() Release {
	if r == Old {
		return New
	}
	return Old
}

// Kind is what a step does.
type Kind string

// The step kinds.
const (
	// Start starts every replica and agent of the step's release on
	// empty data dirs and applies the workloads.
	Start Kind = "start"
	// SwapReplica stops one replica gracefully (SIGTERM) and starts the
	// other build on the same data dir.
	SwapReplica Kind = "swap-replica"
	// SwapAgent does the same with one agent and its run folder.
	SwapAgent Kind = "swap-agent"
	// Burst writes until every replica has taken a snapshot with the
	// build it runs, so that the next swap starts a build on a snapshot
	// the other one wrote.
	Burst Kind = "burst"
	// Finalize runs `grapnel cluster upgrade finalize`.
	Finalize Kind = "finalize"
	// RollbackRefused starts the old build on a finalized replica's data
	// dir, expects it to refuse cleanly, and starts the new one again.
	RollbackRefused Kind = "rollback-refused"
)

// Phases of a run.
const (
	PhaseStart    = "start"
	PhaseAhead    = "agent-ahead"
	PhaseUpgrade  = "upgrade"
	PhaseRollback = "rollback"
	PhaseAgain    = "upgrade-again"
	PhaseFinalize = "finalize"
)

// Step is one step of a run; the checks run after each.
type Step struct {
	// N numbers the steps from 1.
	N     int
	Phase string
	Kind  Kind
	// Target is the replica or agent index (SwapReplica, SwapAgent,
	// RollbackRefused).
	Target int
	// To is the release the target (every process, for Start) runs after
	// the step.
	To Release
	// LeadTo is the replica leadership is handed to once the swapped
	// one is back (-1: none): the first swap of a phase hands it to a
	// replica still on the other release, so that a leader of either
	// release serves followers of the other for a step each way.
	LeadTo int
	// Behind keeps the replica down while the others commit past what
	// the leader keeps of its log, so that it comes back through the
	// leader's snapshot (InstallSnapshot across releases).
	Behind bool
}

func (s Step) String() string {
	var b strings.Builder
	fmt.Fprintf(&b, "%d %s: ", s.N, s.Phase)
	switch s.Kind {
	case Start:
		fmt.Fprintf(&b, "start every replica and agent on %s", s.To)
	case SwapReplica:
		fmt.Fprintf(&b, "replica r%d -> %s", s.Target+1, s.To)
		if s.Behind {
			b.WriteString(" (kept down until it needs the leader's snapshot)")
		}
		if s.LeadTo == s.Target {
			b.WriteString(", then it leads")
		} else if s.LeadTo >= 0 {
			fmt.Fprintf(&b, ", then r%d leads", s.LeadTo+1)
		}
	case SwapAgent:
		fmt.Fprintf(&b, "agent %d -> %s", s.Target+1, s.To)
	case Burst:
		b.WriteString("write until every replica took a snapshot")
	case Finalize:
		b.WriteString("cluster upgrade finalize")
	case RollbackRefused:
		fmt.Fprintf(&b, "replica r%d -> old must be refused, then new again", s.Target+1)
	default:
		fmt.Fprintf(&b, "%s", s.Kind)
	}
	return b.String()
}

// PlanConfig shapes a run's steps.
type PlanConfig struct {
	Replicas, Agents int
	// Bursts adds a Burst at the end of every replica phase but the
	// last, so that every swap of the next phase starts a build on
	// snapshots the other build wrote.
	Bursts bool
	// Behind makes the first replica swap of each phase a Behind one.
	Behind bool
	// Finalize adds the finalize phase.
	Finalize bool
	// AgentAhead adds a phase after the start in which the first agent
	// moves to the new release and back while every replica runs the
	// old one: agents of the new release with replicas of the old, which
	// otherwise happens only in the rollback phase.
	AgentAhead bool
}

// Plan lists the steps: every replica and agent started on the old
// release; (with AgentAhead) the first agent to the new one and back;
// each replica, then each agent, moved to the new one; all of them back
// to the old one the same way; forward again; then, with Finalize, the
// upgrade finalized and a rollback tried on replica 1.
func Plan(c PlanConfig) []Step {
	var out []Step
	add := func(s Step) {
		s.N = len(out) + 1
		if s.Kind != SwapReplica {
			s.LeadTo = -1
		}
		out = append(out, s)
	}
	add(Step{Phase: PhaseStart, Kind: Start, To: Old})
	if c.AgentAhead && c.Agents > 0 {
		add(Step{Phase: PhaseAhead, Kind: SwapAgent, Target: 0, To: New})
		add(Step{Phase: PhaseAhead, Kind: SwapAgent, Target: 0, To: Old})
	}
	phases := []struct {
		name string
		to   Release
	}{{PhaseUpgrade, New}, {PhaseRollback, Old}, {PhaseAgain, New}}
	for pi, ph := range phases {
		for i := range c.Replicas {
			lead := i
			if i == 0 && c.Replicas > 1 {
				lead = 1
			}
			add(Step{Phase: ph.name, Kind: SwapReplica, Target: i, To: ph.to, LeadTo: lead, Behind: c.Behind && i == 0})
		}
		if c.Bursts && pi < len(phases)-1 {
			add(Step{Phase: ph.name, Kind: Burst, To: ph.to})
		}
		for i := range c.Agents {
			add(Step{Phase: ph.name, Kind: SwapAgent, Target: i, To: ph.to})
		}
	}
	if c.Finalize {
		add(Step{Phase: PhaseFinalize, Kind: Finalize, To: New})
		add(Step{Phase: PhaseFinalize, Kind: RollbackRefused, Target: 0, To: New})
	}
	return out
}

// Releases is what every replica and agent runs after steps, in order:
// replicas first, then agents. A step that failed still counts as done
// (the harness puts the target back on the release it came from and
// says so; see Runner).
func Releases(steps []Step, replicas, agents int) (reps, ags []Release) {
	reps, ags = make([]Release, replicas), make([]Release, agents)
	for _, s := range steps {
		switch s.Kind {
		case Start:
			for i := range reps {
				reps[i] = s.To
			}
			for i := range ags {
				ags[i] = s.To
			}
		case SwapReplica:
			reps[s.Target] = s.To
		case SwapAgent:
			ags[s.Target] = s.To
		}
	}
	return reps, ags
}
