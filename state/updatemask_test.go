package state

import (
	"errors"
	"fmt"
	"reflect"
	"strings"
	"testing"
)

func sampleState() State {
	return State{
		APIVersion: APIVersion,
		Workloads: map[string]*Workload{
			"nginx": {
				Agent: "agent_A", Runtime: "podman", RuntimeConfig: "image: nginx",
				RestartPolicy: RestartAlways,
				Tags:          map[string]string{"owner": "team-a"},
				Dependencies:  map[string]AddCondition{"api": AddCondRunning},
				Configs:       map[string]string{"web": "web"},
				Files:         []File{{MountPoint: "/etc/a", Content: "a"}},
			},
			"api": {Agent: "agent_B", Runtime: "podman", RuntimeConfig: "image: api", RestartPolicy: RestartNever, Tags: map[string]string{}},
		},
		Configs: map[string]any{
			"web":  map[string]any{"port": "80"},
			"list": []any{"a", "b"},
			"text": "hello",
		},
	}
}

func sampleTags() map[string]map[string]string {
	return map[string]map[string]string{
		"agent_A": {"zone": "a"},
		"agent_B": {},
	}
}

// deepCopyState copies s without sharing anything, to check that a call
// left its input alone.
func deepCopyState(s State) State {
	out := State{APIVersion: s.APIVersion, Workloads: map[string]*Workload{}, Configs: map[string]any{}}
	for k, w := range s.Workloads {
		out.Workloads[k] = w.Clone()
	}
	for k, v := range s.Configs {
		out.Configs[k] = CloneValue(v)
	}
	return out
}

func withWorkload(s State, name string, w *Workload) State {
	s = deepCopyState(s)
	if w == nil {
		delete(s.Workloads, name)
	} else {
		s.Workloads[name] = w
	}
	return s
}

func editWorkload(name string, edit func(*Workload)) State {
	s := sampleState()
	edit(s.Workloads[name])
	return s
}

func withTags(agent string, tags map[string]string) map[string]map[string]string {
	t := sampleTags()
	t[agent] = tags
	return t
}

