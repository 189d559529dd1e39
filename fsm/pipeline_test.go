package fsm

import (
	"errors"
	"reflect"
	"testing"

	"github.com/hashicorp/raft"

	"github.com/grapnel-io/grapnel/state"
)

// applyResp applies one entry and returns the FSM's response.
func applyResp(t *testing.T, f *FSM, c Command) any {
	t.Helper()
	buf, err := Encode(c)
	if err != nil {
		t.Fatal(err)
	}
	index++
	return f.Apply(&raft.Log{Index: index, Type: raft.LogCommand, Data: buf})
}

// A sequenced update applies only on the desired state it was planned on;
// a refused one changes nothing, so the updates pipelined after a failed
// one are refused too.
func TestFSM_UpdateDesiredStateSeq(t *testing.T) {
	f := New()
	first := webUpdate()
	first.Seq = 1
	if resp := applyResp(t, f, first); resp != nil {
		t.Fatalf("first update refused: %v", resp)
	}
	s := read(f)
	if s.DesiredSeq != 1 || s.Revision != index || s.Desired.Workloads["web"] == nil {
		t.Fatalf("store after the first update: seq %d revision %d", s.DesiredSeq, s.Revision)
	}
	before := normalize(s)
	cases := []struct {
		name string
		seq  uint64
	}{
		{"repeats a sequence number", 1},
		{"skips a failed update", 3},
		{"no sequence number", 0},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			resp := applyResp(t, f, &UpdateDesiredStateRequest{Seq: c.seq,
				Update: state.DesiredUpdate{DeleteWorkloads: []string{"web"}, DeleteRendered: []string{"web"}}})
			err, _ := resp.(error)
			if !errors.Is(err, ErrOutOfSequence) {
				t.Fatalf("response %v, want ErrOutOfSequence", resp)
			}
			after := read(f)
			if !reflect.DeepEqual(before, normalize(after)) || after.DesiredSeq != 1 {
				t.Fatal("a refused update changed the store")
			}
		})
	}
	if resp := applyResp(t, f, &UpdateDesiredStateRequest{Seq: 2,
		Update: state.DesiredUpdate{PutConfigs: map[string]any{"k": "v"}}}); resp != nil {
		t.Fatalf("the next update in sequence was refused: %v", resp)
	}
}

