package fsm

import (
	"bytes"
	"fmt"
	"reflect"
	"strings"
	"testing"

	"github.com/hashicorp/raft"

	"github.com/grapnel-io/grapnel/state"
)

// historyGolden is one command of each form that carries history, as
// the golden entries in testdata hold them: the history fields are part
// of the log format like the rest.
func historyGolden() map[string]Command {
	u := webUpdate()
	u.Seq = 1
	u.History = &HistoryMeta{TimeMs: 1_700_000_000_123, Requester: "cli-conn-1", UpdateMask: []string{"desiredState.workloads.web"},
		Limits:     state.HistoryLimits{MaxEntries: 500, MaxAgeMs: 3600_000, MaxBytes: 65536},
		Rejections: []Rejection{{TimeMs: 1_700_000_000_100, Requester: "cli-conn-2", Reason: "bad name", Count: 3}}}
	return map[string]Command{
		"HistoryNotes": &HistoryNotesRequest{History: HistoryMeta{TimeMs: 1_700_000_000_200,
			Rejections: []Rejection{{TimeMs: 1_700_000_000_150, Requester: "agent_A", UpdateMask: []string{"desiredState"}, Reason: "no"}}}},
		"UpdateDesiredStatePacked-history": u,
		"AgentGone-history":                &AgentGoneRequest{Name: "agent_A", History: &HistoryMeta{TimeMs: 5}},
		"WorkloadReports-history": &WorkloadReportsRequest{History: &HistoryMeta{TimeMs: 6, Decision: "previous life"},
			Reports: []AgentReport{{Agent: "agent_A", States: []state.WorkloadState{{Instance: inst, State: state.AgentDisconnected}}}}},
	}
}

func TestHistoryGoldenEntries(t *testing.T) {
	for name, c := range historyGolden() {
		t.Run(name, func(t *testing.T) {
			buf := goldenEntry(t, "entry-"+name+".golden", mustEncode(t, c))
			typ, got, err := Decode(buf)
			if err != nil || typ != c.Type() {
				t.Fatalf("decodes as %s: %v", typ, err)
			}
			if !reflect.DeepEqual(got, c) {
				t.Fatalf("decodes to\n%+v\nwant\n%+v", got, c)
			}
		})
	}
	if err := CheckType([]byte{byte(HistoryNotesType)}); err != nil {
		t.Fatalf("CheckType refuses HistoryNotes: %v", err)
	}
}

func at(ms int64) *HistoryMeta { return &HistoryMeta{TimeMs: ms, Requester: "cli-conn-1"} }

