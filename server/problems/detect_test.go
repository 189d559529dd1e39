package problems

import (
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/grapnel-io/grapnel/state"
)

// fixture builds stores for the table tests.
type fixture struct{ st *state.Store }

func newFixture() *fixture { return &fixture{st: state.NewStore()} }

// workload adds a desired workload on agent with dependencies, and its
// rendering.
func (f *fixture) workload(name, agent string, deps ...string) state.InstanceName {
	w := &state.Workload{Agent: agent, Runtime: "podman", RuntimeConfig: "image: " + name}
	if len(deps) > 0 {
		w.Dependencies = map[string]state.AddCondition{}
		for _, d := range deps {
			w.Dependencies[d] = state.AddCondRunning
		}
	}
	f.st.Desired.Workloads[name] = w
	in := state.NewInstanceName(name, agent, w.RuntimeConfig)
	f.st.Rendered[name] = state.Rendered{Instance: in, Workload: w}
	f.st.States.Set(in, state.PendingInitial)
	return in
}

func (f *fixture) connected(agent string) { f.st.AgentConnected(agent, nil) }

// gone is an agent that reported once and whose departure committed.
func (f *fixture) gone(agent string) {
	f.st.AgentConnected(agent, nil)
	f.st.ReportMarks[agent] = state.ReportMark{Incarnation: 1}
	f.st.AgentGone(agent)
}

func (f *fixture) transition(in state.InstanceName, ms int64, s state.ExecutionState) {
	f.st.History.AppendTransitions([]state.Transition{{TimeMs: ms, Instance: in, State: s}}, ms)
	f.st.States.Set(in, s)
}

func (f *fixture) open(k Kind, key string) {
	f.st.Problems.OpenProblem(state.Problem{Kind: string(k), Key: key, Summary: "s", Detail: "d",
		Objects: []state.ProblemObject{{Kind: ObjAgent, Name: "x"}}})
}

// openStorage opens the AgentStorageFailed problem of agent, as a leader
// recorded it.
func (f *fixture) openStorage(agent string) {
	f.st.Problems.OpenProblem(state.Problem{Kind: string(AgentStorageFailed), Key: key(AgentStorageFailed, agent), Summary: "s", Detail: "d",
		Objects: []state.ProblemObject{{Kind: ObjAgent, Name: agent}}})
}

var (
	execFailed     = state.ExecutionState{State: state.StateFailed, SubState: state.SubExecFailed}
	startingFailed = state.ExecutionState{State: state.StatePending, SubState: state.SubStartingFailed}
	lost           = state.ExecutionState{State: state.StateFailed, SubState: state.SubLost}
)

const minute = 60_000

func keys(r Result) []string {
	var out []string
	for _, f := range r.Findings {
		out = append(out, f.Key)
	}
	return out
}

