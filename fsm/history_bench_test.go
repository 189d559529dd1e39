package fsm

import (
	"bytes"
	"fmt"
	"io"
	"testing"

	"github.com/hashicorp/raft"

	"github.com/grapnel-io/grapnel/state"
)

// benchHistoryUpdate is an update of one workload, as the leader writes
// it, with the history part the leader adds (time, a CLI connection
// name, the update mask) when meta is set.
func benchHistoryUpdate(seq uint64, meta bool) *UpdateDesiredStateRequest {
	w := &state.Workload{Agent: "agent_A", Runtime: "podman", RuntimeConfig: fmt.Sprintf("image: busybox\nargs: [%d]", seq)}
	in := state.NewInstanceName("w1", "agent_A", w.RuntimeConfig)
	u := &UpdateDesiredStateRequest{Seq: seq, Update: state.DesiredUpdate{
		PutWorkloads: map[string]*state.Workload{"w1": w},
		PutRendered:  map[string]state.Rendered{"w1": {Instance: in, Workload: w}},
		SetStates:    []state.WorkloadState{{Instance: in, State: state.PendingInitial}},
	}}
	if meta {
		u.History = &HistoryMeta{TimeMs: 1_795_700_000_000 + int64(seq), Requester: "cli-conn-55b3afab0706f35e4173725aef27ca54",
			UpdateMask: []string{"desiredState.workloads.w1"}}
	}
	return u
}

// BenchmarkApplyUpdateHistory applies a run of one-workload updates to an
// FSM that keeps the history and to one that keeps none: the apply cost
// of computing and appending the transaction (and pruning, once the
// history is full). It reports the bytes the history adds to each
// entry, and the snapshot bytes one kept transaction costs.
func BenchmarkApplyUpdateHistory(b *testing.B) {
	const n = 2000 // past the default count bound, so pruning runs too
	bufs := make([][]byte, n)
	var plain, with int
	for i := range bufs {
		bufs[i] = mustEncode(b, benchHistoryUpdate(uint64(i+1), true))
		with += len(bufs[i])
		plain += len(mustEncode(b, benchHistoryUpdate(uint64(i+1), false)))
	}
	for _, kept := range []bool{true, false} {
		b.Run(fmt.Sprintf("history=%v", kept), func(b *testing.B) {
			b.ReportAllocs()
			var f *FSM
			for b.Loop() {
				if kept {
					f = New()
				} else {
					f = NewWithoutHistory()
				}
				for i, buf := range bufs {
					if resp := f.Apply(&raft.Log{Index: uint64(i + 1), Type: raft.LogCommand, Data: buf}); resp != nil {
						b.Fatal(resp)
					}
				}
			}
			b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*n), "ns/update")
			if kept {
				b.ReportMetric(float64(with-plain)/n, "history-B/entry")
				b.ReportMetric(float64(plain)/n, "entry-B")
				var snap, bare bytes.Buffer
				st := read(f)
				h := st.History
				if err := WriteSnapshot(&snap, st, 1); err != nil {
					b.Fatal(err)
				}
				st.History = nil
				if err := WriteSnapshot(&bare, st, 1); err != nil {
					b.Fatal(err)
				}
				b.ReportMetric(float64(snap.Len()-bare.Len())/float64(len(h.Txs)), "snapshot-B/tx")
				b.ReportMetric(float64(len(h.Txs)), "txs-kept")
			}
		})
	}
}

// BenchmarkEncodeUpdateHistory is the leader's cost of the history part
// of an update entry: encoding it with and without the HistoryMeta.
func BenchmarkEncodeUpdateHistory(b *testing.B) {
	for _, meta := range []bool{true, false} {
		c := benchHistoryUpdate(7, meta)
		b.Run(fmt.Sprintf("meta=%v", meta), func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				if _, err := Encode(c); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// BenchmarkExecuteReportOfNewInstances executes one report of n states
// of instances the store has no state for (an agent's first report, or
// one flushed as it goes): the cost grows with n, not its square.
func BenchmarkExecuteReportOfNewInstances(b *testing.B) {
	for _, n := range []int{1024, 16384} {
		b.Run(fmt.Sprint(n), func(b *testing.B) {
			ws := make([]state.WorkloadState, n)
			for i := range ws {
				ws[i] = state.WorkloadState{Instance: state.NewInstanceName(fmt.Sprintf("wl_%05d", i), "agent_A", "x"), State: state.RunningOk}
			}
			body := &WorkloadReportsRequest{Reports: []AgentReport{{Agent: "agent_A", States: ws}}}
			for b.Loop() {
				st := state.NewStore()
				st.AgentConnected("agent_A", nil)
				if r, ok := Execute(st, body, 2).(*WorkloadReportsResponse); !ok || len(r.New) != n {
					b.Fatalf("response %v", r)
				}
			}
		})
	}
}

// BenchmarkRestoreHistory is a start's cost of restoring a snapshot whose
// history is full: what a replica pays before its first answer once its
// snapshot holds the history's byte bound (the default 256 KiB).
func BenchmarkRestoreHistory(b *testing.B) {
	const n = 2000
	f := New()
	for i := range n {
		buf := mustEncode(b, benchHistoryUpdate(uint64(i+1), true))
		if resp := f.Apply(&raft.Log{Index: uint64(i + 1), Type: raft.LogCommand, Data: buf}); resp != nil {
			b.Fatal(resp)
		}
	}
	var snap bytes.Buffer
	if err := WriteSnapshot(&snap, read(f), n); err != nil {
		b.Fatal(err)
	}
	b.ReportAllocs()
	b.SetBytes(int64(snap.Len()))
	for b.Loop() {
		if err := New().Restore(io.NopCloser(bytes.NewReader(snap.Bytes()))); err != nil {
			b.Fatal(err)
		}
	}
}
