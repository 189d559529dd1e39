package fsm

import (
	"bytes"
	"errors"
	"reflect"
	"strings"
	"testing"

	"github.com/hashicorp/raft"
	"google.golang.org/protobuf/proto"

	"github.com/grapnel-io/grapnel/fsm/fsmpb"
)

// requireHalts applies data at the next index of f and checks that the
// FSM halted there instead of panicking: the answer is the HaltError,
// the store is unchanged, and a valid entry after it is not applied.
func requireHalts(t *testing.T, f *FSM, data []byte) *HaltError {
	t.Helper()
	before := read(f)
	applied := f.AppliedIndex()
	var seen *HaltError
	f.SetHaltObserver(func(h *HaltError) { seen = h })
	resp := f.Apply(&raft.Log{Index: applied + 1, Type: raft.LogCommand, Data: data})
	h, ok := resp.(*HaltError)
	if !ok || !errors.Is(h, ErrHalted) || h.Index != applied+1 {
		t.Fatalf("answer %#v, want a HaltError at %d", resp, applied+1)
	}
	if seen != h || f.Halted() != h {
		t.Fatal("the halt observer or Halted did not report the halt")
	}
	if !strings.Contains(h.Error(), "upgrade this replica") {
		t.Fatalf("message %q does not say what to do", h.Error())
	}
	if !reflect.DeepEqual(read(f), before) || f.AppliedIndex() != applied {
		t.Fatal("a halting entry changed the store")
	}
	next := mustEncode(t, &AgentConnectedRequest{Name: "after_halt"})
	if resp := f.Apply(&raft.Log{Index: applied + 2, Type: raft.LogCommand, Data: next}); resp != h {
		t.Fatalf("an entry after the halt was answered %v", resp)
	}
	if _, ok := read(f).Agents["after_halt"]; ok {
		t.Fatal("an entry after the halt was applied")
	}
	if _, err := f.Snapshot(); !errors.Is(err, ErrHalted) {
		t.Fatalf("a halted FSM took a snapshot (err %v): Raft could compact the entry away", err)
	}
	return h
}

// Every entry this version cannot apply halts the FSM with the reason;
// none panics.
func TestFSM_UnapplicableEntriesHalt(t *testing.T) {
	ok := mustEncode(t, &AgentConnectedRequest{Name: "a"})
	// Encode refuses a rendering without a workload; written by hand.
	nilRendering, err := proto.Marshal(&fsmpb.UpdateDesiredState{Seq: 1, Update: &fsmpb.DesiredUpdate{
		PutRendered: []*fsmpb.Rendered{{Name: "web", Instance: &fsmpb.InstanceName{WorkloadName: "web"}}}}})
	if err != nil {
		t.Fatal(err)
	}
	nilRendering = append([]byte{byte(UpdateDesiredStatePackedType)}, nilRendering...)
	for _, tc := range []struct {
		name  string
		data  []byte
		cause error
	}{
		{"unknown type", []byte{126, '{', '}'}, ErrUnknownType},
		{"JSON", []byte{byte(AgentGoneType), '{'}, ErrUndecodable},
		{"rendering without a workload", nilRendering, ErrUndecodable},
		{"truncated varint", []byte{byte(UpdateDesiredStatePackedType), 0xc1}, ErrUndecodable},
		{"invalid UTF-8", []byte{byte(AgentGoneType), 0x0a, 0x01, 0xff}, ErrUndecodable},
		{"retired type", []byte{byte(WorkloadStatesType)}, ErrUnknownType},
		{"batch with an unknown command", batchOf(t, ok, []byte{126, '{', '}'}), ErrUnknownType},
		{"batch with a bad length", []byte{byte(BatchType), 0x80}, ErrUndecodable},
	} {
		t.Run(tc.name, func(t *testing.T) {
			h := requireHalts(t, New(), tc.data)
			if !errors.Is(h, tc.cause) {
				t.Fatalf("halt %v, want cause %v", h, tc.cause)
			}
		})
	}
}

func batchOf(t *testing.T, cmds ...[]byte) []byte {
	t.Helper()
	b, err := EncodeBatch(cmds)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// A restore replaces what the halted entry would have done, so the FSM
// applies again after it; Decode refuses what Apply would halt on.
func TestFSM_RestoreEndsTheHalt(t *testing.T) {
	src := New()
	apply(t, src, &AgentConnectedRequest{Name: "a"})
	var snap bytes.Buffer
	if err := WriteSnapshot(&snap, read(src), 7); err != nil {
		t.Fatal(err)
	}
	f := New()
	requireHalts(t, f, []byte{126})
	if err := f.Restore(noClose{&snap}); err != nil {
		t.Fatal(err)
	}
	if f.Halted() != nil {
		t.Fatal("still halted after a restore")
	}
	next := mustEncode(t, &AgentConnectedRequest{Name: "b"})
	if resp := f.Apply(&raft.Log{Index: 8, Type: raft.LogCommand, Data: next}); resp != nil {
		t.Fatalf("apply after restore: %v", resp)
	}
	if _, _, err := Decode([]byte{126}); !errors.Is(err, ErrUnknownType) {
		t.Fatalf("Decode of an unknown type: %v", err)
	}
}

type noClose struct{ *bytes.Buffer }

func (noClose) Close() error { return nil }

// CheckType passes every type this version applies or may skip, and
// refuses the others, inside a batch too.
func TestCheckType(t *testing.T) {
	ok := mustEncode(t, &AgentGoneRequest{Name: "a"})
	for _, tc := range []struct {
		name string
		cmd  []byte
		want error
	}{
		{"known", ok, nil},
		{"ignorable", []byte{byte(IgnoreUnknownTypeFlag | 5)}, nil},
		{"batch of known", batchOf(t, ok, ok), nil},
		{"unknown", []byte{126}, ErrUnknownType},
		{"zero", []byte{0}, ErrUnknownType},
		{"batch with unknown", batchOf(t, ok, []byte{126}), ErrUnknownType},
		{"broken batch", []byte{byte(BatchType), 9}, ErrUndecodable},
	} {
		if err := CheckType(tc.cmd); !errors.Is(err, tc.want) || (tc.want == nil) != (err == nil) {
			t.Errorf("%s: %v, want %v", tc.name, err, tc.want)
		}
	}
	for _, typ := range MessageTypes() {
		_, old := typ.Retired()
		if typ == BatchType {
			continue
		}
		if err := CheckType([]byte{byte(typ)}); (err != nil) != old {
			t.Errorf("%s (retired %v): %v", typ, old, err)
		}
	}
	if err := CheckType(batchOf(t, ok, []byte{byte(AgentLoadType)})); !errors.Is(err, ErrUnknownType) {
		t.Errorf("a retired type in a batch: %v", err)
	}
}