// TestDetect proves each check of the problems view (issue 16, point 3):
// what raises a problem, what does not, and what keeps one open.
func TestDetect(t *testing.T) {
	crashLoop := func(f *fixture, in state.InstanceName, times ...int64) {
		for _, ms := range times {
			f.transition(in, ms-1, state.RunningOk)
			f.transition(in, ms, execFailed)
		}
	}
	cases := []struct {
		name  string
		build func(f *fixture)
		facts Facts
		want  []string
		wake  int64
	}{
		{"nothing wrong raises nothing", func(f *fixture) {
			f.workload("a", "A")
			f.workload("b", "A", "a")
			f.connected("A")
		}, Facts{}, nil, 0},
		{"a dependency on a missing workload is a problem", func(f *fixture) {
			f.workload("app", "A", "db", "cache")
			f.workload("cache", "A")
			f.connected("A")
		}, Facts{}, []string{"MissingDependency/app/db"}, 0},
		{"an agent gone past its grace with workloads is a problem", func(f *fixture) {
			f.workload("a", "B")
			f.gone("B")
		}, Facts{}, []string{"AgentGone/B"}, 0},
		{"an agent gone with no workload assigned is none", func(f *fixture) {
			f.gone("B")
		}, Facts{}, nil, 0},
		{"an agent that reconnected (hello not yet committed) is none", func(f *fixture) {
			f.workload("a", "B")
			f.gone("B")
		}, Facts{Connected: map[string]bool{"B": true}}, nil, 0},
		{"an agent never connected past the grace is a problem", func(f *fixture) {
			f.workload("a", "typo")
		}, Facts{}, []string{"AgentNeverConnected/typo"}, 0},
		{"an agent never connected within the grace is none yet", func(f *fixture) {
			f.workload("a", "late")
		}, Facts{InGrace: map[string]bool{"late": true}}, nil, 0},
		{"an agent in its grace keeps the problem it had (failover)", func(f *fixture) {
			f.workload("a", "B")
			f.gone("B")
			f.open(AgentGone, "AgentGone/B")
		}, Facts{InGrace: map[string]bool{"B": true}}, []string{"AgentGone/B"}, 0},
		{"a disabled agent is not monitored (MAMID, D11)", func(f *fixture) {
			f.workload("a", "B")
			f.gone("B")
			f.workload("c", "never")
		}, Facts{Disabled: map[string]bool{"B": true, "never": true}}, nil, 0},
		{"a desired instance lost for StuckMs is a problem (M14)", func(f *fixture) {
			in := f.workload("cache", "A")
			f.connected("A")
			f.transition(in, 1*minute, state.RunningOk)
			f.transition(in, 2*minute, lost)
		}, Facts{NowMs: 2*minute + StuckMs}, []string{"WorkloadLost/" + state.NewInstanceName("cache", "A", "image: cache").String()}, 0},
		{"a desired instance lost for less than StuckMs is none yet, and wakes the leader", func(f *fixture) {
			in := f.workload("cache", "A")
			f.connected("A")
			f.transition(in, 2*minute, lost)
		}, Facts{NowMs: 2*minute + 1000}, nil, 2*minute + StuckMs},
		{"a lost instance of a deleted workload is none", func(f *fixture) {
			in := f.workload("cache", "A")
			f.connected("A")
			f.transition(in, 1*minute, lost)
			delete(f.st.Desired.Workloads, "cache")
			delete(f.st.Rendered, "cache")
		}, Facts{NowMs: 60 * minute}, nil, 0},
		{"a delete that waits for dependents for StuckMs is a problem", func(f *fixture) {
			db := f.workload("db", "A")
			f.workload("api", "A", "db")
			f.st.DeleteGraph.Insert("api", f.st.Desired.Workloads["api"])
			f.connected("A")
			delete(f.st.Desired.Workloads, "db")
			delete(f.st.Rendered, "db")
			f.transition(db, 1*minute, state.ExecutionState{State: state.StateStopping, SubState: state.SubWaitingToStop, AdditionalInfo: "api: running"})
		}, Facts{NowMs: 1*minute + StuckMs}, []string{"DeleteWaiting/" + state.NewInstanceName("db", "A", "image: db").String(), "MissingDependency/api/db"}, 0},
		{"a delete that waits briefly is none yet, and wakes the leader", func(f *fixture) {
			db := f.workload("db", "A")
			f.connected("A")
			delete(f.st.Desired.Workloads, "db")
			delete(f.st.Rendered, "db")
			f.transition(db, 1*minute, state.ExecutionState{State: state.StateStopping, SubState: state.SubWaitingToStop})
		}, Facts{NowMs: 1*minute + 5000}, nil, 1*minute + StuckMs},
		{"a voter down is a problem, and a quorum with no margin left too", func(f *fixture) {},
			Facts{ReplicasDown: map[string]string{"n3": "no answer for 12s"}, Quorum: Quorum{Voters: 3, Reachable: 2}},
			[]string{"QuorumAtRisk/voters", "ReplicaDown/n3"}, 0},
		{"a voter down of five leaves a margin: no quorum problem", func(f *fixture) {},
			Facts{ReplicasDown: map[string]string{"n5": "gossip: dead"}, Quorum: Quorum{Voters: 5, Reachable: 4}},
			[]string{"ReplicaDown/n5"}, 0},
		{"a single voter or two voters all reachable are no problem", func(f *fixture) {},
			Facts{Quorum: Quorum{Voters: 1, Reachable: 1}}, nil, 0},
		{"an agent in maintenance raises no problem", func(f *fixture) {
			f.workload("a", "B")
			f.gone("B")
			f.workload("c", "never")
		}, Facts{Maintenance: map[string]bool{"B": true, "never": true}}, nil, 0},
		{"a replica whose storage failed is a problem (issue 29 point 3)", func(f *fixture) {},
			Facts{StorageFailed: map[string]string{"n2": "append log entries wal/1.wal: no space left on device", "n1": "write CurrentTerm: read-only file system"}},
			[]string{"StorageFailed/n1", "StorageFailed/n2"}, 0},
		{"a replica that holds its vote is a problem (issue 29 point 3)", func(f *fixture) {},
			Facts{VoteHeld: map[string]string{"n3": "started with no Raft state; catching up"}},
			[]string{"VoteHeld/n3"}, 0},
		{"an agent whose run folder failed is a problem (issue 29 point 3)", func(f *fixture) {
			f.workload("a", "A")
			f.connected("A")
		}, Facts{Connected: map[string]bool{"A": true}, AgentStorageFailed: map[string]string{"A": "replace workload-uids.json: no space left on device"}},
			[]string{"AgentStorageFailed/A"}, 0},
		{"an agent in its grace keeps its run folder problem (failover, broken stream)", func(f *fixture) {
			f.workload("a", "A")
			f.connected("A")
			f.openStorage("A")
		}, Facts{InGrace: map[string]bool{"A": true}}, []string{"AgentStorageFailed/A"}, 0},
		{"an agent that says hello without the fault closes its run folder problem", func(f *fixture) {
			f.workload("a", "A")
			f.connected("A")
			f.openStorage("A")
		}, Facts{Connected: map[string]bool{"A": true}}, nil, 0},
		{"an agent gone past its grace has no run folder problem, only AgentGone", func(f *fixture) {
			f.workload("a", "B")
			f.gone("B")
			f.openStorage("B")
		}, Facts{}, []string{"AgentGone/B"}, 0},
		{"a workload without an agent is no agent problem", func(f *fixture) {
			f.workload("a", "")
		}, Facts{}, nil, 0},
		{"three failures within the window are a problem", func(f *fixture) {
			in := f.workload("crash", "A")
			f.connected("A")
			crashLoop(f, in, 1*minute, 2*minute, 3*minute)
		}, Facts{NowMs: 3 * minute}, []string{"FailingRepeatedly/crash." + state.NewInstanceName("crash", "A", "image: crash").ID + ".A"}, 0},
		{"starting failures count as failures", func(f *fixture) {
			in := f.workload("nostart", "A")
			f.connected("A")
			for _, ms := range []int64{1 * minute, 2 * minute, 3 * minute} {
				f.transition(in, ms-1, state.PendingInitial)
				f.transition(in, ms, startingFailed)
			}
		}, Facts{NowMs: 3 * minute}, []string{"FailingRepeatedly/nostart." + state.NewInstanceName("nostart", "A", "image: nostart").ID + ".A"}, 0},
		{"two failures are not repeatedly", func(f *fixture) {
			in := f.workload("crash", "A")
			f.connected("A")
			crashLoop(f, in, 1*minute, 2*minute)
		}, Facts{NowMs: 3 * minute}, nil, 0},
		{"failures spread over more than the window are not repeatedly", func(f *fixture) {
			in := f.workload("crash", "A")
			f.connected("A")
			crashLoop(f, in, 1*minute, 12*minute, 23*minute)
		}, Facts{NowMs: 23 * minute}, nil, 0},
		{"a lost instance is no failure of the workload", func(f *fixture) {
			in := f.workload("x", "A")
			f.connected("A")
			for _, ms := range []int64{1 * minute, 2 * minute, 3 * minute} {
				f.transition(in, ms-1, state.RunningOk)
				f.transition(in, ms, lost)
			}
			// Not FailingRepeatedly; a WorkloadLost once it lasts StuckMs.
		}, Facts{NowMs: 3 * minute}, nil, 3*minute + StuckMs},
		{"a running instance after three failures is a problem that wakes the leader when the window ends", func(f *fixture) {
			in := f.workload("crash", "A")
			f.connected("A")
			crashLoop(f, in, 1*minute, 2*minute, 3*minute)
			f.transition(in, 3*minute+1, state.RunningOk)
		}, Facts{NowMs: 4 * minute}, []string{"FailingRepeatedly/crash." + state.NewInstanceName("crash", "A", "image: crash").ID + ".A"}, 13 * minute},
		{"an open failing problem stays while the instance stays failed", func(f *fixture) {
			in := f.workload("crash", "A")
			f.connected("A")
			crashLoop(f, in, 1*minute, 2*minute, 3*minute)
			f.open(FailingRepeatedly, "FailingRepeatedly/"+in.String())
		}, Facts{NowMs: 60 * minute}, []string{"FailingRepeatedly/crash." + state.NewInstanceName("crash", "A", "image: crash").ID + ".A"}, 0},
		{"an open failing problem closes after a window without failure", func(f *fixture) {
			in := f.workload("crash", "A")
			f.connected("A")
			crashLoop(f, in, 1*minute, 2*minute, 3*minute)
			f.transition(in, 3*minute+1, state.RunningOk)
			f.open(FailingRepeatedly, "FailingRepeatedly/"+in.String())
		}, Facts{NowMs: 13 * minute}, nil, 0},
		{"a deleted instance closes its failing problem", func(f *fixture) {
			in := f.workload("crash", "A")
			f.connected("A")
			crashLoop(f, in, 1*minute, 2*minute, 3*minute)
			f.st.States.Delete(in)
			f.open(FailingRepeatedly, "FailingRepeatedly/"+in.String())
		}, Facts{NowMs: 3 * minute}, nil, 0},
		{"the allocator's shortfalls are problems of their reason", func(f *fixture) {
			f.workload("db", "")
		}, Facts{Shortfalls: []Shortfall{
			{Workload: "db", Wanted: 3, Placed: 2, Reason: ShortSpread, Detail: "only 2 risk groups"},
			{Workload: "web", Wanted: 4, Placed: 1, Reason: ShortCapacity},
		}}, []string{"CapacityExceeded/web", "SpreadImpossible/db"}, 0},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			f := newFixture()
			tc.build(f)
			before := f.st.Clone()
			r := Detect(f.st, tc.facts)
			if got := keys(r); !slices.Equal(got, tc.want) {
				t.Fatalf("findings %q, want %q", got, tc.want)
			}
			if r.WakeAtMs != tc.wake {
				t.Fatalf("wake at %d, want %d", r.WakeAtMs, tc.wake)
			}
			var c Cache
			for range 2 {
				if got := keys(DetectCached(f.st, tc.facts, &c, 1)); !slices.Equal(got, tc.want) {
					t.Fatalf("with a cache: findings %q, want %q", got, tc.want)
				}
			}
			for _, fd := range r.Findings {
				if fd.Summary == "" || fd.Detail == "" || len(fd.Objects) == 0 || !strings.HasPrefix(fd.Key, string(fd.Kind)+"/") {
					t.Fatalf("finding %+v lacks a description, objects or a key of its kind", fd)
				}
			}
			if len(f.st.Problems.Open) != len(before.Problems.Open) || f.st.Problems.LastID != before.Problems.LastID {
				t.Fatal("Detect changed the store's problems")
			}
		})
	}
}

