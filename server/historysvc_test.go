package server

import (
	"fmt"
	"strings"
	"testing"

	"github.com/grapnel-io/grapnel/state"
)

// Requirement (issue 15, point 3): a workload's timeline is its
// desired-state changes and its instances' execution-state transitions,
// in the order they were committed, with times, agents and instance
// names; other workloads' records are left out.
func TestTimelineMergesChangesAndTransitions(t *testing.T) {
	i1 := state.NewInstanceName("web", "agent_A", "1")
	i2 := state.NewInstanceName("web", "agent_B", "2")
	other := state.NewInstanceName("db", "agent_A", "x")
	h := state.NewHistory()
	h.AppendTx(&state.Tx{Index: 5, TimeMs: 100, Kind: state.TxUpdate, Requester: "cli-conn-1",
		Workloads: []state.TxWorkload{{Name: "web", Op: state.OpAdded, Instance: i1.String(), Changes: []state.FieldChange{{Field: "agent", New: "agent_A"}}},
			{Name: "db", Op: state.OpAdded, Instance: other.String()}}})
	// The transitions of the same entry come after its transaction.
	h.AppendTransitions([]state.Transition{{Index: 5, TimeMs: 100, Instance: other, State: state.RunningOk}}, 100)
	h.AppendTransitions([]state.Transition{{Index: 6, TimeMs: 150, Instance: i1, State: state.RunningOk}}, 150)
	h.AppendTx(&state.Tx{Index: 7, TimeMs: 200, Kind: state.TxDecision, Requester: "server", Reason: "agent agent_A disconnected",
		Workloads: []state.TxWorkload{{Name: "web", Op: state.OpStates, Instance: i1.String(), States: []string{"AgentDisconnected"}}}})
	h.AppendTransitions([]state.Transition{{Index: 7, TimeMs: 200, Instance: i1, State: state.AgentDisconnected}}, 200)
	h.AppendTx(&state.Tx{Index: 9, TimeMs: 300, Kind: state.TxUpdate, Requester: "cli-conn-2",
		Workloads: []state.TxWorkload{{Name: "web", Op: state.OpUpdated, Instance: i2.String(), OldInstance: i1.String(),
			Changes: []state.FieldChange{{Field: "agent", Old: "agent_A", New: "agent_B"}}}}})
	var got []string
	for _, ev := range timeline(h, "web") {
		got = append(got, fmt.Sprintf("%d/%d %s %s %s %s %s", ev.Index, ev.Seq, ev.Kind, ev.Op, ev.Agent, ev.State, strings.Join(ev.Fields, ",")))
	}
	want := []string{
		"5/1 Update Added agent_A  agent",
		"6/0 State  agent_A Running(Ok) ",
		"7/2 Decision States agent_A AgentDisconnected ",
		"7/0 State  agent_A AgentDisconnected ",
		"9/3 Update Updated agent_B  agent",
	}
	if strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Fatalf("timeline of web:\n%s\nwant\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
	if len(timeline(h, "nope")) != 0 {
		t.Fatal("a workload without records has a timeline")
	}
}
