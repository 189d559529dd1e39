package ingest

import (
	"fmt"
	"reflect"
	"testing"

	"github.com/grapnel-io/grapnel/state"
)

func inst(agent string, i int) state.InstanceName {
	return state.NewInstanceName(fmt.Sprintf("w%d", i), agent, fmt.Sprint(i))
}

func report(agent string, inc, gen uint64, s state.ExecutionState, is ...int) Report {
	r := Report{Agent: agent, Mark: state.ReportMark{Incarnation: inc, Generation: gen}}
	for _, i := range is {
		r.States = append(r.States, state.WorkloadState{Instance: inst(agent, i), State: s})
	}
	return r
}

var pending = state.ExecutionState{State: state.StatePending, SubState: state.SubStarting}

// The newest state of an instance wins; instances keep their arrival
// order; the report carries the newest mark.
func TestNewestStatePerInstanceWins(t *testing.T) {
	s := NewStates(0, nil)
	s.Offer(report("a", 1, 1, pending, 1, 2))
	s.Offer(report("a", 1, 2, state.RunningOk, 2))
	s.Offer(report("a", 1, 3, state.RunningOk, 3, 1))
	b, ok := s.Next()
	if !ok || len(b.Reports) != 1 {
		t.Fatalf("batch %+v", b)
	}
	r := b.Reports[0]
	want := []state.WorkloadState{{Instance: inst("a", 1), State: state.RunningOk}, {Instance: inst("a", 2), State: state.RunningOk}, {Instance: inst("a", 3), State: state.RunningOk}}
	if !reflect.DeepEqual(r.States, want) || r.Mark != (state.ReportMark{Incarnation: 1, Generation: 3}) {
		t.Fatalf("report %+v", r)
	}
	if s.Pending() != 0 {
		t.Fatalf("pending %d", s.Pending())
	}
}

// Reports older than the newest accepted one, or than the mark the
// cluster stored, are dropped; Ankaios agents' unmarked reports are taken
// in arrival order.
func TestStaleReportsDropped(t *testing.T) {
	stored := map[string]state.ReportMark{"a": {Incarnation: 2, Generation: 10}}
	cases := []struct {
		name   string
		offers []Report
		want   []bool
	}{
		{"older than stored", []Report{report("a", 2, 9, pending, 1)}, []bool{false}},
		{"repeat of stored", []Report{report("a", 2, 10, pending, 1)}, []bool{false}},
		{"earlier incarnation", []Report{report("a", 1, 50, pending, 1)}, []bool{false}},
		{"newer then older", []Report{report("a", 2, 12, pending, 1), report("a", 2, 11, state.RunningOk, 1)}, []bool{true, false}},
		{"new incarnation", []Report{report("a", 3, 1, pending, 1), report("a", 2, 99, pending, 1)}, []bool{true, false}},
		{"unmarked agent", []Report{report("b", 0, 0, pending, 1), report("b", 0, 0, state.RunningOk, 1)}, []bool{true, true}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			s := NewStates(0, stored)
			for i, r := range c.offers {
				if got := s.Offer(r); got != c.want[i] {
					t.Fatalf("offer %d accepted %v, want %v", i, got, c.want[i])
				}
			}
		})
	}
	s := NewStates(0, stored)
	s.Offer(report("a", 2, 9, pending, 1))
	if _, ok := s.Next(); ok {
		t.Fatal("a dropped report was batched")
	}
}

// One batch at a time, bounded, and agents served fairly: an agent with
// more states than fit does not starve the others.
func TestBatchesBoundedAndFair(t *testing.T) {
	s := NewStates(4, nil)
	s.Offer(report("busy", 1, 1, pending, 1, 2, 3, 4, 5, 6, 7))
	s.Offer(report("b", 1, 1, pending, 1))
	s.Offer(report("c", 1, 1, pending, 1))
	b1, ok := s.Next()
	if !ok || b1.Len() != 4 || len(b1.Reports) != 1 || b1.Reports[0].Agent != "busy" {
		t.Fatalf("first batch %+v", b1)
	}
	if !b1.Reports[0].Mark.IsZero() {
		t.Fatal("a partial report carries the mark")
	}
	if _, ok := s.Next(); ok {
		t.Fatal("a second batch while one is in flight")
	}
	s.Settle(true)
	b2, _ := s.Next()
	agents := []string{}
	for _, r := range b2.Reports {
		agents = append(agents, r.Agent)
	}
	if !reflect.DeepEqual(agents, []string{"b", "c", "busy"}) || b2.Len() != 4 {
		t.Fatalf("second batch serves %v (%d states), want b, c, then busy", agents, b2.Len())
	}
	if b2.Reports[0].Mark.IsZero() {
		t.Fatal("a complete report lost its mark")
	}
	s.Settle(true)
	b3, _ := s.Next()
	if b3.Len() != 1 || b3.Reports[0].Agent != "busy" || b3.Reports[0].Mark != (state.ReportMark{Incarnation: 1, Generation: 1}) {
		t.Fatalf("third batch %+v", b3)
	}
	s.Settle(true)
	if _, ok := s.Next(); ok || s.Pending() != 0 {
		t.Fatal("left over states")
	}
}