// An agent with many workloads names a bounded number of them, so that
// the entry that records its problem stays small.
func TestAgentProblemNamesBoundedWorkloads(t *testing.T) {
	f := newFixture()
	for i := range 300 {
		f.workload("w"+strconv.Itoa(1000+i), "typo")
	}
	r := Detect(f.st, Facts{})
	if len(r.Findings) != 1 {
		t.Fatalf("findings %q", keys(r))
	}
	fd := r.Findings[0]
	if len(fd.Objects) != maxObjects+1 || !strings.Contains(fd.Summary, "300 workload(s)") || !strings.Contains(fd.Summary, "w1004 and 295 more") ||
		len(fd.Detail) > 600 {
		t.Fatalf("finding %d objects, summary %q, detail %d bytes", len(fd.Objects), fd.Summary, len(fd.Detail))
	}
}

// TestDetectIsDeterministic: the same store and facts give the same
// findings, whatever map order says (every replica, every leader).
func TestDetectIsDeterministic(t *testing.T) {
	f := newFixture()
	for _, n := range []string{"a", "b", "c", "d", "e"} {
		f.workload(n, "agent-"+n, "missing-"+n)
	}
	first := Detect(f.st, Facts{})
	for range 20 {
		if got := Detect(f.st, Facts{}); !slices.EqualFunc(got.Findings, first.Findings, func(a, b Finding) bool {
			return a.Key == b.Key && a.Summary == b.Summary && a.Detail == b.Detail && slices.Equal(a.Objects, b.Objects)
		}) {
			t.Fatalf("findings differ between runs:\n%v\n%v", got.Findings, first.Findings)
		}
	}
}