// swdd~update-desired-state-empty-update-mask~1
// swdd~update-desired-state-with-update-mask~1
func TestApplyUpdateMask(t *testing.T) {
	newWorkload := tmap{"agent": "agent_C", "runtime": "podman", "runtimeConfig": "image: new", "tags": tmap{"owner": "team-c"}}
	decodedNew := &Workload{Agent: "agent_C", Runtime: "podman", RuntimeConfig: "image: new", RestartPolicy: RestartNever,
		Tags: map[string]string{"owner": "team-c"}, Configs: map[string]string{}}
	tests := []struct {
		name     string
		cur      *State // sampleState() when nil
		newState Tree
		masks    []string
		want     State
		wantTags map[string]map[string]string
		wantErr  string // substring of the error; "" for success
	}{
		// swdd~update-desired-state-empty-update-mask~1
		{
			name: "empty mask replaces the desired state as a whole",
			newState: Tree{
				"desiredState": tmap{"apiVersion": "v1", "workloads": tmap{"new": newWorkload}},
				"agents": tmap{
					"agent_A": tmap{"tags": tmap{"zone": "b", "rack": int64(7)}},
					"agent_X": tmap{"tags": tmap{"zone": "x"}}, // not connected: ignored
				},
			},
			want:     State{APIVersion: "v1", Workloads: map[string]*Workload{"new": decodedNew}, Configs: map[string]any{}},
			wantTags: withTags("agent_A", map[string]string{"zone": "b", "rack": "7"}),
		},
		{
			name:     "empty mask without agents keeps the tags",
			newState: Tree{"desiredState": tmap{"apiVersion": "v1"}},
			want:     State{APIVersion: "v1", Workloads: map[string]*Workload{}, Configs: map[string]any{}},
			wantTags: sampleTags(),
		},
		{
			name:     "empty mask with an empty request empties the desired state",
			newState: Tree{},
			want:     State{Workloads: map[string]*Workload{}, Configs: map[string]any{}},
			wantTags: sampleTags(),
		},
		{
			name:     "empty mask reports decoding errors with their field",
			newState: Tree{"desiredState": tmap{"workloads": tmap{"w": tmap{"runtime": "podman"}}}},
			wantErr:  "desiredState.workloads.w.runtimeConfig: missing field",
		},
		{
			name:     "empty mask rejects bad tags of a connected agent",
			newState: Tree{"agents": tmap{"agent_B": tmap{"tags": tmap{"k": tmap{}}}}},
			wantErr:  "agents.agent_B.tags.k: expected a string",
		},
		// swdd~update-desired-state-with-update-mask~1
		{
			name:     "add one workload",
			newState: Tree{"desiredState": tmap{"workloads": tmap{"new": newWorkload}}},
			masks:    []string{"desiredState.workloads.new"},
			want:     withWorkload(sampleState(), "new", decodedNew),
			wantTags: sampleTags(),
		},
		{
			name:     "delete a workload absent from the new state (ank delete)",
			newState: Tree{},
			masks:    []string{"desiredState.workloads.nginx"},
			want:     withWorkload(sampleState(), "nginx", nil),
			wantTags: sampleTags(),
		},
		{
			name:     "deleting a workload that exists nowhere is a no-op",
			newState: Tree{},
			masks:    []string{"desiredState.workloads.ghost", "desiredState.workloads.ghost.agent", "desiredState.configs.ghost.deep"},
			want:     sampleState(),
			wantTags: sampleTags(),
		},
		{
			name:     "replace one field of a workload",
			newState: Tree{"desiredState": tmap{"workloads": tmap{"nginx": tmap{"agent": "agent_B"}}}},
			masks:    []string{"desiredState.workloads.nginx.agent"},
			want:     editWorkload("nginx", func(w *Workload) { w.Agent = "agent_B" }),
			wantTags: sampleTags(),
		},
		{
			name:     "create a missing tag of a workload",
			newState: Tree{"desiredState": tmap{"workloads": tmap{"nginx": tmap{"tags": tmap{"team": "blue"}}}}},
			masks:    []string{"desiredState.workloads.nginx.tags.team"},
			want:     editWorkload("nginx", func(w *Workload) { w.Tags["team"] = "blue" }),
			wantTags: sampleTags(),
		},
		{
			name:     "remove a tag of a workload",
			newState: Tree{},
			masks:    []string{"desiredState.workloads.nginx.tags.owner"},
			want:     editWorkload("nginx", func(w *Workload) { w.Tags = map[string]string{} }),
			wantTags: sampleTags(),
		},
		{
			name:     "remove a file of a workload by index",
			newState: Tree{},
			masks:    []string{"desiredState.workloads.nginx.files.0"},
			want:     editWorkload("nginx", func(w *Workload) { w.Files = []File{} }),
			wantTags: sampleTags(),
		},
		{
			name:     "a field of a workload that does not exist yet is not enough to make one",
			newState: Tree{"desiredState": tmap{"workloads": tmap{"fresh": tmap{"agent": "agent_A"}}}},
			masks:    []string{"desiredState.workloads.fresh.agent"},
			wantErr:  "desiredState.workloads.fresh.runtime: missing field",
		},
		{
			name: "fields of a new workload build it",
			newState: Tree{"desiredState": tmap{"workloads": tmap{"fresh": tmap{
				"agent": "agent_A", "runtime": "podman", "runtimeConfig": "image: fresh"}}}},
			masks: []string{"desiredState.workloads.fresh.runtime", "desiredState.workloads.fresh.runtimeConfig", "desiredState.workloads.fresh.agent"},
			want: withWorkload(sampleState(), "fresh", &Workload{Agent: "agent_A", Runtime: "podman", RuntimeConfig: "image: fresh",
				RestartPolicy: RestartNever, Tags: map[string]string{}, Configs: map[string]string{}}),
			wantTags: sampleTags(),
		},
		{
			name:     "a string field cannot take sub-fields",
			newState: Tree{"desiredState": tmap{"workloads": tmap{"nginx": tmap{"agent": tmap{"x": "y"}}}}},
			masks:    []string{"desiredState.workloads.nginx.agent.x"},
			wantErr:  "desiredState.workloads.nginx.agent.x: cannot set field: desiredState.workloads.nginx.agent is a string, not a map",
		},
		{
			name:     "decoding errors keep the field path",
			newState: Tree{"desiredState": tmap{"workloads": tmap{"nginx": tmap{"restartPolicy": "SOMETIMES"}}}},
			masks:    []string{"desiredState.workloads.nginx.restartPolicy"},
			wantErr:  "desiredState.workloads.nginx.restartPolicy: unknown restart policy 'SOMETIMES'",
		},
		{
			name:     "replace all workloads",
			newState: Tree{"desiredState": tmap{"workloads": tmap{"new": newWorkload}}},
			masks:    []string{"desiredState.workloads"},
			want:     State{APIVersion: "v1", Workloads: map[string]*Workload{"new": decodedNew}, Configs: sampleState().Configs},
			wantTags: sampleTags(),
		},
		{
			name:     "remove all workloads",
			newState: Tree{"desiredState": tmap{}},
			masks:    []string{"desiredState.workloads"},
			want:     State{APIVersion: "v1", Workloads: map[string]*Workload{}, Configs: sampleState().Configs},
			wantTags: sampleTags(),
		},
		{
			name:     "whole desired state through a mask",
			newState: Tree{"desiredState": tmap{"apiVersion": "v1", "configs": tmap{"k": "v"}}},
			masks:    []string{"desiredState"},
			want:     State{APIVersion: "v1", Workloads: map[string]*Workload{}, Configs: map[string]any{"k": "v"}},
			wantTags: sampleTags(),
		},
		{
			name:     "removing the desired state empties it",
			newState: Tree{},
			masks:    []string{"desiredState"},
			want:     State{Workloads: map[string]*Workload{}, Configs: map[string]any{}},
			wantTags: sampleTags(),
		},
		{
			name:     "apiVersion set",
			newState: Tree{"desiredState": tmap{"apiVersion": "v0.1"}},
			masks:    []string{"desiredState.apiVersion"},
			want:     State{APIVersion: "v0.1", Workloads: sampleState().Workloads, Configs: sampleState().Configs},
			wantTags: sampleTags(),
		},
		{
			name:     "apiVersion removed",
			newState: Tree{},
			masks:    []string{"desiredState.apiVersion"},
			want:     State{Workloads: sampleState().Workloads, Configs: sampleState().Configs},
			wantTags: sampleTags(),
		},
		{
			name:     "apiVersion must be a string",
			newState: Tree{"desiredState": tmap{"apiVersion": int64(1)}},
			masks:    []string{"desiredState.apiVersion"},
			wantErr:  "desiredState.apiVersion: expected a string, got a number",
		},
		{
			name:     "config item set and normalised",
			newState: Tree{"desiredState": tmap{"configs": tmap{"port": int64(8080)}}},
			masks:    []string{"desiredState.configs.port"},
			want: func() State {
				s := sampleState()
				s.Configs["port"] = "8080"
				return s
			}(),
			wantTags: sampleTags(),
		},
		{
			name:     "config item created with its parents",
			newState: Tree{"desiredState": tmap{"configs": tmap{"new": tmap{"nested": tmap{"deep": true}}}}},
			masks:    []string{"desiredState.configs.new.nested.deep"},
			want: func() State {
				s := sampleState()
				s.Configs["new"] = map[string]any{"nested": map[string]any{"deep": "true"}}
				return s
			}(),
			wantTags: sampleTags(),
		},
		{
			name:     "config list element replaced",
			newState: Tree{"desiredState": tmap{"configs": tmap{"list": []any{"x", "z"}}}},
			masks:    []string{"desiredState.configs.list.1"},
			want: func() State {
				s := sampleState()
				s.Configs["list"] = []any{"a", "z"}
				return s
			}(),
			wantTags: sampleTags(),
		},
		{
			name:     "config list element beyond the end",
			newState: Tree{"desiredState": tmap{"configs": tmap{"list": []any{"a", "b", "c"}}}},
			masks:    []string{"desiredState.configs.list.2"},
			wantErr:  "desiredState.configs.list.2: cannot set field: desiredState.configs.list is a list and '2' is not an index in it",
		},
		{
			name:     "config sub-field removed",
			newState: Tree{},
			masks:    []string{"desiredState.configs.web.port"},
			want: func() State {
				s := sampleState()
				s.Configs["web"] = map[string]any{}
				return s
			}(),
			wantTags: sampleTags(),
		},
		{
			name:     "configs replaced and removed",
			newState: Tree{"desiredState": tmap{"configs": tmap{"a": []any{"x", int64(1)}}}},
			masks:    []string{"desiredState.configs", "desiredState.configs.text"},
			want:     State{APIVersion: "v1", Workloads: sampleState().Workloads, Configs: map[string]any{"a": []any{"x", "1"}}},
			wantTags: sampleTags(),
		},
		{
			name:     "config items must be strings, lists or maps",
			newState: Tree{"desiredState": tmap{"configs": tmap{"bad": []any{nil}}}},
			masks:    []string{"desiredState.configs.bad"},
			wantErr:  "desiredState.configs.bad.0: expected a string, got nothing",
		},
		{
			name:     "unknown field of the desired state",
			newState: Tree{"desiredState": tmap{"foo": "bar"}},
			masks:    []string{"desiredState.foo"},
			wantErr:  "desiredState.foo: unknown field",
		},
		{
			name:     "removing an unknown field of the desired state is a no-op",
			newState: Tree{},
			masks:    []string{"desiredState.foo"},
			want:     sampleState(),
			wantTags: sampleTags(),
		},
		// Agent tags.
		{
			name:     "agent tags replaced as a whole",
			newState: Tree{"agents": tmap{"agent_A": tmap{"tags": tmap{"zone": "b", "rack": "r1"}}}},
			masks:    []string{"agents.agent_A.tags"},
			want:     sampleState(),
			wantTags: withTags("agent_A", map[string]string{"zone": "b", "rack": "r1"}),
		},
		{
			name:     "agent tags removed as a whole",
			newState: Tree{},
			masks:    []string{"agents.agent_A.tags"},
			want:     sampleState(),
			wantTags: withTags("agent_A", map[string]string{}),
		},
		{
			name:     "one agent tag added",
			newState: Tree{"agents": tmap{"agent_B": tmap{"tags": tmap{"rack": "r2"}}}},
			masks:    []string{"agents.agent_B.tags.rack"},
			want:     sampleState(),
			wantTags: withTags("agent_B", map[string]string{"rack": "r2"}),
		},
		{
			name:     "one agent tag removed",
			newState: Tree{},
			masks:    []string{"agents.agent_A.tags.zone"},
			want:     sampleState(),
			wantTags: withTags("agent_A", map[string]string{}),
		},
		{
			name:     "tags of an agent that is not connected are ignored",
			newState: Tree{"agents": tmap{"agent_X": tmap{"tags": tmap{"zone": "x"}}}},
			masks:    []string{"agents.agent_X.tags", "agents.agent_X.tags.zone"},
			want:     sampleState(),
			wantTags: sampleTags(),
		},
		{
			name:     "agent tags must be strings",
			newState: Tree{"agents": tmap{"agent_A": tmap{"tags": tmap{"zone": tmap{"x": "y"}}}}},
			masks:    []string{"agents.agent_A.tags.zone.x"},
			wantErr:  "agents.agent_A.tags.zone.x: cannot set field: agents.agent_A.tags.zone is a string, not a map",
		},
		{
			name: "other roots are ignored",
			newState: Tree{
				"workloadStates": tmap{"agent_A": tmap{}},
				"agents":         tmap{"agent_A": tmap{"status": tmap{"cpuUsage": int64(1)}, "tags": tmap{"zone": "q"}}},
				"effectiveState": tmap{},
			},
			masks:    []string{"workloadStates", "workloadStates.agent_A", "agents.agent_A.status", "agents.agent_A", "agents", "effectiveState", "whatever.x"},
			want:     sampleState(),
			wantTags: sampleTags(),
		},
		{
			name:     "wildcards are rejected",
			newState: Tree{},
			masks:    []string{"desiredState.workloads.nginx", "desiredState.workloads.*"},
			wantErr:  "desiredState.workloads.*: wildcards are not allowed in update masks",
		},
		{
			name:     "wildcards are rejected under ignored roots too",
			newState: Tree{},
			masks:    []string{"workloadStates.*"},
			wantErr:  "workloadStates.*: wildcards are not allowed",
		},
		{
			name:     "empty segments are rejected",
			newState: Tree{},
			masks:    []string{"desiredState..workloads"},
			wantErr:  "desiredState..workloads: update mask has an empty segment",
		},
		{
			name:     "empty mask entries are rejected",
			newState: Tree{},
			masks:    []string{""},
			wantErr:  "an update mask entry must not be empty",
		},
		{
			name:     "masks apply in order",
			newState: Tree{"desiredState": tmap{"workloads": tmap{"nginx": tmap{"agent": "agent_C"}}}},
			masks:    []string{"desiredState.workloads.nginx", "desiredState.workloads.nginx.agent"},
			wantErr:  "desiredState.workloads.nginx.runtime: missing field",
		},
		{
			name: "legacy tag format survives a field update",
			cur: func() *State {
				s := sampleState()
				s.APIVersion = APIVersionLegacy
				return &s
			}(),
			newState: Tree{"desiredState": tmap{"workloads": tmap{"nginx": tmap{"agent": "agent_B"}}}},
			masks:    []string{"desiredState.workloads.nginx.agent"},
			want: func() State {
				s := editWorkload("nginx", func(w *Workload) { w.Agent = "agent_B" })
				s.APIVersion = APIVersionLegacy
				return s
			}(),
			wantTags: sampleTags(),
		},
		{
			name: "legacy tag list is decoded when the request says v0.1",
			newState: Tree{"desiredState": tmap{"apiVersion": "v0.1", "workloads": tmap{"new": tmap{
				"runtime": "podman", "runtimeConfig": "", "tags": []any{tmap{"key": "owner", "value": "me"}}}}}},
			masks: []string{"desiredState.workloads.new"},
			want: withWorkload(sampleState(), "new", &Workload{Runtime: "podman", RestartPolicy: RestartNever,
				Tags: map[string]string{"owner": "me"}, Configs: map[string]string{}}),
			wantTags: sampleTags(),
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			cur := sampleState()
			if tt.cur != nil {
				cur = *tt.cur
			}
			curTags := sampleTags()
			curBefore, tagsBefore, newBefore := deepCopyState(cur), sampleTags(), CloneValue(tt.newState)

			got, gotTags, err := ApplyUpdateMask(cur, curTags, tt.newState, tt.masks)

			if !reflect.DeepEqual(cur, curBefore) || !reflect.DeepEqual(curTags, tagsBefore) {
				t.Fatal("ApplyUpdateMask changed the current state or tags")
			}
			if !reflect.DeepEqual(tt.newState, newBefore) && !(tt.newState == nil && newBefore == nil) {
				t.Fatal("ApplyUpdateMask changed the request")
			}
			if tt.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
					t.Fatalf("err = %v, want it to contain %q", err, tt.wantErr)
				}
				var fe *FieldError
				if !errors.Is(err, ErrInvalid) || !errors.As(err, &fe) {
					t.Fatalf("err %v is not a *FieldError wrapping ErrInvalid", err)
				}
				return
			}
			if err != nil {
				t.Fatalf("unexpected error: %v", err)
			}
			if !reflect.DeepEqual(got, tt.want) {
				t.Fatalf("state:\n got %s\nwant %s", describeState(got), describeState(tt.want))
			}
			if !reflect.DeepEqual(gotTags, tt.wantTags) {
				t.Fatalf("tags = %v, want %v", gotTags, tt.wantTags)
			}
		})
	}
}

