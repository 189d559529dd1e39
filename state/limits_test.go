package state

import (
	"errors"
	"fmt"
	"math/rand"
	"strings"
	"testing"
)

// Each limit refuses a value one over it, names the field, the limit and
// the value, and accepts the value at it.
func TestLimitsNameFieldLimitAndValue(t *testing.T) {
	l := Limits{MaxConfigDepth: 3, MaxStringBytes: 10, MaxConfigItemBytes: 60, MaxWorkloads: 2, MaxConfigItems: 2, MaxWorkloadBytes: 200}
	wl := func(rc string) *Workload { return &Workload{Runtime: "p", Agent: "a", RuntimeConfig: rc} }
	cases := []struct {
		name     string
		s        State
		counts   bool
		ok       bool
		path     string
		limit    string
		mentions string
	}{
		{"depth at the limit", State{Configs: map[string]any{"c": []any{[]any{"x"}}}}, false, true, "", "", ""},
		{"depth over the limit", State{Configs: map[string]any{"c": []any{[]any{[]any{"x"}}}}}, false, false, "desiredState.configs.c.0.0.0", "max_config_depth", "is 4"},
		{"map depth over the limit", State{Configs: map[string]any{"c": map[string]any{"a": map[string]any{"b": map[string]any{"d": "x"}}}}}, false, false, "desiredState.configs.c.a.b.d", "max_config_depth", "is 4"},
		{"config string at the limit", State{Configs: map[string]any{"c": strings.Repeat("s", 10)}}, false, true, "", "", ""},
		{"config string over the limit", State{Configs: map[string]any{"c": []any{strings.Repeat("s", 11)}}}, false, false, "desiredState.configs.c.0", "max_string_bytes", "is 11"},
		{"config item over the limit", State{Configs: map[string]any{"c": []any{"aaaaaaaaaa", "bbbbbbbbbb", "cccccccccc"}}}, false, false, "desiredState.configs.c", "max_config_item_bytes", "more than the limit of 60"},
		{"runtimeConfig over the limit", State{Workloads: map[string]*Workload{"w": wl(strings.Repeat("r", 11))}}, false, false, "desiredState.workloads.w.runtimeConfig", "max_string_bytes", "is 11"},
		{"file over the limit", State{Workloads: map[string]*Workload{"w": {Runtime: "p", Files: []File{{MountPoint: "/m", Content: strings.Repeat("f", 11)}}}}}, false, false, "desiredState.workloads.w.files.0", "max_string_bytes", "is 11"},
		{"tag over the limit", State{Workloads: map[string]*Workload{"w": {Runtime: "p", Tags: map[string]string{"t": strings.Repeat("t", 11)}}}}, false, false, "desiredState.workloads.w.tags.t", "max_string_bytes", "is 11"},
		{"workload over the limit", State{Workloads: map[string]*Workload{"w": {Runtime: "p", Tags: map[string]string{"a": "1", "b": "2", "c": "3", "d": "4", "e": "5", "f": "6", "g": "7", "h": "8"}}}}, false, false, "desiredState.workloads.w", "max_workload_bytes", "more than the limit of 200"},
		{"workloads at the limit", State{Workloads: map[string]*Workload{"a": wl("x"), "b": wl("y")}}, true, true, "", "", ""},
		{"too many workloads", State{Workloads: map[string]*Workload{"a": wl("x"), "b": wl("y"), "c": wl("z")}}, true, false, "desiredState.workloads", "max_workloads", "is 3"},
		{"too many config items", State{Configs: map[string]any{"a": "1", "b": "2", "c": "3"}}, true, false, "desiredState.configs", "max_config_items", "is 3"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			var err error
			if c.counts {
				err = c.s.CheckCounts(l)
			} else {
				err = c.s.CheckLimits(l)
			}
			if c.ok {
				if err != nil {
					t.Fatalf("refused: %v", err)
				}
				return
			}
			var fe *FieldError
			if !errors.As(err, &fe) || !errors.Is(err, ErrLimit) || !errors.Is(err, ErrInvalid) {
				t.Fatalf("error %v (%T), want a limit FieldError", err, err)
			}
			if fe.Path != c.path || !strings.Contains(fe.Reason, c.limit) || !strings.Contains(fe.Reason, c.mentions) {
				t.Fatalf("error %q, want path %q naming %q and %q", err, c.path, c.limit, c.mentions)
			}
		})
	}
	if err := (State{Configs: map[string]any{"c": []any{[]any{[]any{"x"}}}}}).CheckLimits(Limits{}); err != nil {
		t.Fatalf("zero limits refuse: %v", err)
	}
}

// The store's usage, kept up to date update by update, always equals a
// count from scratch: the budgets the leader checks never drift.
func TestUsageFollowsUpdates(t *testing.T) {
	rng := rand.New(rand.NewSource(3))
	s := NewStore()
	s.DesiredBytes() // start keeping usage
	agents := []string{"a", "b", ""}
	for i := range 400 {
		u := &DesiredUpdate{}
		n := fmt.Sprintf("w%d", rng.Intn(12))
		k := fmt.Sprintf("c%d", rng.Intn(6))
		switch rng.Intn(4) {
		case 0, 1:
			w := &Workload{Runtime: "p", Agent: agents[rng.Intn(3)], RuntimeConfig: strings.Repeat("r", rng.Intn(50))}
			u.PutWorkloads = map[string]*Workload{n: w}
			u.PutRendered = map[string]Rendered{n: {Instance: NewInstanceName(n, w.Agent, w.RuntimeConfig), Workload: w}}
			if rng.Intn(3) == 0 { // delete and put again in one update
				u.DeleteWorkloads, u.DeleteRendered = []string{n}, []string{n}
			}
		case 2:
			u.DeleteWorkloads, u.DeleteRendered = []string{n}, []string{n}
		case 3:
			if rng.Intn(2) == 0 {
				u.PutConfigs = map[string]any{k: []any{strings.Repeat("v", rng.Intn(40))}}
			} else {
				u.DeleteConfigs = []string{k}
			}
		}
		s.ApplyDesired(u, uint64(i+1))
		want := newUsage(s.Desired, s.Rendered)
		if s.DesiredBytes() != want.desired {
			t.Fatalf("update %d: desired bytes %d, counted %d", i, s.DesiredBytes(), want.desired)
		}
		for _, a := range agents {
			if s.AgentBytes(a) != want.agents[a] {
				t.Fatalf("update %d: agent %q bytes %d, counted %d", i, a, s.AgentBytes(a), want.agents[a])
			}
		}
		if c := s.Clone(); c.DesiredBytes() != s.DesiredBytes() {
			t.Fatal("a clone lost the usage")
		}
	}
}