// The cache follows the desired state: a change of it (a new sequence
// number, or another store after a restore: the epoch) refreshes it.
func TestDetectCacheFollowsDesiredState(t *testing.T) {
	f := newFixture()
	f.workload("app", "A", "db")
	f.connected("A")
	var c Cache
	if got := keys(DetectCached(f.st, Facts{}, &c, 1)); !slices.Equal(got, []string{"MissingDependency/app/db"}) {
		t.Fatalf("findings %q", got)
	}
	f.workload("db", "A")
	if got := keys(DetectCached(f.st, Facts{}, &c, 1)); len(got) != 1 {
		t.Fatalf("the cache refreshed without a new sequence number: %q", got)
	}
	if got := keys(DetectCached(f.st, Facts{}, &c, 2)); len(got) != 0 {
		t.Fatalf("a new epoch kept the cache: %q", got)
	}
	delete(f.st.Desired.Workloads, "db")
	f.st.DesiredSeq++
	if got := keys(DetectCached(f.st, Facts{}, &c, 2)); len(got) != 1 {
		t.Fatalf("a new sequence number kept the cache: %q", got)
	}
}

// TestDiff: what opens and what closes; an open problem keeps its id and
// descriptions, a recurrence is a finding to open again (a new id).
func TestDiff(t *testing.T) {
	var open state.Problems
	a, _ := open.OpenProblem(state.Problem{Kind: "K", Key: "K/a", Summary: "old words"})
	b, _ := open.OpenProblem(state.Problem{Kind: "K", Key: "K/b"})
	opened, closed := Diff(open, []Finding{{Key: "K/a", Summary: "new words"}, {Key: "K/c"}, {Key: "K/c"}})
	if len(opened) != 1 || opened[0].Key != "K/c" {
		t.Fatalf("opened %+v, want K/c once", opened)
	}
	if !slices.Equal(closed, []uint64{b.ID}) {
		t.Fatalf("closed %v, want [%d]", closed, b.ID)
	}
	if opened, closed := Diff(open, []Finding{{Key: "K/a"}, {Key: "K/b"}}); opened != nil || closed != nil {
		t.Fatalf("an unchanged set changes nothing: opened %v, closed %v", opened, closed)
	}
	open.CloseProblem(a.ID)
	again, isNew := open.OpenProblem(state.Problem{Kind: "K", Key: "K/a"})
	if !isNew || again.ID == a.ID || again.ID != 3 {
		t.Fatalf("a recurrence has id %d (new %v), want a new id 3 (was %d)", again.ID, isNew, a.ID)
	}
}

