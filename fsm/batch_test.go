package fsm

import (
	"errors"
	"fmt"
	"reflect"
	"testing"

	"github.com/hashicorp/raft"

	"github.com/grapnel-io/grapnel/state"
)

func mustEncode(t testing.TB, c Command) []byte {
	t.Helper()
	buf, err := Encode(c)
	if err != nil {
		t.Fatal(err)
	}
	return buf
}

// A batch applies its commands in order at its index, answers each as it
// would have been answered alone, and ends in the same store as the
// commands applied one by one; a refused command leaves the others be.
func TestFSM_Batch(t *testing.T) {
	up := webUpdate()
	up.Seq = 1
	stale := webUpdate()
	stale.Seq = 7 // out of sequence: refused
	cmds := [][]byte{
		mustEncode(t, &AgentConnectedRequest{Name: "agent_A", Tags: map[string]string{"x": "y"}}),
		mustEncode(t, up),
		mustEncode(t, stale),
		mustEncode(t, &AgentGoneRequest{Name: "agent_A"}),
	}
	batch, err := EncodeBatch(cmds)
	if err != nil {
		t.Fatal(err)
	}
	var observed []MessageType
	f := New()
	f.SetObserver(func(typ MessageType, idx uint64) {
		if idx != 42 {
			t.Errorf("%s observed at %d, want the batch's index 42", typ, idx)
		}
		observed = append(observed, typ)
	})
	resp, ok := f.Apply(&raft.Log{Index: 42, Type: raft.LogCommand, Data: batch}).(BatchResponse)
	if !ok || len(resp) != len(cmds) {
		t.Fatalf("response %#v, want a BatchResponse of %d", resp, len(cmds))
	}
	if resp[0] != nil || resp[1] != nil {
		t.Fatalf("responses %v", resp)
	}
	if err, ok := resp[2].(error); !ok || !errors.Is(err, ErrOutOfSequence) {
		t.Fatalf("the out-of-sequence update answered %v", resp[2])
	}
	if _, ok := resp[3].(*AgentGoneResponse); !ok {
		t.Fatalf("AgentGone answered %T", resp[3])
	}
	if !reflect.DeepEqual(observed, []MessageType{AgentConnectedType, UpdateDesiredStatePackedType, UpdateDesiredStatePackedType, AgentGoneType}) {
		t.Fatalf("observed %v", observed)
	}

	one := New()
	for _, c := range cmds {
		one.Apply(&raft.Log{Index: 42, Type: raft.LogCommand, Data: c})
	}
	got, want := read(f), read(one)
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("batch store\n%+v\none by one\n%+v", got, want)
	}
	if got.Revision != 42 || got.DesiredSeq != 1 || got.Desired.Workloads["web"] == nil {
		t.Fatalf("store %+v", got)
	}
	if s, _ := got.States.Get(inst); s != state.AgentDisconnected {
		t.Fatalf("state of %v: %v", inst, s)
	}
	if f.AppliedIndex() != 42 {
		t.Fatalf("applied %d", f.AppliedIndex())
	}
}

func TestEncodeBatchRefusesNestingAndEmpty(t *testing.T) {
	inner, err := EncodeBatch([][]byte{mustEncode(t, &AgentGoneRequest{Name: "a"})})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := EncodeBatch([][]byte{inner}); !errors.Is(err, ErrBadCommand) {
		t.Fatalf("nested batch: %v", err)
	}
	if _, err := EncodeBatch([][]byte{{}}); !errors.Is(err, ErrBadCommand) {
		t.Fatalf("empty command: %v", err)
	}
}

// A committed batch that does not decode halts the FSM rather than apply
// part of it.
func TestFSM_MalformedBatchStops(t *testing.T) {
	for name, data := range map[string][]byte{
		"length past the end": {byte(BatchType), 10, byte(AgentGoneType)},
		"zero length":         {byte(BatchType), 0},
		"nested":              {byte(BatchType), 2, byte(BatchType), 0},
	} {
		t.Run(name, func(t *testing.T) { requireHalts(t, New(), data) })
	}
}

func FuzzSplitBatch(f *testing.F) {
	good, _ := EncodeBatch([][]byte{{byte(AgentGoneType), '{', '}'}, {byte(AgentLoadType), 1, 2, 3}})
	f.Add(good[1:])
	f.Add([]byte{0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x01})
	f.Fuzz(func(t *testing.T, body []byte) {
		cmds, err := splitBatch(body)
		if err != nil {
			return
		}
		again, err := EncodeBatch(cmds)
		if err != nil {
			t.Fatalf("split %d commands that do not encode again: %v", len(cmds), err)
		}
		if string(again[1:]) != string(body) {
			t.Fatalf("split and encode again changed the body")
		}
	})
}