// Requirement (issue 15, point 1): every accepted update is a
// transaction with its sequence number, index, leader time, requester,
// masks and result (workloads added, updated with fields, deleted, with
// instance names; configs); rejected requests and server decisions are
// recorded too, and reports add transitions.
func TestHistoryRecordsTransactions(t *testing.T) {
	web2 := &state.Workload{Agent: "agent_A", Runtime: "podman", RuntimeConfig: "image: nginx:2", RestartPolicy: state.RestartAlways,
		Dependencies: map[string]state.AddCondition{"db": state.AddCondRunning}, Tags: map[string]string{"a": "b"}}
	inst2 := state.NewInstanceName("web", "agent_A", web2.RuntimeConfig)
	tests := []struct {
		name string
		cmd  Command
		want []*state.Tx // the transactions the command appends
		tr   int         // transitions it appends
	}{
		{"add", func() Command {
			u := webUpdate()
			u.Seq = 1
			u.History = at(1000)
			u.History.UpdateMask = []string{"desiredState"}
			return u
		}(),
			[]*state.Tx{{Seq: 1, TimeMs: 1000, Kind: state.TxUpdate, Requester: "cli-conn-1", UpdateMask: []string{"desiredState"}, APIVersion: state.APIVersion,
				Workloads: []state.TxWorkload{{Name: "web", Op: state.OpAdded, Instance: inst.String(), Changes: state.WorkloadChanges(nil, webUpdate().Update.PutWorkloads["web"])}},
				Configs:   []state.TxConfig{{Key: "cfg", Op: state.OpAdded}}}}, 0},
		{"agent connects: no transaction", &AgentConnectedRequest{Name: "agent_A"}, nil, 0},
		{"report: a transition", &WorkloadReportsRequest{History: at(1500), Reports: []AgentReport{{Agent: "agent_A", Mark: state.ReportMark{Incarnation: 1, Generation: 1},
			States: []state.WorkloadState{{Instance: inst, State: state.RunningOk}}}}}, nil, 1},
		{"same state again: no transition", &WorkloadReportsRequest{History: at(1600), Reports: []AgentReport{{Agent: "agent_A", Mark: state.ReportMark{Incarnation: 1, Generation: 2},
			States: []state.WorkloadState{{Instance: inst, State: state.RunningOk}}}}}, nil, 0},
		{"stale report: no transition", &WorkloadReportsRequest{History: at(1650), Reports: []AgentReport{{Agent: "agent_A", Mark: state.ReportMark{Incarnation: 1, Generation: 1},
			States: []state.WorkloadState{{Instance: inst, State: state.SucceededOk}}}}}, nil, 0},
		{"drift repairs: one transaction each, by the agent", &WorkloadReportsRequest{History: at(1700), Reports: []AgentReport{{Agent: "agent_A", Mark: state.ReportMark{Incarnation: 1, Generation: 3},
			States: []state.WorkloadState{{Instance: inst, State: lostByDrift}, {Instance: other, State: otherLost}}}}},
			[]*state.Tx{
				{Seq: 2, TimeMs: 1700, Kind: state.TxRepair, Requester: "agent_A", Reason: lostByDrift.AdditionalInfo,
					Workloads: []state.TxWorkload{{Name: "web", Op: state.OpStates, Instance: inst.String(), States: []string{lostByDrift.String()}}}},
				{Seq: 3, TimeMs: 1700, Kind: state.TxRepair, Requester: "agent_A", Reason: otherLost.AdditionalInfo,
					Workloads: []state.TxWorkload{{Name: "db", Op: state.OpStates, Instance: other.String(), States: []string{otherLost.String()}}}}}, 2},
		{"update with a rejection riding along", &UpdateDesiredStateRequest{Seq: 2, History: &HistoryMeta{TimeMs: 2000, Requester: "cli-conn-1",
			Rejections: []Rejection{{TimeMs: 1900, Requester: "cli-conn-9", Reason: "workload name 'a.b' is invalid", Count: 4}}},
			Update: state.DesiredUpdate{PutWorkloads: map[string]*state.Workload{"web": web2}, PutRendered: map[string]state.Rendered{"web": {Instance: inst2, Workload: web2}},
				DeleteConfigs: []string{"cfg"}}},
			[]*state.Tx{
				{Seq: 4, TimeMs: 1900, Kind: state.TxRejected, Requester: "cli-conn-9", Reason: "workload name 'a.b' is invalid", Count: 4},
				{Seq: 5, TimeMs: 2000, Kind: state.TxUpdate, Requester: "cli-conn-1",
					Workloads: []state.TxWorkload{{Name: "web", Op: state.OpUpdated, Instance: inst2.String(), OldInstance: inst.String(),
						Changes: []state.FieldChange{{Field: "runtimeConfig", Old: "image: nginx", New: "image: nginx:2"}}}},
					Configs: []state.TxConfig{{Key: "cfg", Op: state.OpDeleted}}}}, 0},
		{"notes alone", &HistoryNotesRequest{History: HistoryMeta{TimeMs: 2500, Rejections: []Rejection{{TimeMs: 2400, Requester: "cli-conn-9", Reason: "x"}}}},
			[]*state.Tx{{Seq: 6, TimeMs: 2400, Kind: state.TxRejected, Requester: "cli-conn-9", Reason: "x"}}, 0},
		{"agent gone: a decision", &AgentGoneRequest{Name: "agent_A", History: at(3000)},
			[]*state.Tx{{Seq: 7, TimeMs: 3000, Kind: state.TxDecision, Requester: "server", Reason: "agent agent_A disconnected",
				Workloads: []state.TxWorkload{{Name: "db", Op: state.OpStates, Instance: other.String(), States: []string{"AgentDisconnected"}},
					{Name: "web", Op: state.OpStates, Instance: inst.String(), States: []string{"AgentDisconnected"}}}}}, 2},
		{"delete", &UpdateDesiredStateRequest{Seq: 3, History: at(4000), Update: state.DesiredUpdate{DeleteWorkloads: []string{"web"}, DeleteRendered: []string{"web"}}},
			[]*state.Tx{{Seq: 8, TimeMs: 4000, Kind: state.TxUpdate, Requester: "cli-conn-1",
				Workloads: []state.TxWorkload{{Name: "web", Op: state.OpDeleted, OldInstance: inst2.String()}}}}, 0},
	}
	f := New()
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			before := read(f).History
			buf := mustEncode(t, tc.cmd)
			index++
			if resp := f.Apply(&raft.Log{Index: index, Type: raft.LogCommand, Data: buf}); resp != nil {
				if err, ok := resp.(error); ok {
					t.Fatal(err)
				}
			}
			after := read(f).History
			got := after.Txs[len(before.Txs):]
			for _, tx := range tc.want {
				tx.Index = index
			}
			if len(got) != len(tc.want) || len(tc.want) > 0 && !reflect.DeepEqual(got, tc.want) {
				t.Fatalf("transactions\n%s\nwant\n%s", dump(got), dump(tc.want))
			}
			if n := len(after.Transitions) - len(before.Transitions); n != tc.tr {
				t.Fatalf("%d transitions, want %d", n, tc.tr)
			}
		})
	}
	h := read(f).History
	if tl := h.TransitionsOf("web"); len(tl) != 3 || tl[0].State != state.RunningOk || tl[0].TimeMs != 1500 || tl[1] != (state.Transition{Index: tl[1].Index, TimeMs: 1700, Instance: inst, State: lostByDrift}) || tl[2].State != state.AgentDisconnected {
		t.Fatalf("transitions of web: %+v", tl)
	}
	if got := h.Since(2, "web", 0); len(got) != 3 || got[0].Seq != 5 || got[2].Seq != 8 {
		t.Fatalf("since 2 for web: %s", dump(got))
	}
	if tx, ok := h.Get(6); !ok || tx.Reason != "x" {
		t.Fatalf("get 6: %+v %v", tx, ok)
	}
}