// BenchmarkDetect10k runs the detector over 10,000 workloads on 10
// connected agents, each depending on the one before, with a full
// history of 1,000 transitions: what one detection costs the leader
// after a commit.
func BenchmarkDetect10k(b *testing.B) {
	f := newFixture()
	prev := ""
	var ins []state.InstanceName
	for i := range 10_000 {
		name := "w" + strconv.Itoa(i)
		agent := "agent_" + strconv.Itoa(i%10)
		var deps []string
		if prev != "" {
			deps = []string{prev}
		}
		ins = append(ins, f.workload(name, agent, deps...))
		prev = name
	}
	for i := range 10 {
		f.connected("agent_" + strconv.Itoa(i))
	}
	for i := range 1_000 {
		f.transition(ins[i%len(ins)], int64(i), state.RunningOk)
	}
	b.Run("cold", func(b *testing.B) {
		for range b.N {
			if r := Detect(f.st, Facts{NowMs: 2_000}); len(r.Findings) != 0 {
				b.Fatalf("findings %v", keys(r))
			}
		}
	})
	// After a commit of state reports: the desired state is unchanged.
	b.Run("cached", func(b *testing.B) {
		var c Cache
		for range b.N {
			if r := DetectCached(f.st, Facts{NowMs: 2_000}, &c, 1); len(r.Findings) != 0 {
				b.Fatalf("findings %v", keys(r))
			}
		}
	})
}

