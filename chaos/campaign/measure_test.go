package campaign

import (
	"testing"
	"time"

	"github.com/grapnel-io/grapnel/chaos/check"
	"github.com/grapnel-io/grapnel/chaos/history"
	"github.com/grapnel-io/grapnel/chaos/report"
)

var t0 = time.Date(2026, 1, 1, 12, 0, 0, 0, time.UTC)

func ms(n int) time.Time { return t0.Add(time.Duration(n) * time.Millisecond) }

// timeline: r1 leads term 2 with both agents, is killed at 1000 ms; r2
// wins term 3 at 1300 ms; agent a attaches at 1300, b at 1600.
func timeline() []report.Sample {
	var out []report.Sample
	for at := 0; at <= 3000; at += 50 {
		s := report.Sample{At: ms(at)}
		switch {
		case at < 1000:
			s.Leader, s.Term, s.Attached = "r1", 2, []string{"a", "b"}
		case at < 1300:
			s.Term = 2
		case at < 1600:
			s.Leader, s.Term, s.Attached = "r2", 3, []string{"a"}
		default:
			s.Leader, s.Term, s.Attached = "r2", 3, []string{"a", "b"}
		}
		out = append(out, s)
	}
	return out
}

func write(call, ret int, outcome history.Outcome) history.Op {
	return history.Op{Kind: history.Write, Key: "k", Call: ms(call), Return: ms(ret), Outcome: outcome}
}

func TestMeasureFault(t *testing.T) {
	ops := []history.Op{
		write(900, 1010, history.OK),    // sent before the fault: not counted
		write(1010, 1400, history.Fail), // failed
		write(1020, 1500, history.OK),   // the next ack: 500 ms
		{Kind: history.Read, Call: ms(1001), Return: ms(1100), Outcome: history.OK}, // a read is no ack
		write(1100, 1700, history.OK),
	}
	tests := []struct {
		name string
		f    report.Fault
		cuts bool
		want Measured
	}{
		{"leader kill", report.Fault{At: ms(1000), Healed: ms(2000)}, false,
			Measured{NewLeader: 300 * time.Millisecond, NextAck: 500 * time.Millisecond, AllAttached: 600 * time.Millisecond,
				LeaderChanged: true, Acked: true, AttachedAfterwards: true}},
		{"agent cut healed later", report.Fault{At: ms(1000), Healed: ms(2000)}, true,
			Measured{NewLeader: 300 * time.Millisecond, NextAck: 500 * time.Millisecond, AllAttached: time.Second,
				LeaderChanged: true, Acked: true, AttachedAfterwards: true}},
		{"no election after 1500", report.Fault{At: ms(1500)}, false,
			Measured{AllAttached: 100 * time.Millisecond, AttachedAfterwards: true}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got := MeasureFault(tc.f, tc.cuts, timeline(), ops, []string{"a", "b"}, time.Time{})
			if tc.name == "no election after 1500" {
				// the only ack after 1500 was sent at 1100: none.
				tc.want.Acked, tc.want.NextAck = false, 0
			}
			if got != tc.want {
				t.Fatalf("got %+v\nwant %+v", got, tc.want)
			}
		})
	}
}

func TestMeasureStopsAtUntil(t *testing.T) {
	got := MeasureFault(report.Fault{At: ms(1000)}, false, timeline(), nil, []string{"a", "b"}, ms(1200))
	if got.LeaderChanged || got.AttachedAfterwards || got.Acked {
		t.Fatalf("events after until counted: %+v", got)
	}
}

func TestFiguresPerKind(t *testing.T) {
	kinds := []Kind{LeaderKill, LeaderKill, FollowerKill}
	m := []Measured{
		{NewLeader: 300 * time.Millisecond, NextAck: 400 * time.Millisecond, LeaderChanged: true, Acked: true},
		{NewLeader: 500 * time.Millisecond, NextAck: 600 * time.Millisecond, LeaderChanged: true, Acked: true,
			AllAttached: time.Second, AttachedAfterwards: true},
		{NextAck: 10 * time.Millisecond, Acked: true},
	}
	figs := Figures(kinds, m)
	lk := figs[string(LeaderKill)]
	if lk.NewLeader.N != 2 || lk.NewLeader.P50 != 300*time.Millisecond || lk.NewLeader.Max != 500*time.Millisecond {
		t.Fatalf("leader-kill new leader %+v", lk.NewLeader)
	}
	if lk.AllAttached.N != 1 || lk.AllAttached.Max != time.Second {
		t.Fatalf("leader-kill attached %+v", lk.AllAttached)
	}
	fk := figs[string(FollowerKill)]
	if fk.NewLeader.N != 0 || fk.NextAck.N != 1 {
		t.Fatalf("follower-kill %+v: no election may be counted", fk)
	}
}

func TestFillAcks(t *testing.T) {
	samples := []report.Sample{{At: ms(0)}, {At: ms(100)}, {At: ms(200)}}
	ops := []history.Op{
		write(0, 50, history.OK), write(0, 150, history.OK), write(0, 160, history.OK),
		write(0, 170, history.Unknown),
		{Kind: history.Delete, Call: ms(0), Return: ms(180), Outcome: history.OK},
		write(0, 250, history.OK), // after the last sample
	}
	FillAcks(samples, ops)
	got := []int{samples[0].Acks, samples[1].Acks, samples[2].Acks}
	if got[0] != 0 || got[1] != 1 || got[2] != 3 {
		t.Fatalf("acks per sample %v, want [0 1 3]", got)
	}
}

func TestTermAt(t *testing.T) {
	tl := timeline()
	if got := TermAt(tl, ms(1200)); got != 2 {
		t.Fatalf("term at 1200 = %d, want 2 (the last leader's)", got)
	}
	if got := TermAt(tl, ms(2000)); got != 3 {
		t.Fatalf("term at 2000 = %d, want 3", got)
	}
}

func TestSelfClaims(t *testing.T) {
	obs := []check.LeaderObs{
		{At: ms(0), Replica: "r1", Term: 3, Leader: "r1"},
		{At: ms(0), Replica: "r2", Term: 3, Leader: "r0"}, // a follower's stale leader with the new term
		{At: ms(0), Replica: "r3", Term: 3, Leader: ""},
	}
	got := SelfClaims(obs)
	if len(got) != 1 || got[0].Replica != "r1" {
		t.Fatalf("got %v, want only r1's own claim", got)
	}
	if !check.OneLeaderPerTerm(got).OK {
		t.Fatal("one self-claim per term must pass")
	}
	two := append(got, check.LeaderObs{At: ms(10), Replica: "r2", Term: 3, Leader: "r2"})
	if check.OneLeaderPerTerm(SelfClaims(two)).OK {
		t.Fatal("two replicas leading term 3 must fail")
	}
}
