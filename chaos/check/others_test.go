package check

import (
	"strings"
	"testing"
	"time"

	"github.com/grapnel-io/grapnel/chaos/history"
	"github.com/grapnel-io/grapnel/state"
)

func TestNoLostAcks(t *testing.T) {
	ok, unk, fail := history.OK, history.Unknown, history.Fail
	tests := []struct {
		name  string
		ops   []history.Op
		final kv
		want  bool
	}{
		{"survives", []history.Op{w(0, "a", "1", 0, 10, ok)}, kv{"a": "1"}, true},
		{"lost ack", []history.Op{w(0, "a", "1", 0, 10, ok)}, kv{}, false},
		{"replaced by later write", []history.Op{w(0, "a", "1", 0, 10, ok), w(1, "a", "2", 20, 30, ok)}, kv{"a": "2"}, true},
		{"replaced by concurrent delete", []history.Op{w(0, "a", "1", 0, 10, ok), del(1, "a", 5, 30, ok)}, kv{}, true},
		{"unknown delete may replace", []history.Op{w(0, "a", "1", 20, 30, ok), del(1, "a", 0, 10, unk)}, kv{}, true},
		{"earlier write cannot replace", []history.Op{w(1, "a", "0", 0, 10, ok), w(0, "a", "1", 20, 30, ok)}, kv{"a": "0"}, false},
		{"failed delete cannot replace", []history.Op{w(0, "a", "1", 0, 10, ok), del(1, "a", 20, 30, fail)}, kv{}, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			res := NoLostAcks(tt.ops, tt.final)
			if res.OK != tt.want {
				t.Fatalf("OK = %v, want %v: %s", res.OK, tt.want, res.Detail)
			}
			if !res.OK && len(res.Window) == 0 {
				t.Fatal("no lost ops listed")
			}
		})
	}
}

func TestOneLeaderPerTerm(t *testing.T) {
	at := time.Now()
	tests := []struct {
		name string
		obs  []LeaderObs
		want bool
		says []string
	}{
		{"agree", []LeaderObs{{at, "r1", 2, "r1"}, {at, "r2", 2, "r1"}, {at, "r3", 3, "r2"}}, true, nil},
		{"unknown leader skipped", []LeaderObs{{at, "r1", 2, "r1"}, {at, "r2", 2, ""}, {at, "r3", 0, "r3"}}, true, nil},
		{"two leaders in a term", []LeaderObs{{at, "r1", 4, "r1"}, {at, "r2", 4, "r2"}, {at, "r3", 4, "r2"}}, false, []string{"term 4", "r1 (said by r1)", "r2 (said by r2, r3)"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			res := OneLeaderPerTerm(tt.obs)
			if res.OK != tt.want {
				t.Fatalf("OK = %v: %s", res.OK, res.Detail)
			}
			for _, s := range tt.says {
				if !strings.Contains(res.Detail, s) {
					t.Errorf("detail %q lacks %q", res.Detail, s)
				}
			}
		})
	}
}

func TestStableIDs(t *testing.T) {
	tests := []struct {
		name          string
		before, after map[string]string
		want          bool
	}{
		{"same", kv{"a.1.x": "pid 10"}, kv{"a.1.x": "pid 10", "b.1.x": "pid 11"}, true},
		{"restarted", kv{"a.1.x": "pid 10"}, kv{"a.1.x": "pid 12"}, false},
		{"gone", kv{"a.1.x": "container c1"}, kv{}, false},
	}
	for _, tt := range tests {
		if res := StableIDs(tt.before, tt.after); res.OK != tt.want {
			t.Errorf("%s: OK = %v: %s", tt.name, res.OK, res.Detail)
		}
	}
}

func ws(wl, agent string, s state.ExecutionState) state.WorkloadState {
	return state.WorkloadState{Instance: state.InstanceName{WorkloadName: wl, AgentName: agent, ID: "id"}, State: s}
}

func TestConverged(t *testing.T) {
	want := map[string]string{"a": "agent_A", "b": "agent_B"}
	tests := []struct {
		name   string
		states []state.WorkloadState
		ok     bool
	}{
		{"all running", []state.WorkloadState{ws("a", "agent_A", state.RunningOk), ws("b", "agent_B", state.RunningOk)}, true},
		{"disconnected", []state.WorkloadState{ws("a", "agent_A", state.RunningOk), ws("b", "agent_B", state.AgentDisconnected)}, false},
		{"wrong agent", []state.WorkloadState{ws("a", "agent_A", state.RunningOk), ws("b", "agent_A", state.RunningOk)}, false},
		{"missing", []state.WorkloadState{ws("a", "agent_A", state.RunningOk)}, false},
	}
	for _, tt := range tests {
		if res := Converged(want, tt.states); res.OK != tt.ok {
			t.Errorf("%s: OK = %v: %s", tt.name, res.OK, res.Detail)
		}
	}
}

func TestDisconnectedOnlyWhenCut(t *testing.T) {
	grace := 5 * time.Second
	sec := func(n float64) time.Time { return t0.Add(time.Duration(n * float64(time.Second))) }
	disc := []state.WorkloadState{ws("a", "agent_A", state.AgentDisconnected)}
	long := Cut{Agent: "agent_A", From: sec(10), To: sec(30)}
	tests := []struct {
		name string
		at   float64
		cuts []Cut
		ok   bool
	}{
		{"during a long cut", 20, []Cut{long}, true},
		{"just before grace within tolerance", 14.5, []Cut{long}, true},
		{"too early", 12, []Cut{long}, false},
		{"settling after the cut", 33, []Cut{long}, true},
		{"long after the cut", 40, []Cut{long}, false},
		{"no cut", 20, nil, false},
		{"cut of another agent", 20, []Cut{{Agent: "agent_B", From: sec(10), To: sec(30)}}, false},
		{"cut shorter than grace", 14.5, []Cut{{Agent: "agent_A", From: sec(10), To: sec(12)}}, false},
		{"open cut", 100, []Cut{{Agent: "agent_A", From: sec(10)}}, true},
		{"stream lost late in packet loss", 37, []Cut{{Agent: "agent_A", From: sec(10), To: sec(30), Partial: true}}, true},
		{"long after packet loss", 41, []Cut{{Agent: "agent_A", From: sec(10), To: sec(30), Partial: true}}, false},
	}
	for _, tt := range tests {
		res := DisconnectedOnlyWhenCut([]StateSample{{At: sec(tt.at), States: disc}, {At: sec(1), States: []state.WorkloadState{ws("a", "agent_A", state.RunningOk)}}}, tt.cuts, grace)
		if res.OK != tt.ok {
			t.Errorf("%s: OK = %v: %s", tt.name, res.OK, res.Detail)
		}
	}
}