// Requirement (issue 29 point 3): the StorageFailed problem names the
// replica as its object and the fault in its summary.
func TestStorageFailedNamesTheReplicaAndTheFault(t *testing.T) {
	const fault = "append log entries wal/1.wal: no space left on device"
	r := Detect(newFixture().st, Facts{StorageFailed: map[string]string{"n2": fault}})
	if len(r.Findings) != 1 {
		t.Fatalf("findings %q", keys(r))
	}
	fd := r.Findings[0]
	if fd.Kind != StorageFailed || len(fd.Objects) != 1 || fd.Objects[0] != (state.ProblemObject{Kind: ObjReplica, Name: "n2"}) ||
		fd.Summary != "Replica n2: storage failed: "+fault+"." || !strings.Contains(fd.Detail, fault) {
		t.Fatalf("finding %+v", fd)
	}
}

// Requirement (issue 29 point 3, agents): the AgentStorageFailed problem
// names the agent as its object and the fault in its summary and detail.
func TestAgentStorageFailedNamesTheAgentAndTheFault(t *testing.T) {
	const fault = "replace workload-uids.json: no space left on device"
	r := Detect(newFixture().st, Facts{AgentStorageFailed: map[string]string{"agent_A": fault}})
	if len(r.Findings) != 1 {
		t.Fatalf("findings %q", keys(r))
	}
	fd := r.Findings[0]
	if fd.Kind != AgentStorageFailed || len(fd.Objects) != 1 || fd.Objects[0] != (state.ProblemObject{Kind: ObjAgent, Name: "agent_A"}) ||
		fd.Summary != "Agent agent_A: run folder failed: "+fault+"." || !strings.Contains(fd.Detail, fault) {
		t.Fatalf("finding %+v", fd)
	}
}

// Requirement (issue 30 point 6, D5, D12): problem texts are whole
// sentences; a shortage of eligible agents is NoEligibleAgent, not
// CapacityExceeded, and does not call a Maintenance agent eligible;
// AgentGone says the workloads are not observed, not that they are not
// running.
func TestProblemTextsAreSentences(t *testing.T) {
	f := newFixture()
	f.workload("app", "B")
	f.gone("B")
	r := Detect(f.st, Facts{Shortfalls: []Shortfall{
		{Workload: "mon", Wanted: 3, Placed: 2, Reason: ShortEligible, Detail: "agent a1 is in Maintenance and takes no new instances"},
		{Workload: "web", Wanted: 3, Placed: 2, Reason: ShortCapacity, Detail: "the eligible agents are at their capacity (grapnel.io/capacity)"},
		{Workload: "db", Wanted: 2, Placed: 2, Reason: ShortSpread, Detail: "all instances are placed, but some share a risk group: no agent with room is left in another"},
	}})
	for _, fd := range r.Findings {
		for _, sent := range strings.SplitAfter(fd.Detail, ". ") {
			sent = strings.TrimSpace(sent)
			if sent == "" {
				continue
			}
			if c := sent[0]; !(c >= 'A' && c <= 'Z' || c == '`') {
				t.Errorf("%s: detail sentence %q does not start with a capital: %q", fd.Key, sent, fd.Detail)
			}
		}
		if !strings.HasSuffix(fd.Detail, ".") {
			t.Errorf("%s: detail does not end a sentence: %q", fd.Key, fd.Detail)
		}
		if strings.Contains(fd.Detail, "Active or Maintenance") {
			t.Errorf("%s: a Maintenance agent is called eligible: %q", fd.Key, fd.Detail)
		}
		switch fd.Key {
		case "NoEligibleAgent/mon":
			if fd.Kind != NoEligibleAgent {
				t.Errorf("a shortage of eligible agents is %s, want NoEligibleAgent", fd.Kind)
			}
		case "AgentGone/B":
			if !strings.Contains(fd.Summary, "not observed") || strings.Contains(fd.Summary, "not running") {
				t.Errorf("AgentGone summary %q: want \"not observed\", not \"not running\"", fd.Summary)
			}
		}
	}
	if got := keys(r); !slices.Equal(got, []string{"AgentGone/B", "CapacityExceeded/web", "NoEligibleAgent/mon", "SpreadImpossible/db"}) {
		t.Fatalf("findings %v", got)
	}
}

