package fsm

import (
	"bytes"
	"encoding/json"
	"errors"
	"flag"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"github.com/hashicorp/raft"

	"github.com/grapnel-io/grapnel/state"
)

// richUpdate uses every field of a desired-state update: a workload
// without configs (its rendering is a copy, left out of the packed body),
// one with configs (rendered differently, sent in full), nested config
// items, files, access rules, dependencies, deletions and agent tags.
func richUpdate(seq uint64) UpdateDesiredStateRequest {
	plain := &state.Workload{Agent: "agent_A", Runtime: "podman", RuntimeConfig: "image: nginx\n" + strings.Repeat("x", 200),
		RestartPolicy: state.RestartAlways, Dependencies: map[string]state.AddCondition{"db": state.AddCondRunning},
		Tags: map[string]string{"a": "b"}, Files: []state.File{{MountPoint: "/etc/x", Content: "hello"}, {MountPoint: "/bin/y", Content: "AAE=", Binary: true}},
		ControlInterfaceAccess: state.ControlInterfaceAccess{
			AllowRules: []state.AccessRule{{Operation: state.ReadWrite("ReadWrite"), FilterMasks: []string{"desiredState.workloads.web"}}},
			DenyRules:  []state.AccessRule{{IsLogRule: true, WorkloadNames: []string{"db"}}},
		}}
	templ := &state.Workload{Agent: "agent_B", Runtime: "podman", RuntimeConfig: "image: {{c.image}}", Configs: map[string]string{"c": "cfg"}}
	rendered := &state.Workload{Agent: "agent_B", Runtime: "podman", RuntimeConfig: "image: redis"}
	pi := state.NewInstanceName("web", plain.Agent, plain.RuntimeConfig)
	ti := state.NewInstanceName("cache", rendered.Agent, rendered.RuntimeConfig)
	return UpdateDesiredStateRequest{Seq: seq, Update: state.DesiredUpdate{
		APIVersion:      state.APIVersion,
		PutWorkloads:    map[string]*state.Workload{"web": plain, "cache": templ},
		DeleteWorkloads: []string{"old"},
		PutConfigs:      map[string]any{"cfg": map[string]any{"image": "redis", "l": []any{"x", map[string]any{"y": "z"}}}, "s": "t"},
		DeleteConfigs:   []string{"gone"},
		PutRendered:     map[string]state.Rendered{"web": {Instance: pi, Workload: plain.Clone()}, "cache": {Instance: ti, Workload: rendered}},
		DeleteRendered:  []string{"old"},
		SetStates:       []state.WorkloadState{{Instance: pi, State: state.PendingInitial}, {Instance: ti, State: state.PendingInitial}},
		DeleteStates:    []state.InstanceName{state.NewInstanceName("old", "agent_A", "image: old")},
		AgentTags:       map[string]map[string]string{"agent_A": {"k": "v"}},
	}}
}

// A packed entry decodes to exactly the body its JSON form decodes to,
// with the left-out rendering rebuilt, and is shorter.
func TestPackedDecodesLikeJSON(t *testing.T) {
	body := richUpdate(1)
	packed, err := Encode(UpdateDesiredStatePackedType, &body)
	if err != nil {
		t.Fatal(err)
	}
	plain, err := Encode(UpdateDesiredStateSeqType, &body)
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(body, richUpdate(1)) {
		t.Fatal("Encode changed the body it was given")
	}
	var fromJSON, fromPacked UpdateDesiredStateRequest
	if err := json.Unmarshal(plain[1:], &fromJSON); err != nil {
		t.Fatal(err)
	}
	if err := decodePacked(packed[1:], &fromPacked); err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(fromJSON, fromPacked) {
		t.Fatalf("packed decodes to\n%+v\nJSON to\n%+v", fromPacked, fromJSON)
	}
	if packed[0] != byte(UpdateDesiredStatePackedType) || len(packed) >= len(plain)*3/4 {
		t.Fatalf("packed entry: type %d, %d bytes against %d in JSON", packed[0], len(packed), len(plain))
	}
	t.Logf("packed %d bytes, JSON %d", len(packed), len(plain))
}

