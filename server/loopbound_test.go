package server

import (
	"fmt"
	"testing"
	"time"

	"github.com/grapnel-io/grapnel/internal/testwait"
	"github.com/grapnel-io/grapnel/rpc/grpcapi"
	"github.com/grapnel-io/grapnel/server/ingest"
	"github.com/grapnel-io/grapnel/state"
)

// An agent that goes while many of its reported states wait to be
// proposed has them all stored before its departure, in entries of at
// most a batch each. They went in one entry: past max_update_bytes it
// was refused and the states were lost, and below it the leader loop
// planned and executed it in one go, for seconds with tens of thousands
// of states (issue 27).
func TestDepartingAgentsPendingStatesAreStoredInBatches(t *testing.T) {
	ts := startServer(t, nil)
	c := ts.agent("agent_A", nil)
	const n = 40000
	var ws []state.WorkloadState
	for i := range n {
		ws = append(ws, state.WorkloadState{Instance: state.NewInstanceName(fmt.Sprintf("wl_%05d", i), "agent_A", fmt.Sprint(i)), State: state.RunningOk})
	}
	// Two messages (each under the 4 MiB message limit), then goodbye:
	// most of the states still wait in the agent's conflation unit.
	c.report(2, ws[:n/2]...)
	c.report(3, ws[n/2:]...)
	c.send(&grpcapi.ToServer{ToServerEnum: &grpcapi.ToServer_Goodbye{Goodbye: &grpcapi.Goodbye{}}})
	if err := c.stream.CloseSend(); err != nil {
		t.Fatal(err)
	}
	var stored, disconnected int
	testwait.For(t, 30*time.Second, func() bool {
		ts.store(func(st *state.Store) {
			_, connected := st.Agents["agent_A"]
			stored, disconnected = 0, 0
			for _, s := range st.States.OfAgent("agent_A") {
				stored++
				if s.State == state.AgentDisconnected {
					disconnected++
				}
			}
			if connected {
				disconnected = -1
			}
		})
		return stored == n && disconnected == n
	}, "all %d states stored and AgentDisconnected", n)
	t.Logf("stored %d, disconnected %d", stored, disconnected)
}

func TestSplitReports(t *testing.T) {
	mark := func(g uint64) state.ReportMark { return state.ReportMark{Incarnation: 1, Generation: g} }
	states := func(agent string, k int) []state.WorkloadState {
		out := make([]state.WorkloadState, k)
		for i := range out {
			out[i] = state.WorkloadState{Instance: state.InstanceName{WorkloadName: fmt.Sprint(i), AgentName: agent, ID: "x"}, State: state.RunningOk}
		}
		return out
	}
	in := []ingest.Report{
		{Agent: "a", Mark: mark(1), States: states("a", 3)},
		{Agent: "b", Mark: mark(2), States: states("b", 6)},
		{Agent: "c", Mark: mark(3), States: states("c", 1)},
	}
	got := splitReports(in, 4)
	type part struct {
		agent string
		n     int
		mark  state.ReportMark
	}
	want := [][]part{
		{{"a", 3, mark(1)}, {"b", 1, state.ReportMark{}}},
		{{"b", 4, state.ReportMark{}}},
		{{"b", 1, mark(2)}, {"c", 1, mark(3)}},
	}
	var have [][]part
	for _, e := range got {
		var ps []part
		for _, r := range e {
			ps = append(ps, part{r.Agent, len(r.States), r.Mark})
		}
		have = append(have, ps)
	}
	if fmt.Sprint(have) != fmt.Sprint(want) {
		t.Fatalf("split %v, want %v", have, want)
	}
	// In order, nothing lost.
	var all []state.WorkloadState
	for _, e := range got {
		for _, r := range e {
			all = append(all, r.States...)
		}
	}
	var flat []state.WorkloadState
	for _, r := range in {
		flat = append(flat, r.States...)
	}
	if fmt.Sprint(all) != fmt.Sprint(flat) {
		t.Fatal("the split lost or reordered states")
	}
}