// Requirement (issue 31 point 4): the delete's problem names the
// dependents it waits for; the lost instance's says it is not running.
func TestStuckProblemsNameWhatTheyWaitFor(t *testing.T) {
	f := newFixture()
	db := f.workload("db", "A")
	f.workload("api", "A", "db")
	f.workload("web", "A", "db")
	for _, n := range []string{"api", "web"} {
		f.st.DeleteGraph.Insert(n, f.st.Desired.Workloads[n])
	}
	delete(f.st.Desired.Workloads, "db")
	delete(f.st.Rendered, "db")
	f.st.States.Set(db, state.ExecutionState{State: state.StateStopping, SubState: state.SubWaitingToStop, AdditionalInfo: "api: running, web: running"})
	r := Detect(f.st, Facts{NowMs: 60 * minute})
	var got *Finding
	for i := range r.Findings {
		if r.Findings[i].Kind == DeleteWaiting {
			got = &r.Findings[i]
		}
	}
	if got == nil {
		t.Fatalf("no DeleteWaiting in %v", keys(r))
	}
	if !strings.Contains(got.Summary, "api, web") || !strings.Contains(got.Detail, "api: running, web: running") {
		t.Fatalf("DeleteWaiting does not name the dependents: %q / %q", got.Summary, got.Detail)
	}
	objs := map[string]bool{}
	for _, o := range got.Objects {
		objs[o.Kind+"/"+o.Name] = true
	}
	if !objs["workload/api"] || !objs["workload/web"] || !objs["workload/db"] {
		t.Fatalf("objects %v", got.Objects)
	}
}

// Requirement (issue 30 point 6): every kind's summary and detail are
// whole sentences: a capital first, a full stop last.
func TestEveryKindSpeaksInSentences(t *testing.T) {
	f := newFixture()
	f.workload("app", "A", "db")
	f.connected("A")
	f.workload("x", "B")
	f.gone("B")
	f.workload("y", "typo")
	crash := f.workload("crash", "A")
	for _, ms := range []int64{1 * minute, 2 * minute, 3 * minute} {
		f.transition(crash, ms, execFailed)
	}
	cache := f.workload("cache", "A")
	f.transition(cache, 1*minute, lost)
	old := f.workload("old", "A")
	f.workload("dep", "A", "old")
	f.st.DeleteGraph.Insert("dep", f.st.Desired.Workloads["dep"])
	delete(f.st.Desired.Workloads, "old")
	delete(f.st.Rendered, "old")
	f.transition(old, 1*minute, state.ExecutionState{State: state.StateStopping, SubState: state.SubWaitingToStop, AdditionalInfo: "dep: running"})
	r := Detect(f.st, Facts{NowMs: 4 * minute,
		Shortfalls: []Shortfall{{Workload: "s1", Wanted: 3, Placed: 2, Reason: ShortCapacity}, {Workload: "s2", Wanted: 3, Placed: 2, Reason: ShortEligible},
			{Workload: "s3", Wanted: 2, Placed: 2, Reason: ShortSpread}},
		StorageFailed:      map[string]string{"n1": "write CurrentTerm: read-only file system"},
		VoteHeld:           map[string]string{"n2": "started with no Raft state"},
		AgentStorageFailed: map[string]string{"A": "no space left on device"},
		ReplicasDown:       map[string]string{"n3": "it does not answer the leader in time"},
		Quorum:             Quorum{Voters: 3, Reachable: 2},
	})
	seen := map[Kind]bool{}
	for _, fd := range r.Findings {
		seen[fd.Kind] = true
		for what, text := range map[string]string{"summary": fd.Summary, "detail": fd.Detail} {
			if text == "" || !(text[0] >= 'A' && text[0] <= 'Z') || !strings.HasSuffix(text, ".") {
				t.Errorf("%s: the %s is not a sentence: %q", fd.Key, what, text)
			}
		}
	}
	for _, k := range Kinds {
		if !seen[k] {
			t.Errorf("the fixture raises no %s", k)
		}
	}
}
