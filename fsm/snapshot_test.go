package fsm

import (
	"bytes"
	"encoding/binary"
	"errors"
	"hash/crc32"
	"math/rand/v2"
	"os"
	"reflect"
	"strings"
	"testing"

	"github.com/grapnel-io/grapnel/state"
)

// fullSnapshot is a version-2 snapshot of a store holding every record
// type, and that store.
func fullSnapshot(t *testing.T) ([]byte, *state.Store, uint64) {
	t.Helper()
	f := New()
	apply(t, f, webUpdate())
	apply(t, f, &AgentConnectedRequest{Name: "agent_A", Tags: map[string]string{"z": "1"}})
	apply(t, f, &WorkloadReportsRequest{Reports: []AgentReport{{Agent: "agent_A", States: []state.WorkloadState{{Instance: inst, State: state.RunningOk}}}}})
	apply(t, f, &WorkloadReportsRequest{Reports: []AgentReport{
		{Agent: "agent_A", Mark: state.ReportMark{Incarnation: 3, Generation: 9}, States: []state.WorkloadState{{Instance: inst, State: state.SucceededOk}}}}})
	apply(t, f, &SetAgentModeRequest{Agent: "agent_B", Mode: state.ModeMaintenance})
	apply(t, f, &PlacementRequest{Update: state.PlacementUpdate{Layout: map[string][]string{"web2": {"agent_A", "agent_B"}}}})
	st := read(f)
	var buf bytes.Buffer
	if err := WriteSnapshot(&buf, st, f.AppliedIndex()); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes(), st, f.AppliedIndex()
}

// snapRecord is one raw record for crafting snapshots by hand.
type snapRecord struct {
	t    SnapshotType
	body string
}

// craft writes a snapshot byte by byte: version, index, records, the end
// record, and for version 2 a correct checksum, so that a test reaches
// the check it aims at.
func craft(version, index uint64, recs ...snapRecord) []byte {
	b := []byte(snapshotMagic)
	b = binary.AppendUvarint(b, version)
	b = binary.AppendUvarint(b, index)
	for _, r := range recs {
		b = append(b, byte(r.t))
		b = binary.AppendUvarint(b, uint64(len(r.body)))
		b = append(b, r.body...)
	}
	b = append(b, byte(snapEnd))
	if version == 2 {
		b = binary.BigEndian.AppendUint32(b, crc32.Checksum(b, crc32.MakeTable(crc32.Castagnoli)))
	}
	return b
}

// Version 2 is version 1 with a CRC-32C of everything before it at the
// end, and it reads back into the store it was written from.
func TestSnapshotVersion2RoundTrip(t *testing.T) {
	data, st, index := fullSnapshot(t)
	if v := data[len(snapshotMagic)]; v != 2 {
		t.Fatalf("version byte %d, want 2", v)
	}
	body, sum := data[:len(data)-4], binary.BigEndian.Uint32(data[len(data)-4:])
	if body[len(body)-1] != byte(snapEnd) {
		t.Fatal("the checksum does not follow the end record")
	}
	if want := crc32.Checksum(body, crc32.MakeTable(crc32.Castagnoli)); sum != want {
		t.Fatalf("checksum %08x, want the CRC-32C of what precedes it, %08x", sum, want)
	}
	got, gotIndex, err := ReadSnapshot(bytes.NewReader(data))
	if err != nil {
		t.Fatal(err)
	}
	if gotIndex != index || !reflect.DeepEqual(normalize(got), normalize(st)) {
		t.Fatalf("read back index %d (want %d):\n%+v\nwant\n%+v", gotIndex, index, got, st)
	}
	if vi, err := VerifySnapshot(bytes.NewReader(data)); err != nil || vi != index {
		t.Fatalf("VerifySnapshot = %d, %v; want %d", vi, err, index)
	}
	var again bytes.Buffer
	if err := WriteSnapshot(&again, got, gotIndex); err != nil || !bytes.Equal(again.Bytes(), data) {
		t.Fatalf("re-encoding differs (err %v)", err)
	}
}

