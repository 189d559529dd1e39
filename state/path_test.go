package state

import (
	"reflect"
	"testing"
)

func pathTree() Tree {
	return Tree{
		"a": map[string]any{
			"b":    map[string]any{"c": "leaf"},
			"list": []any{"x", map[string]any{"k": "v"}, "z"},
			"s":    "scalar",
		},
		"top": int64(1),
	}
}

func TestSplitMask(t *testing.T) {
	tests := []struct {
		mask string
		want []string
	}{
		{"", nil},
		{"a", []string{"a"}},
		{"a.b.c", []string{"a", "b", "c"}},
		{"a..b", []string{"a", "", "b"}},
		{"workloadStates.*.*.*.state", []string{"workloadStates", "*", "*", "*", "state"}},
	}
	for _, tt := range tests {
		if got := SplitMask(tt.mask); !reflect.DeepEqual(got, tt.want) {
			t.Errorf("SplitMask(%q) = %#v, want %#v", tt.mask, got, tt.want)
		}
	}
}

func TestGetPath(t *testing.T) {
	tests := []struct {
		path   string
		want   any
		wantOK bool
	}{
		{"a.b.c", "leaf", true},
		{"a.b", map[string]any{"c": "leaf"}, true},
		{"top", int64(1), true},
		{"a.list.0", "x", true},
		{"a.list.1.k", "v", true},
		{"a.list.2", "z", true},
		{"a.list.3", nil, false},  // out of range
		{"a.list.01", nil, false}, // leading zero is not an index
		{"a.list.-1", nil, false},
		{"a.list.+1", nil, false},
		{"a.list.x", nil, false},
		{"a.s.deeper", nil, false}, // through a scalar
		{"missing", nil, false},
		{"a.b.c.d", nil, false},
	}
	tr := pathTree()
	for _, tt := range tests {
		got, ok := GetPath(tr, SplitMask(tt.path))
		if ok != tt.wantOK || !reflect.DeepEqual(got, tt.want) {
			t.Errorf("GetPath(%q) = %v, %v; want %v, %v", tt.path, got, ok, tt.want, tt.wantOK)
		}
	}
	if got, ok := GetPath(tr, nil); !ok || !reflect.DeepEqual(got, tr) {
		t.Errorf("GetPath(empty path) should return the tree itself")
	}
}

func TestSetPath(t *testing.T) {
	tests := []struct {
		name string
		path string
		v    any
		want func(Tree)
	}{
		{"replace leaf", "a.b.c", "new", func(w Tree) { w["a"].(map[string]any)["b"].(map[string]any)["c"] = "new" }},
		{"create parents", "x.y.z", "new", func(w Tree) {
			w["x"] = map[string]any{"y": map[string]any{"z": "new"}}
		}},
		{"create under existing map", "a.b.d.e", int64(2), func(w Tree) {
			w["a"].(map[string]any)["b"].(map[string]any)["d"] = map[string]any{"e": int64(2)}
		}},
		{"list element", "a.list.1.k", "w", func(w Tree) {
			w["a"].(map[string]any)["list"].([]any)[1].(map[string]any)["k"] = "w"
		}},
		{"whole list element", "a.list.0", "y", func(w Tree) { w["a"].(map[string]any)["list"].([]any)[0] = "y" }},
		{"scalar parent replaced by a map", "a.s.t", "v", func(w Tree) {
			w["a"].(map[string]any)["s"] = map[string]any{"t": "v"}
		}},
		{"list without that index replaced by a map", "a.list.7", "v", func(w Tree) {
			w["a"].(map[string]any)["list"] = map[string]any{"7": "v"}
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, want := pathTree(), pathTree()
			SetPath(got, SplitMask(tt.path), tt.v)
			tt.want(want)
			if !reflect.DeepEqual(got, want) {
				t.Fatalf("SetPath(%q):\n got %v\nwant %v", tt.path, got, want)
			}
			if v, ok := GetPath(got, SplitMask(tt.path)); !ok || !reflect.DeepEqual(v, tt.v) {
				t.Fatalf("GetPath after SetPath(%q) = %v, %v", tt.path, v, ok)
			}
		})
	}
	t.Run("nil tree and empty path are no-ops", func(t *testing.T) {
		SetPath(nil, []string{"a"}, "x") // must not panic
		tr := pathTree()
		SetPath(tr, nil, "x")
		if !reflect.DeepEqual(tr, pathTree()) {
			t.Fatal("SetPath with an empty path changed the tree")
		}
	})
}