func describeState(s State) string {
	var b strings.Builder
	fmt.Fprintf(&b, "apiVersion=%q configs=%v", s.APIVersion, s.Configs)
	for _, k := range SortedKeys(s.Workloads) {
		fmt.Fprintf(&b, "\n  %s: %+v", k, *s.Workloads[k])
	}
	return b.String()
}

// swdd~update-desired-state-with-update-mask~1
func TestApplyUpdateMaskOwnsItsResult(t *testing.T) {
	cur, curTags := sampleState(), sampleTags()
	newState := Tree{"desiredState": tmap{"configs": tmap{"web": tmap{"port": "81"}}}}
	got, gotTags, err := ApplyUpdateMask(cur, curTags, newState, []string{"desiredState.configs.web.port"})
	if err != nil {
		t.Fatal(err)
	}
	if got.Workloads["api"] != cur.Workloads["api"] {
		t.Error("an unchanged workload should be shared, not copied")
	}
	got.Workloads["extra"] = &Workload{}
	delete(got.Configs, "text")
	gotTags["agent_A"]["zone"] = "changed"
	if _, ok := cur.Workloads["extra"]; ok {
		t.Error("the result's workload map is the current one")
	}
	if _, ok := cur.Configs["text"]; !ok {
		t.Error("the result's config map is the current one")
	}
	if curTags["agent_A"]["zone"] != "a" {
		t.Error("the result's tags are the current ones")
	}
	if cur.Configs["web"].(map[string]any)["port"] != "80" {
		t.Error("the current config item was edited in place")
	}
	// The request's subtree is copied, not kept.
	newState["desiredState"].(tmap)["configs"].(tmap)["web"].(tmap)["port"] = "99"
	if got.Configs["web"].(map[string]any)["port"] != "81" {
		t.Error("the result shares a config item with the request")
	}
}