// A version-1 snapshot (no checksum), written by the version before the
// checksum and kept in testdata, still restores: old data dirs and saved
// files stay usable.
func TestSnapshotReadsVersion1(t *testing.T) {
	data, err := os.ReadFile("testdata/snapshot-v1.golden")
	if err != nil {
		t.Fatal(err)
	}
	if data[len(snapshotMagic)] != 1 {
		t.Fatal("the golden file is not version 1")
	}
	st, index, err := ReadSnapshot(bytes.NewReader(data))
	if err != nil {
		t.Fatal(err)
	}
	w := st.Desired.Workloads["web"]
	agent := st.Agents["agent_A"]
	ws, _ := st.States.Get(inst)
	switch {
	case index != 6 || st.Revision != 6 || st.DesiredSeq != 2 || st.Desired.APIVersion != "v1":
		t.Fatalf("index %d, revision %d, seq %d, api %q", index, st.Revision, st.DesiredSeq, st.Desired.APIVersion)
	case w == nil || w.Runtime != "podman" || w.RuntimeConfig != "image: nginx" || w.Dependencies["db"] != state.AddCondRunning:
		t.Fatalf("workload web %+v", w)
	case st.Rendered["web"].Instance != inst || st.Rendered["web"].Workload == nil:
		t.Fatalf("rendered %+v", st.Rendered)
	case st.Desired.Configs["n"] != "2" || st.Desired.Configs["cfg"] == nil:
		t.Fatalf("configs %v", st.Desired.Configs)
	case st.DeleteGraph["db"]["web"] == "":
		t.Fatalf("delete graph %v", st.DeleteGraph)
	case agent == nil || agent.Tags["z"] != "1" || agent.Status.CPUUsage == nil || *agent.Status.CPUUsage != 3:
		t.Fatalf("agent %+v", agent)
	case ws != state.SucceededOk:
		t.Fatalf("workload state %v", ws)
	case st.ReportMarks["agent_A"] != (state.ReportMark{Incarnation: 3, Generation: 9}):
		t.Fatalf("report marks %v", st.ReportMarks)
	}
	// Saved again, it becomes version 2 with the same records.
	var again bytes.Buffer
	if err := WriteSnapshot(&again, st, index); err != nil {
		t.Fatal(err)
	}
	if again.Bytes()[len(snapshotMagic)] != 2 {
		t.Fatal("a re-saved version-1 snapshot is not version 2")
	}
	// It predates revisions: it gains their floor, at its seq, so that an
	// expected revision older than the snapshot is refused.
	if st.Revs.Floor != st.DesiredSeq {
		t.Fatalf("floor %d of a snapshot without revisions, want its seq %d", st.Revs.Floor, st.DesiredSeq)
	}
	wantTypes := recordTypes(t, data)
	wantTypes[SnapGuard] = 1
	if !reflect.DeepEqual(recordTypes(t, again.Bytes()), wantTypes) {
		t.Fatalf("records %v, version 1 had %v and the floor", recordTypes(t, again.Bytes()), recordTypes(t, data))
	}
	// Version 1 may not carry anything after its end record either.
	if _, err := VerifySnapshot(bytes.NewReader(append(bytes.Clone(data), 0))); !errors.Is(err, ErrBadSnapshot) || !strings.Contains(err.Error(), "1 trailing bytes") {
		t.Fatalf("version 1 with a trailing byte: %v", err)
	}
}

