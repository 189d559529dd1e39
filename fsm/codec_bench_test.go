package fsm

import (
	"fmt"
	"testing"

	"github.com/hashicorp/raft"

	"github.com/grapnel-io/grapnel/state"
)

// benchCommand is one command of each type the leader writes, as the
// benchmarks below encode, decode and apply it.
type benchCommand struct {
	name string
	cmd  Command
}

func benchCommands() []benchCommand {
	reports := &WorkloadReportsRequest{}
	for a := range 4 {
		agent := fmt.Sprintf("agent_%d", a)
		rep := AgentReport{Agent: agent, Mark: state.ReportMark{Incarnation: 3, Generation: uint64(a + 1)}}
		for w := range 8 {
			rep.States = append(rep.States, state.WorkloadState{
				Instance: state.NewInstanceName(fmt.Sprintf("wl_%d", w), agent, fmt.Sprint(a, w)), State: state.RunningOk})
		}
		reports.Reports = append(reports.Reports, rep)
	}
	return []benchCommand{
		{"UpdateDesiredState", richUpdate(1)},
		{"AgentConnected", &AgentConnectedRequest{Name: "agent_A", Tags: map[string]string{"region": "eu", "tier": "gold"}}},
		{"AgentGone", &AgentGoneRequest{Name: "agent_A"}},
		{"WorkloadReports", reports},
	}
}

// BenchmarkDecodeEntry decodes one entry of each type as Apply does;
// entry-bytes is the entry's length.
func BenchmarkDecodeEntry(b *testing.B) {
	for _, c := range benchCommands() {
		buf, err := Encode(c.cmd)
		if err != nil {
			b.Fatal(err)
		}
		b.Run(c.name, func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				if _, _, err := Decode(buf); err != nil {
					b.Fatal(err)
				}
			}
			b.ReportMetric(float64(len(buf)), "entry-bytes")
		})
	}
}

// BenchmarkEncodeEntry encodes one command of each type.
func BenchmarkEncodeEntry(b *testing.B) {
	for _, c := range benchCommands() {
		b.Run(c.name, func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				if _, err := Encode(c.cmd); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// BenchmarkApplyEntry applies one entry of each type to a new FSM: the
// decode, the store's work, and New.
func BenchmarkApplyEntry(b *testing.B) {
	for _, c := range benchCommands() {
		buf, err := Encode(c.cmd)
		if err != nil {
			b.Fatal(err)
		}
		b.Run(c.name, func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				f := New()
				if resp := f.Apply(&raft.Log{Index: 1, Type: raft.LogCommand, Data: buf}); resp != nil {
					if _, ok := resp.(error); ok {
						b.Fatal(resp)
					}
				}
			}
		})
	}
}
