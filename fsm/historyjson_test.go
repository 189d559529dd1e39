package fsm

import (
	"encoding/json"
	"math"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"github.com/grapnel-io/grapnel/state"
)

// oddStrings are values whose JSON form uses every escape json.Marshal
// writes, and bytes it replaces.
var oddStrings = []string{
	"", "plain", "quote \" backslash \\ slash /", "tab\tnew\nline\rreturn\bback\fform",
	"\x00\x01\x1f control", "<html> & </html>", "line\u2028sep\u2029para", "ünïcödé ✓ 😀",
	"bad utf8 \xff\xfe end", strings.Repeat("image: bench\npad: xxxx\n", 40),
}

// historyRecords are Tx and Transition values with every field set, the
// odd strings in every string field.
func historyRecords() ([]state.Tx, []state.Transition) {
	var txs []state.Tx
	var trs []state.Transition
	for i, s := range oddStrings {
		txs = append(txs, state.Tx{
			Seq: uint64(i) + 1, Index: math.MaxUint64 - uint64(i), TimeMs: int64(i) - 3, Kind: state.TxKind(s),
			Requester: s, UpdateMask: []string{s, "desiredState.workloads.w1"}, Reason: s, Count: uint32(i),
			Workloads: []state.TxWorkload{{Name: s, Op: state.TxOp(s), Instance: s, OldInstance: s,
				Changes: []state.FieldChange{{Field: s, Old: s, New: s}, {Field: "runtime"}}, States: []string{s}},
				{Name: "w2", Op: state.OpDeleted}},
			Configs:    []state.TxConfig{{Key: s, Op: state.TxOp(s)}},
			APIVersion: s,
		})
		trs = append(trs, state.Transition{Index: uint64(i), TimeMs: math.MinInt64 + int64(i),
			Instance: state.InstanceName{WorkloadName: s, AgentName: s, ID: s},
			State:    state.ExecutionState{State: state.ExecState(s), SubState: s, AdditionalInfo: s}})
	}
	txs = append(txs, state.Tx{Seq: 1, Kind: state.TxUpdate}, state.Tx{TimeMs: math.MaxInt64})
	trs = append(trs, state.Transition{}, state.Transition{TimeMs: math.MaxInt64})
	return txs, trs
}

// sameAsStandard checks one body the fast reader took: json.Unmarshal
// takes it too, to the same value.
func sameAsStandard[T any](t *testing.T, body []byte, got *T) {
	t.Helper()
	var want T
	if err := json.Unmarshal(body, &want); err != nil {
		t.Fatalf("the fast reader took %q, json.Unmarshal refuses it: %v", body, err)
	}
	if !reflect.DeepEqual(*got, want) {
		t.Fatalf("%q:\nfast     %#v\nstandard %#v", body, *got, want)
	}
}

// takesMarshalled: whatever json.Marshal writes for each value, decode
// reads, to what json.Unmarshal makes of it.
func takesMarshalled[T any](t *testing.T, values []T, decode func([]byte) (*T, bool)) {
	t.Helper()
	for i := range values {
		body, err := json.Marshal(&values[i])
		if err != nil {
			t.Fatal(err)
		}
		got, ok := decode(body)
		if !ok {
			t.Fatalf("the fast reader gave up on %s", body)
		}
		sameAsStandard(t, body, got)
	}
}

// TestHistoryRecordsTakeTheFastPath: a record the fast reader gave up on
// would decode right but slowly.
func TestHistoryRecordsTakeTheFastPath(t *testing.T) {
	txs, trs := historyRecords()
	takesMarshalled(t, txs, decodeTx)
	takesMarshalled(t, trs, decodeTransition)
}