// A batch that failed gives its states back unless newer ones arrived.
func TestFailedBatchRequeued(t *testing.T) {
	s := NewStates(0, nil)
	s.Offer(report("a", 1, 1, pending, 1, 2))
	s.Next()
	s.Offer(report("a", 1, 2, state.RunningOk, 2))
	s.Settle(false)
	b, ok := s.Next()
	if !ok {
		t.Fatal("nothing after a failed batch")
	}
	got := map[state.InstanceName]state.ExecutionState{}
	for _, ws := range b.Reports[0].States {
		got[ws.Instance] = ws.State
	}
	if got[inst("a", 1)] != pending || got[inst("a", 2)] != state.RunningOk || len(got) != 2 {
		t.Fatalf("requeued %v", got)
	}
	if b.Reports[0].Mark != (state.ReportMark{Incarnation: 1, Generation: 2}) {
		t.Fatalf("mark %v", b.Reports[0].Mark)
	}
}

// Flush takes an agent's pending states at once, even with a batch in
// flight, and removes the agent from the ready queue.
func TestFlushAgent(t *testing.T) {
	s := NewStates(0, nil)
	s.Offer(report("a", 1, 1, pending, 1))
	s.Next()
	s.Offer(report("a", 1, 2, state.Removed, 1))
	s.Offer(report("b", 1, 1, pending, 1))
	r, ok := s.Flush("a")
	if !ok || len(r.States) != 1 || r.States[0].State != state.Removed {
		t.Fatalf("flush %+v", r)
	}
	if _, ok := s.Flush("a"); ok {
		t.Fatal("second flush found states")
	}
	s.Settle(true)
	b, _ := s.Next()
	if len(b.Reports) != 1 || b.Reports[0].Agent != "b" {
		t.Fatalf("after flush %+v", b)
	}
	if s.Mark("a") != (state.ReportMark{Incarnation: 1, Generation: 2}) {
		t.Fatalf("mark %v", s.Mark("a"))
	}
}

// A Removed is handed out ahead of the next life of the same instance
// name, also when a batch that was not stored comes back behind it, and a
// batch never splits one instance's states.
func TestEndedLivesKept(t *testing.T) {
	s := NewStates(2, nil)
	stopping := state.ExecutionState{State: state.StateStopping, SubState: state.SubStopping}
	s.Offer(report("a", 1, 1, stopping, 1, 2))
	s.Offer(report("a", 1, 2, state.Removed, 1))
	b, _ := s.Next()
	want := []state.WorkloadState{{Instance: inst("a", 1), State: state.Removed}, {Instance: inst("a", 2), State: stopping}}
	if !reflect.DeepEqual(b.Reports[0].States, want) {
		t.Fatalf("first batch %v", b.Reports[0].States)
	}
	s.Offer(report("a", 1, 3, pending, 1))
	s.Offer(report("a", 1, 4, state.RunningOk, 1))
	s.Settle(false)
	b, _ = s.Next()
	if want := want[1:]; !reflect.DeepEqual(b.Reports[0].States, want) || b.Reports[0].Mark.Generation != 0 {
		t.Fatalf("after the batch came back: %+v", b.Reports[0])
	}
	s.Settle(true)
	b, _ = s.Next()
	want = []state.WorkloadState{{Instance: inst("a", 1), State: state.Removed}, {Instance: inst("a", 1), State: state.RunningOk}}
	if !reflect.DeepEqual(b.Reports[0].States, want) || b.Reports[0].Mark.Generation != 4 {
		t.Fatalf("last batch %+v", b.Reports[0])
	}
}
