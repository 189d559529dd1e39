package server

import (
	"bytes"
	"fmt"
	"strings"
	"testing"

	"github.com/grapnel-io/grapnel/fsm"
	"github.com/grapnel-io/grapnel/state"
)

// nested returns a config item nested depth levels deep: lists, or maps
// when maps is set.
func nested(depth int, maps bool) any {
	var v any = "leaf"
	for range depth - 1 {
		if maps {
			v = map[string]any{"k": v}
		} else {
			v = []any{v}
		}
	}
	return v
}

func wlTree(agent, runtimeConfig string, configs map[string]any, files ...any) map[string]any {
	w := map[string]any{"runtime": "podman", "agent": agent, "runtimeConfig": runtimeConfig}
	if configs != nil {
		w["configs"] = configs
	}
	if files != nil {
		w["files"] = files
	}
	return w
}

// Updates over a limit are refused before anything is proposed, each
// naming the field, the limit and the value; nothing is committed, the
// replica keeps serving, and a restart of it works. These are the inputs
// that took every replica down before the limits existed: a config
// nested 4,000 levels deep committed and then failed to decode on every
// replica, and templates looping over a large config rendered 60 MB
// into one Raft entry.
func TestOversizedUpdatesAreRefused(t *testing.T) {
	dir := t.TempDir()
	ts := startServerIn(t, dir, mustState(t, nginx))
	cli := ts.cli()
	lim := state.DefaultLimits()
	big := strings.Repeat("x", 1000)
	items := make([]any, 1000) // about 1 MB, under max_config_item_bytes
	for i := range items {
		items[i] = big
	}
	loopTwice := "{{#each c}}{{this}}{{this}}{{/each}}"
	loopOnce := "{{#each c}}{{this}}{{/each}}"
	manyLoops := map[string]any{}
	for i := range 60 {
		manyLoops[fmt.Sprintf("loop_%02d", i)] = wlTree("agent_A", loopOnce, map[string]any{"c": "items"})
	}
	cases := []struct {
		name  string
		tree  state.Tree
		masks []string
		want  []string
	}{
		{"4,000 nested lists", state.Tree{"desiredState": map[string]any{"configs": map[string]any{"deep": nested(4000, false)}}},
			[]string{"desiredState.configs.deep"}, []string{"desiredState.configs.deep", "max_config_depth", fmt.Sprint(lim.MaxConfigDepth + 1)}},
		{"3,000 nested maps", state.Tree{"desiredState": map[string]any{"configs": map[string]any{"deep": nested(3000, true)}}},
			[]string{"desiredState.configs.deep"}, []string{"desiredState.configs.deep", "max_config_depth"}},
		{"a 3.8 MB config item", state.Tree{"desiredState": map[string]any{"configs": map[string]any{"huge": strings.Repeat("y", 3_800_000)}}},
			[]string{"desiredState.configs.huge"}, []string{"desiredState.configs.huge", "max_string_bytes", "3800000"}},
		{"a template rendering 2 MB", state.Tree{"desiredState": map[string]any{
			"configs":   map[string]any{"items": items},
			"workloads": map[string]any{"loop": wlTree("agent_A", loopTwice, map[string]any{"c": "items"})}}},
			[]string{"desiredState.configs.items", "desiredState.workloads.loop"}, []string{"desiredState.workloads.loop.runtimeConfig", "max_workload_bytes"}},
		{"60 templates rendering 1 MB each", state.Tree{"desiredState": map[string]any{
			"configs": map[string]any{"items": items}, "workloads": manyLoops}},
			nil, []string{"max_update_bytes"}},
	}
	before := stateBytes(t, ts)
	count := countEntries(ts)
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			tree := c.tree
			if c.masks == nil {
				tree["desiredState"].(map[string]any)["apiVersion"] = state.APIVersion
			}
			r := cli.update(tree, c.masks...)
			msg := r.GetError().GetMessage()
			if msg == "" {
				t.Fatalf("not refused: %v", r.GetUpdateStateSuccess())
			}
			for _, w := range c.want {
				if !strings.Contains(msg, w) {
					t.Errorf("error %q does not mention %q", msg, w)
				}
			}
			if !bytes.Equal(before, stateBytes(t, ts)) {
				t.Fatal("a refused update changed the state")
			}
		})
	}
	// The refusals are in the history: HistoryNotes entries, nothing else.
	for typ := range 256 {
		if n := count(fsm.MessageType(typ)); n > 0 && fsm.MessageType(typ) != fsm.HistoryNotesType {
			t.Fatalf("refused updates committed %d entries of type %v", n, fsm.MessageType(typ))
		}
	}
	if r := cli.update(manifest(t, nginx), "desiredState.workloads.nginx"); r.GetUpdateStateSuccess() == nil {
		t.Fatalf("the replica stopped serving: %v", r)
	}
	want := snapshotBytes(t, ts)
	ts.stop()
	ts2 := startServerIn(t, dir, nil)
	if !bytes.Equal(want, snapshotBytes(t, ts2)) {
		t.Fatal("the state after a restart differs")
	}
	if r := ts2.cli().update(manifest(t, nginx), "desiredState.workloads.nginx"); r.GetUpdateStateSuccess() == nil {
		t.Fatalf("the restarted replica does not serve: %v", r)
	}
}