func TestVerifySnapshotRefuses(t *testing.T) {
	good, _, _ := fullSnapshot(t)
	random := make([]byte, 2000)
	r := rand.New(rand.NewPCG(1, 2))
	for i := range random {
		random[i] = byte(r.Uint32())
	}
	// A byte inside a JSON string: the records still decode, only the
	// checksum tells.
	inString := bytes.Clone(good)
	at := bytes.Index(inString, []byte("nginx"))
	inString[at] = 'N'
	// A byte that breaks a record's JSON: reported as a checksum
	// mismatch, naming the record it broke.
	inJSON := bytes.Clone(good)
	inJSON[bytes.Index(inJSON, []byte(`"Name"`))] = '!'
	v1, _ := os.ReadFile("testdata/snapshot-v1.golden")
	tests := []struct {
		name string
		data []byte
		want string
	}{
		{"empty", nil, "it is empty"},
		{"half the magic", []byte(snapshotMagic[:7]), "truncated in the header (magic) (at byte 7)"},
		{"wrong magic", []byte("GRAPNEL-SNAPSHOX"), "bad magic"},
		{"random bytes", random, "bad magic"},
		{"magic only", []byte(snapshotMagic), "truncated in the header (version)"},
		{"random after the magic", append([]byte(snapshotMagic), random...), "unsupported version"},
		{"version 0", craft(0, 1), "unsupported version 0 (this replica reads versions 1 and 2)"},
		{"version 3", craft(3, 1), "unsupported version 3"},
		{"no index", append([]byte(snapshotMagic), 2), "truncated in the header (index)"},
		{"no end record", craft(2, 1)[:len(snapshotMagic)+2], "truncated after record 0: no end record"},
		{"truncated record", good[:len(good)-400], "truncated in record"},
		{"no checksum", good[:len(good)-4], "no checksum after the end record"},
		{"half a checksum", good[:len(good)-2], "no checksum after the end record"},
		{"flipped byte in a string", inString, "checksum mismatch"},
		{"flipped byte in JSON", inJSON, "checksum mismatch: the snapshot says"},
		{"trailing bytes", append(bytes.Clone(good), "junk"...), "4 trailing bytes after the end of the snapshot"},
		{"version 2 relabelled 1", append(bytes.Clone(v1[:len(snapshotMagic)]), append([]byte{1}, good[len(snapshotMagic)+1:]...)...), "4 trailing bytes"},
		{"version 1 relabelled 2", append(bytes.Clone(v1[:len(snapshotMagic)]), append([]byte{2}, v1[len(snapshotMagic)+1:]...)...), "no checksum after the end record"},
		{"huge record length", append(craft(2, 1)[:len(snapshotMagic)+2], byte(SnapWorkload), 0xff, 0xff, 0xff, 0xff, 0x0f), "length 4294967295 is over"},
		{"record length past the end", append(craft(2, 1)[:len(snapshotMagic)+2], byte(SnapWorkload), 0xff, 0xff, 0x3f, '{'), "truncated in record 1 (type 2): 1 of 1048575 bytes"},
		// With a correct checksum, what the records hold is checked.
		{"unknown record type", craft(2, 1, snapRecord{200, "{}"}), "record 1 (type 200): unknown record type"},
		{"record not JSON", craft(2, 1, snapRecord{SnapAPIVersion, `"v1"`}, snapRecord{SnapConfig, "{"}), "record 2 (type 3): unexpected end of JSON input"},
		{"record of the wrong shape", craft(2, 1, snapRecord{SnapRevision, `"seven"`}), "record 1 (type 8): json: cannot unmarshal string"},
		{"workload without body", craft(2, 1, snapRecord{SnapWorkload, `{"Name":"w"}`}), `workload "w" has no body`},
		{"rendering without workload", craft(2, 1, snapRecord{SnapRendered, `{"Name":"w","Rendered":{}}`}), `rendering "w" has no workload`},
		{"agent without attributes", craft(2, 1, snapRecord{SnapAgent, `{"Name":"a"}`}), `agent "a" has no attributes`},
		{"bad record in version 1", craft(1, 1, snapRecord{SnapConfig, "{"}), "record 1 (type 3): unexpected end of JSON input"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			_, err := VerifySnapshot(bytes.NewReader(tc.data))
			if !errors.Is(err, ErrBadSnapshot) {
				t.Fatalf("err = %v, want ErrBadSnapshot", err)
			}
			if !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("err = %q, want it to say %q", err, tc.want)
			}
		})
	}
	t.Run("crafted snapshots that are fine", func(t *testing.T) {
		for _, data := range [][]byte{craft(2, 7), craft(1, 7), craft(2, 7, snapRecord{SnapDesiredSeq, "3"})} {
			if index, err := VerifySnapshot(bytes.NewReader(data)); err != nil || index != 7 {
				t.Errorf("%q: %d, %v", data, index, err)
			}
		}
	})
}

// A snapshot cut anywhere is refused, and so is one with any bit flipped
// or any byte replaced.
func TestVerifySnapshotEveryCutAndFlip(t *testing.T) {
	good, _, _ := fullSnapshot(t)
	for n := range len(good) {
		if _, err := VerifySnapshot(bytes.NewReader(good[:n])); !errors.Is(err, ErrBadSnapshot) {
			t.Fatalf("cut at %d of %d bytes: %v", n, len(good), err)
		}
	}
	bad := bytes.Clone(good)
	for i := range bad {
		for _, mask := range []byte{1, 2, 4, 8, 16, 32, 64, 128, 0xff} {
			bad[i] ^= mask
			if _, err := VerifySnapshot(bytes.NewReader(bad)); !errors.Is(err, ErrBadSnapshot) {
				t.Fatalf("byte %d xor %#x accepted: %v", i, mask, err)
			}
			bad[i] ^= mask
		}
	}
}

