package fsm

import (
	"bytes"
	"errors"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"github.com/hashicorp/raft"

	"github.com/grapnel-io/grapnel/state"
)

// richUpdate uses every field of a desired-state update: a workload
// without configs (its rendering is a copy, left out of the body), one
// with configs (rendered differently, sent in full), nested config items,
// files, access rules, dependencies, deletions and agent tags.
func richUpdate(seq uint64) *UpdateDesiredStateRequest {
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
	return &UpdateDesiredStateRequest{Seq: seq, Update: state.DesiredUpdate{
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

// goldenCommands is one command of every type the leader writes, as the
// golden entries in testdata hold them.
func goldenCommands() map[string]Command {
	// Empty and nil config items keep what they are.
	u := richUpdate(1)
	u.Update.PutConfigs["e"] = []any{}
	u.Update.PutConfigs["m"] = map[string]any{}
	u.Update.PutConfigs["n"] = nil
	return map[string]Command{
		"UpdateDesiredStatePacked": u,
		"AgentConnected":           &AgentConnectedRequest{Name: "agent_A", Tags: map[string]string{"region": "eu", "tier": "gold"}},
		"AgentGone":                &AgentGoneRequest{Name: "agent_A"},
		"SetAgentMode":             &SetAgentModeRequest{Agent: "agent_A", Mode: state.ModeMaintenance, History: &HistoryMeta{TimeMs: 7, Requester: "cli"}},
		"Placement": &PlacementRequest{Update: state.PlacementUpdate{
			Layout:       map[string][]string{"web": {"agent_A", "agent_B"}, "old": nil},
			SetStates:    []state.WorkloadState{{Instance: state.NewInstanceName("web", "agent_B", "x"), State: state.PendingInitial}},
			DeleteStates: []state.InstanceName{state.NewInstanceName("web", "agent_C", "x")}},
			History: &HistoryMeta{TimeMs: 8, Requester: "server", Decision: "agent agent_C gone past its grace"}},
		"WorkloadReports": &WorkloadReportsRequest{Reports: []AgentReport{
			{Agent: "agent_A", Mark: state.ReportMark{Incarnation: 3, Generation: 9}, States: []state.WorkloadState{
				{Instance: inst, State: state.RunningOk},
				{Instance: state.NewInstanceName("db", "agent_A", "db"), State: state.ExecutionState{State: state.StateFailed, SubState: state.SubExecFailed, AdditionalInfo: "exit 1"}}}},
			{Agent: "agent_B", States: []state.WorkloadState{{Instance: state.NewInstanceName("x", "agent_B", "x"), State: state.Removed}}}}},
	}
}

var updateGolden = flag.Bool("update-golden", false, "rewrite the golden entries in testdata")

// The golden entries are part of the Raft log: an entry written today
// must decode to the same command in every later version, and the same
// command must encode to the same bytes. A field of a body keeps its
// number and type; a change that fails here breaks existing logs.
func TestGoldenEntries(t *testing.T) {
	cmds := goldenCommands()
	var all [][]byte
	for _, name := range state.SortedKeys(cmds) {
		c := cmds[name]
		t.Run(name, func(t *testing.T) {
			if c.Type().String() != name {
				t.Fatalf("%s is named %s", name, c.Type())
			}
			buf := goldenEntry(t, "entry-"+name+".golden", mustEncode(t, c))
			all = append(all, buf)
			typ, got, err := Decode(buf)
			if err != nil || typ != c.Type() {
				t.Fatalf("the golden entry decodes as %s: %v", typ, err)
			}
			if !reflect.DeepEqual(got, c) {
				t.Fatalf("the golden entry decodes to\n%+v\nwant\n%+v", got, c)
			}
			if again := mustEncode(t, got); !bytes.Equal(again, buf) {
				t.Fatalf("decoded and encoded again: %d bytes, golden %d", len(again), len(buf))
			}
		})
	}
	batch := goldenEntry(t, "entry-Batch.golden", batchOf(t, all...))
	f, g := New(), New()
	resp, ok := f.Apply(&raft.Log{Index: 1, Type: raft.LogCommand, Data: batch}).(BatchResponse)
	if !ok || len(resp) != len(all) {
		t.Fatalf("the golden batch answered %#v", resp)
	}
	for _, c := range all {
		g.Apply(&raft.Log{Index: 1, Type: raft.LogCommand, Data: c})
	}
	if !reflect.DeepEqual(normalize(read(f)), normalize(read(g))) {
		t.Fatal("the golden batch applies differently from its commands")
	}
}

// goldenEntry returns the golden entry in testdata/name, after writing
// buf there with -update-golden, and fails if buf differs from it.
func goldenEntry(t *testing.T, name string, buf []byte) []byte {
	t.Helper()
	path := filepath.Join("testdata", name)
	if *updateGolden {
		if err := os.WriteFile(path, buf, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	golden, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(buf, golden) {
		t.Fatalf("%s: the encoding changed (%d bytes, golden %d): a field was renumbered, retyped or added; "+
			"rerun with -update-golden only if old entries still decode to the same command", name, len(buf), len(golden))
	}
	return golden
}

// One command is one entry: map order never shows in the bytes, on any
// run or replica.
func TestEncodeIsDeterministic(t *testing.T) {
	u := richUpdate(1)
	for i := range 200 {
		n := fmt.Sprintf("w%03d", i)
		u.Update.PutWorkloads[n] = &state.Workload{Agent: "agent_A", Tags: map[string]string{n: "x", "a" + n: "y"},
			Dependencies: map[string]state.AddCondition{n: state.AddCondRunning, "b": state.AddCondFailed}}
		u.Update.PutConfigs[n] = map[string]any{n: "x", "k": map[string]any{n: "y", "z": "w"}}
		u.Update.AgentTags[n] = map[string]string{n: "1", "t": "2"}
	}
	first := mustEncode(t, u)
	for range 50 {
		if !bytes.Equal(mustEncode(t, u), first) {
			t.Fatal("one command encoded to different entries")
		}
	}
	_, c, err := Decode(first)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(mustEncode(t, c), first) {
		t.Fatal("a decoded command encodes to another entry")
	}
}

// A rendering that is a copy of its spec is left out of the entry and
// rebuilt from the spec; one that differs travels in full. The leader
// encodes and decodes before proposing, so it never sees the difference.
func TestRenderingCopyLeftOut(t *testing.T) {
	u := richUpdate(1)
	full := *u
	full.Update.PutRendered = map[string]state.Rendered{}
	for n, rw := range u.Update.PutRendered {
		full.Update.PutRendered[n] = rw
	}
	// With "cache" mapping no config, its rendering is left out too.
	cacheSpec := u.Update.PutWorkloads["cache"].Clone()
	cacheSpec.Configs = nil
	full.Update.PutWorkloads = map[string]*state.Workload{"web": u.Update.PutWorkloads["web"], "cache": cacheSpec}
	short, long := mustEncode(t, u), mustEncode(t, &full)
	if len(long) >= len(short) {
		t.Fatalf("a rendering left out: %d bytes, not shorter than %d", len(short), len(long))
	}
	_, c, err := Decode(short)
	if err != nil {
		t.Fatal(err)
	}
	got := c.(*UpdateDesiredStateRequest).Update.PutRendered
	if w := got["web"].Workload; w == u.Update.PutWorkloads["web"] || !reflect.DeepEqual(w, u.Update.PutWorkloads["web"]) {
		t.Fatalf("the rendering of web was not rebuilt as a copy of its spec: %+v", w)
	}
	if !reflect.DeepEqual(got["cache"].Workload, u.Update.PutRendered["cache"].Workload) {
		t.Fatalf("the rendering of cache: %+v", got["cache"].Workload)
	}
	t.Logf("rich update: %d bytes", len(short))
}

// Two templated workloads in one update keep their own renderings (the
// go-msgpack decode of type 8 once gave both the last one's).
func TestTwoRenderingsStayApart(t *testing.T) {
	a := &state.Workload{Agent: "agent_A", Runtime: "podman", RuntimeConfig: "image: {{c.a}}", Configs: map[string]string{"c": "cfg"}}
	b := &state.Workload{Agent: "agent_B", Runtime: "podman", RuntimeConfig: "image: {{c.b}}", Configs: map[string]string{"c": "cfg"}}
	ra := &state.Workload{Agent: "agent_A", Runtime: "podman", RuntimeConfig: "image: AAA"}
	rb := &state.Workload{Agent: "agent_B", Runtime: "podman", RuntimeConfig: "image: BBB"}
	_, c, err := Decode(mustEncode(t, &UpdateDesiredStateRequest{Seq: 1, Update: state.DesiredUpdate{
		PutWorkloads: map[string]*state.Workload{"a": a, "b": b},
		PutRendered: map[string]state.Rendered{
			"a": {Instance: state.NewInstanceName("a", "agent_A", ra.RuntimeConfig), Workload: ra},
			"b": {Instance: state.NewInstanceName("b", "agent_B", rb.RuntimeConfig), Workload: rb}},
	}}))
	if err != nil {
		t.Fatal(err)
	}
	got := c.(*UpdateDesiredStateRequest).Update.PutRendered
	if a, b := got["a"].Workload, got["b"].Workload; a.RuntimeConfig != "image: AAA" || b.RuntimeConfig != "image: BBB" {
		t.Fatalf("renderings %+v and %+v", a, b)
	}
}

// swdd~server-state-stores-new-desired-state (through Raft): the update
// applies in sequence and is refused out of sequence.
func TestFSM_UpdateDesiredStatePacked(t *testing.T) {
	f := New()
	apply(t, f, richUpdate(1))
	s := read(f)
	if s.Rendered["web"].Workload == nil || s.Rendered["web"].Workload.RuntimeConfig != s.Desired.Workloads["web"].RuntimeConfig ||
		s.Rendered["cache"].Workload.RuntimeConfig != "image: redis" || s.DesiredSeq != 1 || s.Desired.Configs["s"] != "t" {
		t.Fatalf("store %+v", s)
	}
	index++
	resp := f.Apply(&raft.Log{Index: index, Type: raft.LogCommand, Data: mustEncode(t, richUpdate(5))})
	if err, ok := resp.(error); !ok || !errors.Is(err, ErrOutOfSequence) {
		t.Fatalf("out of sequence: %v", resp)
	}
}

// Encode refuses a body it cannot carry; the leader then proposes nothing.
func TestEncodeRefuses(t *testing.T) {
	for name, c := range map[string]Command{
		"nil workload":            &UpdateDesiredStateRequest{Update: state.DesiredUpdate{PutWorkloads: map[string]*state.Workload{"w": nil}}},
		"rendering without body":  &UpdateDesiredStateRequest{Update: state.DesiredUpdate{PutRendered: map[string]state.Rendered{"w": {}}}},
		"config item of bad type": &UpdateDesiredStateRequest{Update: state.DesiredUpdate{PutConfigs: map[string]any{"c": 5}}},
		"invalid UTF-8 in a name": &AgentGoneRequest{Name: "\xff"},
	} {
		if _, err := Encode(c); !errors.Is(err, ErrBadCommand) {
			t.Errorf("%s: %v", name, err)
		}
	}
}

// FuzzDecode: any entry decodes or is refused with an error, a retired
// type too; none panics. What decodes encodes again, and that entry is
// stable from then on.
func FuzzDecode(f *testing.F) {
	for _, cmds := range []map[string]Command{goldenCommands(), historyGolden(), {"ProblemsChanged": problemsGolden()}, lockGolden(), removalGolden()} {
		for _, c := range cmds {
			buf, err := Encode(c)
			if err != nil {
				f.Fatal(err)
			}
			f.Add(buf)
		}
	}
	f.Add([]byte{byte(AgentLoadType)})
	f.Add([]byte{byte(IgnoreUnknownTypeFlag | 3), 1})
	f.Fuzz(func(t *testing.T, data []byte) {
		if len(data) > 0 && MessageType(data[0]) == BatchType {
			data = data[1:]
		}
		typ, c, err := Decode(data)
		if err != nil || c == nil {
			return
		}
		if c.Type() != typ {
			t.Fatalf("a %s entry decoded to a %s", typ, c.Type())
		}
		once, err := Encode(c)
		if err != nil {
			t.Fatalf("a decoded %s does not encode: %v", typ, err)
		}
		_, c2, err := Decode(once)
		if err != nil {
			t.Fatalf("an encoded %s does not decode: %v", typ, err)
		}
		if twice := mustEncode(t, c2); !bytes.Equal(once, twice) {
			t.Fatalf("%s: the entry changed on a second round", typ)
		}
		// Apply halts instead of panicking; on a decoded entry it does not halt.
		if h := New().Apply(&raft.Log{Index: 1, Type: raft.LogCommand, Data: once}); h != nil {
			if _, halted := h.(*HaltError); halted {
				t.Fatalf("a decoded entry halted the FSM: %v", h)
			}
		}
	})
}
