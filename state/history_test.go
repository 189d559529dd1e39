package state

import (
	"reflect"
	"strings"
	"testing"
)

// Requirement (issue 15, point 1): an updated workload's transaction
// names the fields that changed, with their values before and after.
func TestWorkloadChanges(t *testing.T) {
	base := &Workload{Agent: "a", Runtime: "podman", RuntimeConfig: "image: x", Tags: map[string]string{"k": "v"}}
	with := func(fn func(w *Workload)) *Workload { w := base.Clone(); fn(w); return w }
	long := strings.Repeat("é", 300)
	tests := []struct {
		name     string
		old, new *Workload
		want     []FieldChange
	}{
		{"same", base, base.Clone(), nil},
		{"agent", base, with(func(w *Workload) { w.Agent = "b" }), []FieldChange{{Field: "agent", Old: "a", New: "b"}}},
		{"restart policy default is NEVER", base, with(func(w *Workload) { w.RestartPolicy = RestartNever }), nil},
		{"tags", base, with(func(w *Workload) { w.Tags = map[string]string{"k": "w"} }), []FieldChange{{Field: "tags", Old: `{"k":"v"}`, New: `{"k":"w"}`}}},
		{"files by name and size", base, with(func(w *Workload) { w.Files = []File{{MountPoint: "/f", Content: "abc"}} }),
			[]FieldChange{{Field: "files", New: "/f (3 bytes)"}}},
		{"long value shortened on a rune boundary", base, with(func(w *Workload) { w.RuntimeConfig = long }),
			[]FieldChange{{Field: "runtimeConfig", Old: "image: x", New: strings.Repeat("é", 128) + "… (600 bytes)"}}},
		{"added lists what it sets", nil, base, []FieldChange{{Field: "agent", New: "a"}, {Field: "tags", New: `{"k":"v"}`},
			{Field: "runtime", New: "podman"}, {Field: "runtimeConfig", New: "image: x"}}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if got := WorkloadChanges(tc.old, tc.new); !reflect.DeepEqual(got, tc.want) {
				t.Fatalf("got %+v\nwant %+v", got, tc.want)
			}
		})
	}
}

// A config change that renders a workload again is an update of that
// workload, even though its spec did not change.
func TestTxOfUpdateRerender(t *testing.T) {
	s := NewStore()
	w := &Workload{Agent: "a", RuntimeConfig: "{{c}}", Configs: map[string]string{"c": "k"}}
	i1, i2 := NewInstanceName("w", "a", "1"), NewInstanceName("w", "a", "2")
	s.ApplyDesired(&DesiredUpdate{PutWorkloads: map[string]*Workload{"w": w}, PutConfigs: map[string]any{"k": "1"},
		PutRendered: map[string]Rendered{"w": {Instance: i1, Workload: w}}}, 1)
	tx := TxOfUpdate(s, &DesiredUpdate{PutConfigs: map[string]any{"k": "2"}, PutRendered: map[string]Rendered{"w": {Instance: i2, Workload: w}}})
	want := &Tx{Kind: TxUpdate, Workloads: []TxWorkload{{Name: "w", Op: OpUpdated, Instance: i2.String(), OldInstance: i1.String(),
		Changes: []FieldChange{{Field: "rendering", Old: i1.String(), New: i2.String()}}}}, Configs: []TxConfig{{Key: "k", Op: OpUpdated}}}
	if !reflect.DeepEqual(tx, want) {
		t.Fatalf("got %+v\nwant %+v", tx, want)
	}
}