// swdd~server-state-stores-new-desired-state (through Raft): the packed
// command applies like the JSON one, in sequence, and refuses an update
// out of sequence.
func TestFSM_UpdateDesiredStatePacked(t *testing.T) {
	f, g := New(), New()
	apply(t, f, UpdateDesiredStatePackedType, richUpdate(1))
	apply(t, g, UpdateDesiredStateSeqType, richUpdate(1))
	a, b := read(f), read(g)
	b.Revision = a.Revision // applied at the next index
	if !reflect.DeepEqual(normalize(a), normalize(b)) {
		t.Fatalf("packed store %+v\nJSON store %+v", a, b)
	}
	s := read(f)
	if s.Rendered["web"].Workload == nil || s.Rendered["web"].Workload.RuntimeConfig != s.Desired.Workloads["web"].RuntimeConfig ||
		s.Rendered["cache"].Workload.RuntimeConfig != "image: redis" || s.DesiredSeq != 1 {
		t.Fatalf("store %+v", s)
	}
	buf, err := Encode(UpdateDesiredStatePackedType, richUpdate(5))
	if err != nil {
		t.Fatal(err)
	}
	index++
	resp := f.Apply(&raft.Log{Index: index, Type: raft.LogCommand, Data: buf})
	if err, ok := resp.(error); !ok || !errors.Is(err, ErrOutOfSequence) {
		t.Fatalf("out of sequence: %v", resp)
	}
}

// A committed packed entry that does not decode halts the FSM rather than
// letting the replicas differ.
func TestPackedCorruptStops(t *testing.T) {
	for name, data := range map[string][]byte{
		"garbage": {byte(UpdateDesiredStatePackedType), 0xc1, 0xff},
		"rendering without spec": func() []byte {
			body := richUpdate(1)
			b, err := Encode(UpdateDesiredStatePackedType, &body)
			if err != nil {
				t.Fatal(err)
			}
			// Rename the spec so the left-out rendering has none.
			return []byte(strings.Replace(string(b), "web", "wex", 1))
		}(),
	} {
		t.Run(name, func(t *testing.T) { requireHalts(t, New(), data) })
	}
}

func BenchmarkDecodeUpdate(b *testing.B) {
	body := richUpdate(1)
	for _, typ := range []MessageType{UpdateDesiredStateSeqType, UpdateDesiredStatePackedType} {
		buf, err := Encode(typ, &body)
		if err != nil {
			b.Fatal(err)
		}
		b.Run(typ.String(), func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				var r UpdateDesiredStateRequest
				var err error
				if typ == UpdateDesiredStatePackedType {
					err = decodePacked(buf[1:], &r)
				} else {
					err = json.Unmarshal(buf[1:], &r)
				}
				if err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

var updateGolden = flag.Bool("update-golden", false, "rewrite testdata/packed.golden")

// The packed format is part of the Raft log: an entry written today must
// decode the same way in every later version. Structs are arrays of their
// fields, so reordering or removing a field of state.DesiredUpdate or of
// anything it holds breaks old entries; new fields go at the end.
func TestPackedFormatIsStable(t *testing.T) {
	path := filepath.Join("testdata", "packed.golden")
	body := richUpdate(1)
	buf, err := Encode(UpdateDesiredStatePackedType, &body)
	if err != nil {
		t.Fatal(err)
	}
	if *updateGolden {
		if err := os.WriteFile(path, buf, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	golden, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	plain, err := Encode(UpdateDesiredStateSeqType, &body)
	if err != nil {
		t.Fatal(err)
	}
	var want, got UpdateDesiredStateRequest
	if err := json.Unmarshal(plain[1:], &want); err != nil {
		t.Fatal(err)
	}
	if err := decodePacked(golden[1:], &got); err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("the golden entry decodes to\n%+v\nwant\n%+v\n(a field of a packed struct was moved or removed?)", got, want)
	}
	if !bytes.Equal(buf, golden) {
		t.Fatalf("the packed encoding changed (%d bytes, golden %d): a struct field moved, or a field was added (then rerun with -update-golden and check that old entries still decode)", len(buf), len(golden))
	}
}