// lostByDrift is the state an agent's drift repair reports for an
// instance removed behind its back (agent/workload/resync.go).
var (
	lostByDrift = state.ExecutionState{State: state.StateFailed, SubState: state.SubLost,
		AdditionalInfo: state.DriftPrefix + "removed behind the agent's back; repair: restart (restartPolicy ALWAYS)"}
	// other is a second instance whose repair the same report carries.
	other     = state.NewInstanceName("db", "agent_A", "image: db")
	otherLost = state.ExecutionState{State: state.StateFailed, SubState: state.SubLost,
		AdditionalInfo: state.DriftPrefix + "removed behind the agent's back; repair: none (restartPolicy NEVER)"}
)

func dump(txs []*state.Tx) string {
	var b strings.Builder
	for _, tx := range txs {
		fmt.Fprintf(&b, "%+v\n", *tx)
	}
	return b.String()
}

// Requirement (issue 15, point 1): the history is bounded by count, by
// age and by bytes, with limits carried in the entries, the same on
// every replica.
func TestHistoryBounds(t *testing.T) {
	reject := func(ms int64, lim state.HistoryLimits, reason string) Command {
		return &HistoryNotesRequest{History: HistoryMeta{TimeMs: ms, Limits: lim, Rejections: []Rejection{{TimeMs: ms, Requester: "c", Reason: reason}}}}
	}
	tests := []struct {
		name    string
		lim     state.HistoryLimits
		n       int
		step    int64 // ms between records
		reason  int   // bytes of each reason
		wantMax int
		wantMin int
	}{
		{"count", state.HistoryLimits{MaxEntries: 10}, 50, 1, 10, 10, 10},
		{"age", state.HistoryLimits{MaxAgeMs: 1000}, 50, 100, 10, 11, 10},
		{"bytes", state.HistoryLimits{MaxBytes: 4096}, 200, 1, 100, 4096 / 100, 4096 / (100 + 64 + 20)},
		{"defaults", state.HistoryLimits{}, state.DefaultHistoryMaxEntries + 10, 1, 1, state.DefaultHistoryMaxEntries, state.DefaultHistoryMaxEntries},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			f, g := New(), New()
			for i := range tc.n {
				buf := mustEncode(t, reject(int64(i)*tc.step, tc.lim, strings.Repeat("r", tc.reason)))
				for _, r := range []*FSM{f, g} {
					r.Apply(&raft.Log{Index: uint64(i + 1), Type: raft.LogCommand, Data: buf})
				}
			}
			h := read(f).History
			if n := len(h.Txs); n > tc.wantMax || n < tc.wantMin {
				t.Fatalf("%d transactions kept, want %d..%d", n, tc.wantMin, tc.wantMax)
			}
			if last := h.Txs[len(h.Txs)-1]; last.Seq != uint64(tc.n) || h.LastSeq != uint64(tc.n) {
				t.Fatalf("newest kept is %d, last seq %d, want %d", last.Seq, h.LastSeq, tc.n)
			}
			if lim := tc.lim.Effective(); h.Bytes() > lim.MaxBytes {
				t.Fatalf("%d bytes over the budget %d", h.Bytes(), lim.MaxBytes)
			}
			if !reflect.DeepEqual(h, read(g).History) {
				t.Fatal("two replicas applying the same entries hold different histories")
			}
		})
	}
}