// BenchmarkApplyBatch applies batches of 8 workload updates to a store
// holding 500 workloads: as one Batch entry (one copy of the desired state
// per batch) and as 8 entries (one copy each).
func BenchmarkApplyBatch(b *testing.B) {
	const workloads, perBatch = 500, 8
	update := func(i int) []byte {
		// Sequenced from 1: the fill applies 0..499, a batch 500..507.
		name := fmt.Sprintf("w%03d", i%workloads)
		w := &state.Workload{Agent: "agent_A", Runtime: "podman", RuntimeConfig: fmt.Sprintf("image: x\nseq: %d\n", i)}
		in := state.NewInstanceName(name, "agent_A", w.RuntimeConfig)
		r := &UpdateDesiredStateRequest{Seq: uint64(i + 1), Update: state.DesiredUpdate{
			PutWorkloads: map[string]*state.Workload{name: w},
			PutRendered:  map[string]state.Rendered{name: {Instance: in, Workload: w}},
		}}
		buf, err := Encode(r)
		if err != nil {
			b.Fatal(err)
		}
		return buf
	}
	fill := func() *FSM {
		f := New()
		for i := range workloads {
			f.Apply(&raft.Log{Index: uint64(i + 1), Type: raft.LogCommand, Data: update(i)})
		}
		return f
	}
	cmds := make([][]byte, perBatch)
	for i := range cmds {
		cmds[i] = update(workloads + i)
	}
	batch, err := EncodeBatch(cmds)
	if err != nil {
		b.Fatal(err)
	}
	// Each round applies the same updates again: the sequence is set
	// back, so that they apply instead of being refused.
	rewind := func(f *FSM) {
		f.mu.Lock()
		f.store.DesiredSeq = workloads
		f.mu.Unlock()
	}
	b.Run("one-entry", func(b *testing.B) {
		f := fill()
		for i := 0; b.Loop(); i++ {
			rewind(f)
			if _, ok := f.Apply(&raft.Log{Index: uint64(workloads + 1 + i), Type: raft.LogCommand, Data: batch}).(BatchResponse)[0].(error); ok {
				b.Fatal("refused")
			}
		}
	})
	b.Run("entry-each", func(b *testing.B) {
		f := fill()
		for i := 0; b.Loop(); i++ {
			rewind(f)
			for _, c := range cmds {
				if resp := f.Apply(&raft.Log{Index: uint64(workloads + 1 + i), Type: raft.LogCommand, Data: c}); resp != nil {
					b.Fatal(resp)
				}
			}
		}
	})
}

// Raft hands the entries it committed together to ApplyBatch (the FSM is
// a raft.BatchingFSM): each applies at its own index and is answered as
// Apply answers it alone, with a Batch entry among them, and the store
// ends as after Apply one by one. An entry that halts the FSM answers the
// rest with the halt and applies none of them.
func TestFSM_ApplyBatchEqualsApply(t *testing.T) {
	up := webUpdate()
	up.Seq = 1
	up2 := webUpdate()
	up2.Seq = 2
	up2.Update.PutWorkloads["web"].RuntimeConfig = "image: nginx:2"
	stale := webUpdate()
	stale.Seq = 9 // out of sequence: refused
	inner, err := EncodeBatch([][]byte{mustEncode(t, &AgentConnectedRequest{Name: "agent_B"}), mustEncode(t, up2)})
	if err != nil {
		t.Fatal(err)
	}
	datas := [][]byte{
		mustEncode(t, &AgentConnectedRequest{Name: "agent_A"}),
		mustEncode(t, up),
		inner,
		mustEncode(t, stale),
		mustEncode(t, &AgentGoneRequest{Name: "agent_A"}),
	}
	logs := make([]*raft.Log, 0, len(datas)+1)
	for i, d := range datas {
		logs = append(logs, &raft.Log{Index: uint64(10 + i), Type: raft.LogCommand, Data: d})
	}
	// Raft hands configuration entries to a BatchingFSM too.
	logs = append(logs, &raft.Log{Index: 15, Type: raft.LogConfiguration, Data: []byte{1, 2}})

	batched, one := New(), New()
	got := batched.ApplyBatch(logs)
	want := make([]any, len(logs))
	for i, l := range logs {
		want[i] = one.Apply(l)
	}
	if len(got) != len(want) {
		t.Fatalf("%d answers for %d entries", len(got), len(logs))
	}
	for i := range want {
		if fmt.Sprint(got[i]) != fmt.Sprint(want[i]) {
			t.Errorf("entry %d answered %v by ApplyBatch, %v by Apply", logs[i].Index, got[i], want[i])
		}
	}
	if err, ok := got[3].(error); !ok || !errors.Is(err, ErrOutOfSequence) {
		t.Fatalf("the stale update answered %v", got[3])
	}
	if !reflect.DeepEqual(read(batched), read(one)) {
		t.Fatalf("ApplyBatch store\n%+v\nApply one by one\n%+v", read(batched), read(one))
	}
	if s := read(batched); s.Revision != 12 || s.Desired.Workloads["web"].RuntimeConfig != "image: nginx:2" {
		t.Fatalf("store at revision %d with web %+v, want revision 12 and the second update", s.Revision, s.Desired.Workloads["web"])
	}
	if batched.AppliedIndex() != 14 {
		t.Fatalf("applied %d, want 14", batched.AppliedIndex())
	}

	// A halt in the middle.
	f := New()
	f.ApplyBatch(logs[:2])
	before := read(f)
	resps := f.ApplyBatch([]*raft.Log{
		{Index: 20, Type: raft.LogCommand, Data: []byte{byte(BatchType), 10, byte(AgentGoneType)}},
		{Index: 21, Type: raft.LogCommand, Data: mustEncode(t, &AgentGoneRequest{Name: "agent_A"})},
	})
	for i, r := range resps {
		if h, ok := r.(*HaltError); !ok || h.Index != 20 {
			t.Fatalf("answer %d: %v, want the halt at 20", i, r)
		}
	}
	if !reflect.DeepEqual(read(f), before) || f.AppliedIndex() != 11 {
		t.Fatalf("a halted batch changed the store (applied %d)", f.AppliedIndex())
	}
}

// The FSM is a raft.BatchingFSM, so Raft applies committed runs at once.
var _ raft.BatchingFSM = (*FSM)(nil)