// A restore that fails leaves the FSM exactly as it was: same store, same
// applied index, no restore counted or announced.
func TestRestoreRefusedLeavesStore(t *testing.T) {
	good, _, _ := fullSnapshot(t)
	f := New()
	apply(t, f, webUpdate())
	apply(t, f, &AgentConnectedRequest{Name: "agent_B"})
	notified := 0
	f.SetRestoreObserver(func() { notified++ })
	before, applied := read(f), f.AppliedIndex()
	flipped := bytes.Clone(good)
	flipped[len(flipped)/2] ^= 1
	for name, data := range map[string][]byte{
		"truncated": good[:len(good)*2/3], "flipped": flipped, "trailing": append(bytes.Clone(good), 0),
	} {
		if err := f.Restore(nopCloser{bytes.NewReader(data)}); !errors.Is(err, ErrBadSnapshot) {
			t.Fatalf("%s: %v", name, err)
		}
		if !reflect.DeepEqual(normalize(read(f)), normalize(before)) || f.AppliedIndex() != applied || f.Restores() != 0 || notified != 0 {
			t.Fatalf("%s: the refused restore changed the FSM (applied %d, restores %d, notified %d)", name, f.AppliedIndex(), f.Restores(), notified)
		}
		if _, ok := read(f).Agents["agent_B"]; !ok {
			t.Fatalf("%s: agent_B lost", name)
		}
	}
}

// FuzzReadSnapshot: reading never panics, refuses only with
// ErrBadSnapshot, and whatever it accepts writes back to a snapshot that
// verifies and reads to the same bytes again.
func FuzzReadSnapshot(f *testing.F) {
	var full bytes.Buffer
	st := state.NewStore()
	w := &state.Workload{Agent: "a", Runtime: "podman", RuntimeConfig: "x"}
	st.Desired.Workloads["w"] = w
	st.Desired.Configs["c"] = map[string]any{"k": []any{"v", 1.5}}
	st.Rendered["w"] = state.Rendered{Instance: state.NewInstanceName("w", "a", "x"), Workload: w}
	st.Agents["a"] = &state.AgentAttributes{Tags: map[string]string{"t": "1"}}
	st.States.Set(state.NewInstanceName("w", "a", "x"), state.RunningOk)
	st.ReportMarks["a"] = state.ReportMark{Incarnation: 1, Generation: 2}
	if err := WriteSnapshot(&full, st, 42); err != nil {
		f.Fatal(err)
	}
	v1, err := os.ReadFile("testdata/snapshot-v1.golden")
	if err != nil {
		f.Fatal(err)
	}
	f.Add(full.Bytes())
	f.Add(full.Bytes()[:full.Len()/2])
	f.Add(v1)
	f.Add(craft(2, 1, snapRecord{SnapDeleteEdge, `{"Dependency":"a","Dependent":"b","Condition":"DEL_COND_RUNNING"}`}))
	f.Add(craft(1, 1, snapRecord{SnapWorkloadState, `{}`}))
	f.Add([]byte("junk"))
	f.Fuzz(func(t *testing.T, data []byte) {
		st, index, err := ReadSnapshot(bytes.NewReader(data))
		if err != nil {
			if !errors.Is(err, ErrBadSnapshot) {
				t.Fatalf("refused without ErrBadSnapshot: %v", err)
			}
			return
		}
		var again bytes.Buffer
		if err := WriteSnapshot(&again, st, index); err != nil {
			t.Fatalf("an accepted snapshot does not write back: %v", err)
		}
		st2, index2, err := ReadSnapshot(bytes.NewReader(again.Bytes()))
		if err != nil || index2 != index {
			t.Fatalf("the written-back snapshot reads as %d, %v (want %d)", index2, err, index)
		}
		var third bytes.Buffer
		if err := WriteSnapshot(&third, st2, index2); err != nil || !bytes.Equal(third.Bytes(), again.Bytes()) {
			t.Fatalf("writing back is not stable (err %v)", err)
		}
	})
}
