package state

import (
	"reflect"
	"testing"
)

// Equal agrees with comparing the manifest trees on every pair of a set
// of workloads that differ in one field each, or only in forms the
// manifest does not distinguish.
func TestWorkloadEqualMatchesTrees(t *testing.T) {
	base := func() *Workload {
		return &Workload{Agent: "a", Runtime: "podman", RuntimeConfig: "image: x", RestartPolicy: RestartAlways,
			Tags: map[string]string{"k": "v"}, Dependencies: map[string]AddCondition{"db": AddCondRunning},
			Configs: map[string]string{"c": "cfg"}, Files: []File{{MountPoint: "/f", Content: "x"}},
			ControlInterfaceAccess: ControlInterfaceAccess{
				AllowRules: []AccessRule{{Operation: RWNothing, FilterMasks: []string{"desiredState"}}},
				DenyRules:  []AccessRule{{IsLogRule: true, WorkloadNames: []string{"w"}}},
			}}
	}
	edits := map[string]func(w *Workload){
		"same":                   func(w *Workload) {},
		"agent":                  func(w *Workload) { w.Agent = "b" },
		"runtime":                func(w *Workload) { w.Runtime = "process" },
		"runtimeConfig":          func(w *Workload) { w.RuntimeConfig = "image: y" },
		"restart policy":         func(w *Workload) { w.RestartPolicy = RestartNever },
		"tag value":              func(w *Workload) { w.Tags["k"] = "w" },
		"no tags":                func(w *Workload) { w.Tags = nil },
		"dependency":             func(w *Workload) { w.Dependencies["db"] = AddCondSucceeded },
		"config alias":           func(w *Workload) { w.Configs = map[string]string{"d": "cfg"} },
		"file content":           func(w *Workload) { w.Files[0].Content = "y" },
		"file binary":            func(w *Workload) { w.Files[0].Binary = true },
		"no files":               func(w *Workload) { w.Files = nil },
		"rule operation":         func(w *Workload) { w.ControlInterfaceAccess.AllowRules[0].Operation = ReadWrite("Read") },
		"empty operation":        func(w *Workload) { w.ControlInterfaceAccess.AllowRules[0].Operation = "" },
		"filter masks":           func(w *Workload) { w.ControlInterfaceAccess.AllowRules[0].FilterMasks = []string{"x"} },
		"log rule names":         func(w *Workload) { w.ControlInterfaceAccess.DenyRules[0].WorkloadNames = nil },
		"log rule ignores masks": func(w *Workload) { w.ControlInterfaceAccess.DenyRules[0].FilterMasks = []string{"ignored"} },
		"rule kind":              func(w *Workload) { w.ControlInterfaceAccess.DenyRules[0].IsLogRule = false },
		"no rules":               func(w *Workload) { w.ControlInterfaceAccess = ControlInterfaceAccess{} },
	}
	var ws []*Workload
	var names []string
	for name, edit := range edits {
		w := base()
		edit(w)
		ws, names = append(ws, w), append(names, name)
	}
	// Forms the manifest does not tell apart.
	a, b := base(), base()
	a.RestartPolicy, b.RestartPolicy = "", RestartNever
	a.Tags, b.Tags = nil, map[string]string{}
	ws, names = append(ws, a, b), append(names, "empty policy, nil tags", "NEVER, empty tags")
	for i, x := range ws {
		for j, y := range ws {
			want := reflect.DeepEqual(x.ToTree(), y.ToTree())
			if got := x.Equal(y); got != want {
				t.Errorf("%q vs %q: Equal %v, trees equal %v", names[i], names[j], got, want)
			}
		}
	}
	if (*Workload)(nil).Equal(base()) || !(*Workload)(nil).Equal(nil) {
		t.Error("nil workloads")
	}
}