// The desired state and each agent's workloads have a budget, so that a
// complete state answer and an agent's ServerHello always fit a message:
// before it, two 3.8 MB configs made `get state` fail for good, and two
// workloads with 2.5 MB files on one agent kept that agent from ever
// connecting.
func TestStateBudgets(t *testing.T) {
	dir := t.TempDir()
	ts := startServerIn(t, dir, nil)
	cli := ts.cli()
	chunk := strings.Repeat("z", 900_000)
	var refused string
	for i := range 10 {
		key := fmt.Sprintf("part_%d", i)
		seq := func() (n uint64) { ts.store(func(s *state.Store) { n = s.DesiredSeq }); return n }
		before := seq()
		r := cli.update(state.Tree{"desiredState": map[string]any{"configs": map[string]any{key: chunk}}}, "desiredState.configs."+key)
		if msg := r.GetError().GetMessage(); msg != "" {
			refused = msg
			if seq() != before {
				t.Fatal("the refused update was applied")
			}
			break
		}
	}
	if !strings.Contains(refused, "max_desired_state_bytes") || !strings.Contains(refused, "desiredState") {
		t.Fatalf("the desired state grew past its budget without a clear refusal (last answer %q)", refused)
	}
	if cs := cli.get(); len(cs.GetDesiredState().GetConfigs().GetConfigs()) < 3 {
		t.Fatalf("get state after the refusal: %d configs", len(cs.GetDesiredState().GetConfigs().GetConfigs()))
	}
	if r := cli.update(state.Tree{}, "desiredState.configs"); r.GetUpdateStateSuccess() == nil {
		t.Fatalf("clearing the configs: %v", r)
	}

	// One config item of 900 kB, rendered into the file of every workload
	// on agent_A: the desired state stays small, the agent's share grows.
	if r := cli.update(state.Tree{"desiredState": map[string]any{"configs": map[string]any{"blob": chunk}}}, "desiredState.configs.blob"); r.GetUpdateStateSuccess() == nil {
		t.Fatalf("blob: %v", r)
	}
	refused = ""
	for i := range 10 {
		n := fmt.Sprintf("file_%d", i)
		w := wlTree("agent_A", "image: "+n, map[string]any{"b": "blob"}, map[string]any{"mountPoint": "/f", "data": "{{b}}"})
		r := cli.update(state.Tree{"desiredState": map[string]any{"workloads": map[string]any{n: w}}}, "desiredState.workloads."+n)
		if msg := r.GetError().GetMessage(); msg != "" {
			refused = msg
			break
		}
	}
	if !strings.Contains(refused, "max_agent_bytes") || !strings.Contains(refused, "agent_A") {
		t.Fatalf("agent_A's workloads grew past their budget without a clear refusal (last answer %q)", refused)
	}
	// The agent still connects: its ServerHello fits a message.
	ts.agent("agent_A", nil)
	want := snapshotBytes(t, ts)
	ts.stop()
	ts2 := startServerIn(t, dir, nil)
	if !bytes.Equal(want, snapshotBytes(t, ts2)) {
		t.Fatal("the state after a restart differs")
	}
	ts2.agent("agent_A", nil)
}

// A state over a limit that was lowered since can always shrink: only
// updates that grow it past the limit are refused.
func TestLoweredLimitLetsTheStateShrink(t *testing.T) {
	dir := t.TempDir()
	ts := startServerIn(t, dir, nil)
	cli := ts.cli()
	chunk := strings.Repeat("z", 500_000)
	for _, k := range []string{"a", "b", "c"} {
		if r := cli.update(state.Tree{"desiredState": map[string]any{"configs": map[string]any{k: chunk}}}, "desiredState.configs."+k); r.GetUpdateStateSuccess() == nil {
			t.Fatalf("config %s: %v", k, r)
		}
	}
	ts.stop()
	lower := state.DefaultLimits()
	lower.MaxDesiredStateBytes = 1_000_000
	ts2 := startServerCfg(t, dir, nil, func(c *Config) { c.Limits = &lower })
	cli2 := ts2.cli()
	r := cli2.update(state.Tree{"desiredState": map[string]any{"configs": map[string]any{"d": "small"}}}, "desiredState.configs.d")
	if !strings.Contains(r.GetError().GetMessage(), "max_desired_state_bytes") {
		t.Fatalf("growing a state over the lowered limit: %v", r)
	}
	if r := cli2.update(state.Tree{}, "desiredState.configs.a"); r.GetUpdateStateSuccess() == nil {
		t.Fatalf("shrinking a state over the lowered limit was refused: %v", r)
	}
}