// The byte budget bounds what the history adds to a snapshot: the
// estimate is never below the bytes its records take there.
func TestHistorySnapshotBytesWithinEstimate(t *testing.T) {
	f := New()
	apply(t, f, &UpdateDesiredStateRequest{History: at(1), Update: richUpdate(1).Update})
	apply(t, f, &AgentConnectedRequest{Name: "agent_A"})
	applyResp(t, f, &WorkloadReportsRequest{History: at(2), Reports: []AgentReport{{Agent: "agent_A", States: []state.WorkloadState{
		{Instance: inst, State: state.ExecutionState{State: state.StateFailed, SubState: state.SubExecFailed, AdditionalInfo: `exit "1" <x>`}}}}}})
	apply(t, f, &HistoryNotesRequest{History: HistoryMeta{TimeMs: 3, Rejections: []Rejection{{TimeMs: 3, Requester: "cli-conn-1",
		UpdateMask: []string{"desiredState.workloads.x"}, Reason: "invalid \"name\"\n", Count: 2}}}})
	apply(t, f, &AgentGoneRequest{Name: "agent_A", History: at(4)})
	st := read(f)
	var with, without bytes.Buffer
	if err := WriteSnapshot(&with, st, 1); err != nil {
		t.Fatal(err)
	}
	h := st.History
	st.History = nil
	if err := WriteSnapshot(&without, st, 1); err != nil {
		t.Fatal(err)
	}
	added := uint64(with.Len() - without.Len())
	if added > h.Bytes() {
		t.Fatalf("the history adds %d bytes to the snapshot, its estimate is %d", added, h.Bytes())
	}
	t.Logf("%d transactions, %d transitions: %d snapshot bytes, estimated %d", len(h.Txs), len(h.Transitions), added, h.Bytes())
	g := New()
	if err := g.Restore(nopCloser{bytes.NewReader(with.Bytes())}); err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(read(g).History, h) {
		t.Fatal("the restored history differs")
	}
}

// The speculative store keeps no history and executes commands all the
// same.
func TestExecuteWithoutHistory(t *testing.T) {
	st := state.NewStore().CloneWithoutHistory()
	u := webUpdate()
	u.Seq = 1
	if resp := Execute(st, u, 1); resp != nil {
		t.Fatal(resp)
	}
	if st.History != nil || st.Desired.Workloads["web"] == nil {
		t.Fatalf("history %v, workloads %v", st.History, st.Desired.Workloads)
	}
}

// Requirement (issue 15, point 1): instances the server removes itself
// within an update (never started, no agent to remove them) are a
// decision the transaction names, and a Removed transition.
func TestHistoryServerRemovals(t *testing.T) {
	f := New()
	u := webUpdate()
	u.Seq, u.History = 1, at(10)
	apply(t, f, u)
	apply(t, f, &UpdateDesiredStateRequest{Seq: 2, History: at(20), Update: state.DesiredUpdate{
		DeleteWorkloads: []string{"web"}, DeleteRendered: []string{"web"}, DeleteStates: []state.InstanceName{inst}}})
	h := read(f).History
	tx := h.Txs[len(h.Txs)-1]
	want := []state.TxWorkload{{Name: "web", Op: state.OpDeleted, OldInstance: inst.String(), States: []string{"Removed (by the server: no agent would remove it)"}}}
	if !reflect.DeepEqual(tx.Workloads, want) {
		t.Fatalf("workloads %+v, want %+v", tx.Workloads, want)
	}
	if tl := h.TransitionsOf("web"); len(tl) != 1 || tl[0].State != state.Removed || tl[0].TimeMs != 20 {
		t.Fatalf("transitions %+v", tl)
	}
}

// Updates that share one Raft entry (a group-commit batch) are distinct
// transactions: consecutive sequence numbers, the same index.
func TestHistoryBatchSharesTheIndex(t *testing.T) {
	f := New()
	a, b := webUpdate(), richUpdate(2)
	a.Seq, a.History, b.History = 1, at(1), at(1)
	buf := batchOf(t, mustEncode(t, a), mustEncode(t, b))
	if resp := f.Apply(&raft.Log{Index: 42, Type: raft.LogCommand, Data: buf}); resp == nil {
		t.Fatal("no batch response")
	}
	txs := read(f).History.Txs
	if len(txs) != 2 || txs[0].Seq != 1 || txs[1].Seq != 2 || txs[0].Index != 42 || txs[1].Index != 42 {
		t.Fatalf("transactions of one batch: %s", dump(txs))
	}
}