// TestGoldenHistoryRecordsTakeTheFastPath: the golden snapshot sets every
// field of every record (TestSnapshotGoldenBodies), so a field added to
// state.Tx or state.Transition, and to the golden, fails here until the
// fast reader reads it too: otherwise every start would decode the
// history the slow way, correctly and unnoticed.
func TestGoldenHistoryRecordsTakeTheFastPath(t *testing.T) {
	golden, err := os.ReadFile(filepath.Join("testdata", allRecordsGolden))
	if err != nil {
		t.Fatal(err)
	}
	seen := 0
	for _, rec := range goldenRecords(t, golden) {
		var ok bool
		switch rec.t {
		case SnapTx:
			_, ok = decodeTx([]byte(rec.body))
		case SnapTransition:
			_, ok = decodeTransition([]byte(rec.body))
		default:
			continue
		}
		seen++
		if !ok {
			t.Errorf("the fast reader gives up on the golden's %s record %s: teach decodeTx or decodeTransition its new key", rec.t, rec.body)
		}
	}
	if seen == 0 {
		t.Fatalf("%s has no history records", allRecordsGolden)
	}
}

// TestHistoryRecordsGiveUp: forms json.Marshal does not write are left
// to json.Unmarshal, which decodes or refuses them as it always did.
func TestHistoryRecordsGiveUp(t *testing.T) {
	for _, body := range []string{
		` {"s":1}`, `{"s":1} `, `{"s": 1}`, `{"s":null}`, `{"S":1}`, `{"s":1,"s":2}`, `{"s":01}`,
		`{"s":1.0}`, `{"s":1e3}`, `{"s":-1}`, `{"s":18446744073709551616}`, `{"n":4294967296}`,
		`{"t":9223372036854775808}`, `{"t":-9223372036854775809}`, `{"k":"\ud83d\ude00"}`, `{"k":"\x"}`,
		`{"k":"a` + "\x01" + `"}`, `{"k":"` + "\xff" + `"}`, `{"k":"\u00"}`, `{"unknown":1}`, `{"w":[{"x":1}]}`,
		`{"m":["a",]}`, `{"m":["a"]`, `{"k":"a"`, `{"k":"a`, ``, `[]`, `{"w":[{"f":[{"f":"a","f":"b"}]}]}`,
	} {
		if _, ok := decodeTx([]byte(body)); ok {
			t.Errorf("the fast reader took the Tx %q", body)
		}
	}
	for _, body := range []string{`{"Instance":{"workloadname":"a"}}`, `{"State":null}`, `{"i":1,"Instance":{},"x":2}`} {
		if _, ok := decodeTransition([]byte(body)); ok {
			t.Errorf("the fast reader took the Transition %q", body)
		}
	}
	// Given up on, json.Unmarshal reads them: a restore is what it was.
	st := state.NewStore()
	if err := restoreHistoryRecord(st, SnapTx, []byte(`{"s": 7, "k": "Update"}`)); err != nil {
		t.Fatal(err)
	}
	if err := restoreHistoryRecord(st, SnapTransition, []byte(`{"i": 3}`)); err != nil {
		t.Fatal(err)
	}
	if len(st.History.Txs) != 1 || st.History.Txs[0].Seq != 7 || st.History.LastSeq != 7 ||
		len(st.History.Transitions) != 1 || st.History.Transitions[0].Index != 3 {
		t.Fatalf("history after the slow path: %+v", st.History)
	}
	if err := restoreHistoryRecord(st, SnapTx, []byte(`{"s":"seven"}`)); err == nil {
		t.Fatal("a Tx json.Unmarshal refuses restored")
	}
}

// FuzzHistoryRecords: when the fast reader takes a record, json.Unmarshal
// takes it too, to the same value.
func FuzzHistoryRecords(f *testing.F) {
	txs, trs := historyRecords()
	for i := range txs {
		b, _ := json.Marshal(&txs[i])
		f.Add(b)
	}
	for i := range trs {
		b, _ := json.Marshal(&trs[i])
		f.Add(b)
	}
	f.Add([]byte(`{"w":[],"m":[],"c":[],"t":-0}`))
	f.Fuzz(func(t *testing.T, body []byte) {
		if got, ok := decodeTx(body); ok {
			sameAsStandard(t, body, got)
		}
		if got, ok := decodeTransition(body); ok {
			sameAsStandard(t, body, got)
		}
	})
}