// bigState has n workloads.
func bigState(n int) State {
	s := State{APIVersion: APIVersion, Workloads: make(map[string]*Workload, n), Configs: map[string]any{"c": "v"}}
	for i := 0; i < n; i++ {
		s.Workloads[fmt.Sprintf("wl-%d", i)] = &Workload{
			Agent: fmt.Sprintf("agent-%d", i%100), Runtime: "podman", RuntimeConfig: fmt.Sprintf("image: wl-%d", i),
			RestartPolicy: RestartNever, Tags: map[string]string{"owner": "x"},
		}
	}
	return s
}

func TestApplyUpdateMaskInBigState(t *testing.T) {
	cur := bigState(1000)
	newState := Tree{"desiredState": tmap{"workloads": tmap{"wl-500": tmap{"agent": "agent-new", "runtime": "podman", "runtimeConfig": "x"}}}}
	got, _, err := ApplyUpdateMask(cur, nil, newState, []string{"desiredState.workloads.wl-500"})
	if err != nil {
		t.Fatal(err)
	}
	if len(got.Workloads) != 1000 || got.Workloads["wl-500"].Agent != "agent-new" || cur.Workloads["wl-500"].Agent != "agent-0" {
		t.Fatalf("unexpected result: %d workloads, wl-500 on %q", len(got.Workloads), got.Workloads["wl-500"].Agent)
	}
	for name, w := range cur.Workloads {
		if name != "wl-500" && got.Workloads[name] != w {
			t.Fatalf("workload %s was copied although unchanged", name)
		}
	}
}

func BenchmarkApplyUpdateMaskOneWorkload(b *testing.B) {
	cur := bigState(10000)
	tags := map[string]map[string]string{"agent-1": {"zone": "a"}}
	b.Run("replace", func(b *testing.B) {
		newState := Tree{"desiredState": tmap{"workloads": tmap{"wl-5000": tmap{"agent": "agent-2", "runtime": "podman", "runtimeConfig": "image: new"}}}}
		masks := []string{"desiredState.workloads.wl-5000"}
		b.ReportAllocs()
		for i := 0; i < b.N; i++ {
			if _, _, err := ApplyUpdateMask(cur, tags, newState, masks); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("field", func(b *testing.B) {
		newState := Tree{"desiredState": tmap{"workloads": tmap{"wl-5000": tmap{"agent": "agent-2"}}}}
		masks := []string{"desiredState.workloads.wl-5000.agent"}
		b.ReportAllocs()
		for i := 0; i < b.N; i++ {
			if _, _, err := ApplyUpdateMask(cur, tags, newState, masks); err != nil {
				b.Fatal(err)
			}
		}
	})
}