func TestRemovePath(t *testing.T) {
	tests := []struct {
		name   string
		path   string
		wantOK bool
		want   func(Tree)
	}{
		{"leaf", "a.b.c", true, func(w Tree) { delete(w["a"].(map[string]any)["b"].(map[string]any), "c") }},
		{"subtree", "a.b", true, func(w Tree) { delete(w["a"].(map[string]any), "b") }},
		{"list element shifts the rest", "a.list.0", true, func(w Tree) {
			w["a"].(map[string]any)["list"] = []any{map[string]any{"k": "v"}, "z"}
		}},
		{"inside a list element", "a.list.1.k", true, func(w Tree) {
			w["a"].(map[string]any)["list"].([]any)[1] = map[string]any{}
		}},
		{"missing leaf", "a.b.nope", false, func(Tree) {}},
		{"missing parent", "nope.b", false, func(Tree) {}},
		{"through a scalar", "a.s.t", false, func(Tree) {}},
		{"index out of range", "a.list.3", false, func(Tree) {}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, want := pathTree(), pathTree()
			ok := RemovePath(got, SplitMask(tt.path))
			tt.want(want)
			if ok != tt.wantOK || !reflect.DeepEqual(got, want) {
				t.Fatalf("RemovePath(%q) = %v:\n got %v\nwant %v (%v)", tt.path, ok, got, want, tt.wantOK)
			}
		})
	}
	t.Run("removing a list element leaves other holders of the slice alone", func(t *testing.T) {
		tr := pathTree()
		list := tr["a"].(map[string]any)["list"].([]any)
		RemovePath(tr, SplitMask("a.list.0"))
		if list[0] != "x" || len(list) != 3 {
			t.Fatalf("the old slice changed: %v", list)
		}
	})
}

// swdd~server-filters-get-complete-state-result-with-wildcards~1
func TestExpandWildcards(t *testing.T) {
	tr := sampleTree()
	tests := []struct {
		mask string
		want []string
	}{
		{"workloadStates.*.*.*.state", []string{
			"workloadStates.agent_A.nginx.id-1.state",
			"workloadStates.agent_B.api.id-2.state",
			"workloadStates.agent_B.nginx.id-3.state",
		}},
		{"desiredState.workloads.*.tags.owner", []string{
			"desiredState.workloads.api.tags.owner",
			"desiredState.workloads.nginx.tags.owner",
		}},
		{"desiredState.workloads.*", []string{
			"desiredState.workloads.api",
			"desiredState.workloads.nginx",
			"desiredState.workloads.sidecar",
		}},
		{"desiredState.workloads.nginx.files.*.mountPoint", []string{
			"desiredState.workloads.nginx.files.0.mountPoint",
			"desiredState.workloads.nginx.files.1.mountPoint",
		}},
		{"*.agent_A", []string{"agents.agent_A", "workloadStates.agent_A"}},
		{"desiredState.apiVersion.*", nil}, // a scalar has no keys
		{"desiredState.workloads.nginx", []string{"desiredState.workloads.nginx"}},
		{"desiredState.workloads.ghost", nil},
		{"desiredState.workloads.*.ghost", nil},
		{"", nil},
	}
	for _, tt := range tests {
		if got := ExpandWildcards(tr, tt.mask); !reflect.DeepEqual(got, tt.want) {
			t.Errorf("ExpandWildcards(%q) = %#v, want %#v", tt.mask, got, tt.want)
		}
	}
}