// Reports carry the agent's mark; the store keeps the newest mark per agent
// and drops a report older than it, so a new leader drops it too.
func TestFSM_WorkloadReports(t *testing.T) {
	f := New()
	apply(t, f, webUpdate())
	other := state.NewInstanceName("db", "agent_B", "db")
	report := func(agent string, inc, gen uint64, s state.ExecutionState, in state.InstanceName) AgentReport {
		return AgentReport{Agent: agent, Mark: state.ReportMark{Incarnation: inc, Generation: gen},
			States: []state.WorkloadState{{Instance: in, State: s}}}
	}
	if resp := applyResp(t, f, &WorkloadReportsRequest{Reports: []AgentReport{
		report("agent_A", 2, 5, state.RunningOk, inst), report("agent_B", 0, 0, state.RunningOk, other)}}); !reflect.DeepEqual(resp,
		&WorkloadReportsResponse{New: []state.InstanceName{other}}) {
		t.Fatalf("fresh reports: %v, want %v new (%v had a state)", resp, other, inst)
	}
	// A stale report creates nothing; a Removed then a new life in one
	// report names the instance new only if it had no state before.
	gone := state.NewInstanceName("gone", "agent_B", "g")
	if resp := applyResp(t, f, &WorkloadReportsRequest{Reports: []AgentReport{
		report("agent_A", 1, 1, state.RunningOk, state.NewInstanceName("x", "agent_A", "x")),
		{Agent: "agent_B", States: []state.WorkloadState{{Instance: other, State: state.Removed}, {Instance: other, State: state.RunningOk},
			{Instance: gone, State: state.Removed}}}}}); !reflect.DeepEqual(resp,
		&WorkloadReportsResponse{Stale: []string{"agent_A"}, New: []state.InstanceName{gone}}) {
		t.Fatalf("mixed reports: %+v", resp)
	}
	cases := []struct {
		name      string
		report    AgentReport
		stale     bool
		wantState state.ExecutionState
		wantMark  state.ReportMark
	}{
		{"older generation dropped", report("agent_A", 2, 4, state.SucceededOk, inst), true, state.RunningOk, state.ReportMark{Incarnation: 2, Generation: 5}},
		{"same generation dropped", report("agent_A", 2, 5, state.SucceededOk, inst), true, state.RunningOk, state.ReportMark{Incarnation: 2, Generation: 5}},
		{"older incarnation dropped", report("agent_A", 1, 99, state.SucceededOk, inst), true, state.RunningOk, state.ReportMark{Incarnation: 2, Generation: 5}},
		{"newer generation applied", report("agent_A", 2, 6, state.SucceededOk, inst), false, state.SucceededOk, state.ReportMark{Incarnation: 2, Generation: 6}},
		{"newer incarnation applied", report("agent_A", 3, 1, state.RunningOk, inst), false, state.RunningOk, state.ReportMark{Incarnation: 3, Generation: 1}},
		{"unmarked report applied in arrival order", report("agent_A", 0, 0, state.ExecutionState{State: state.StateFailed, SubState: state.SubExecFailed}, inst), false, state.ExecutionState{State: state.StateFailed, SubState: state.SubExecFailed}, state.ReportMark{Incarnation: 3, Generation: 1}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			resp := applyResp(t, f, &WorkloadReportsRequest{Reports: []AgentReport{c.report}})
			if c.stale {
				r, ok := resp.(*WorkloadReportsResponse)
				if !ok || !reflect.DeepEqual(r.Stale, []string{"agent_A"}) {
					t.Fatalf("response %v, want agent_A stale", resp)
				}
			} else if resp != nil {
				t.Fatalf("response %v", resp)
			}
			s := read(f)
			if got, _ := s.States.Get(inst); got != c.wantState {
				t.Errorf("state %v, want %v", got, c.wantState)
			}
			if s.ReportMarks["agent_A"] != c.wantMark {
				t.Errorf("mark %v, want %v", s.ReportMarks["agent_A"], c.wantMark)
			}
		})
	}
	if _, ok := read(f).ReportMarks["agent_B"]; ok {
		t.Error("an unmarked report stored a mark")
	}
}

// Execute is what the leader runs on its speculative store: the same
// result as Apply, and an error rather than a panic for a wrong body.
func TestExecuteMatchesApply(t *testing.T) {
	f := New()
	spec := state.NewStore()
	cmds := []Command{
		&UpdateDesiredStateRequest{Seq: 1, Update: webUpdate().Update},
		&AgentConnectedRequest{Name: "agent_A"},
		&WorkloadReportsRequest{Reports: []AgentReport{{Agent: "agent_A", Mark: state.ReportMark{Incarnation: 1, Generation: 1},
			States: []state.WorkloadState{{Instance: inst, State: state.RunningOk}}}}},
		&AgentGoneRequest{Name: "agent_A"},
	}
	for _, c := range cmds {
		resp := applyResp(t, f, c)
		if got := Execute(spec, c, index); !reflect.DeepEqual(got, resp) {
			t.Fatalf("%s: Execute %v, Apply %v", c.Type(), got, resp)
		}
	}
	if got, want := normalize(spec), normalize(read(f)); !reflect.DeepEqual(got, want) {
		t.Fatalf("speculative store differs:\n%v\n%v", got, want)
	}
	if err, _ := Execute(spec, nil, 1).(error); !errors.Is(err, ErrBadCommand) {
		t.Fatalf("a wrong body: %v", err)
	}
}
