package rpc

import (
	"reflect"
	"sort"
	"testing"

	"google.golang.org/protobuf/proto"

	"github.com/grapnel-io/grapnel/rpc/ankbase"
	"github.com/grapnel-io/grapnel/state"
)

// keyPaths lists every map key of t, parents before children, in a fixed
// order. A step is a map key (string) or a list index (int).
func keyPaths(v any, prefix []any, out *[][]any) {
	switch x := v.(type) {
	case map[string]any:
		keys := make([]string, 0, len(x))
		for k := range x {
			keys = append(keys, k)
		}
		sort.Strings(keys)
		for _, k := range keys {
			p := append(append([]any{}, prefix...), k)
			*out = append(*out, p)
			keyPaths(x[k], p, out)
		}
	case []any:
		for i, e := range x {
			keyPaths(e, append(append([]any{}, prefix...), i), out)
		}
	}
}

// deleteAt removes the key at path; false when a parent is already gone.
func deleteAt(t map[string]any, path []any) bool {
	var cur any = t
	for _, step := range path[:len(path)-1] {
		switch s := step.(type) {
		case string:
			mm, ok := cur.(map[string]any)
			if !ok {
				return false
			}
			if cur, ok = mm[s]; !ok {
				return false
			}
		case int:
			l, ok := cur.([]any)
			if !ok || s >= len(l) {
				return false
			}
			cur = l[s]
		}
	}
	mm, ok := cur.(map[string]any)
	if !ok {
		return false
	}
	k := path[len(path)-1].(string)
	if _, ok := mm[k]; !ok {
		return false
	}
	delete(mm, k)
	return true
}

// lossy reports whether deleting the key at path asks for something the
// wire cannot hold: a field without presence (repeated fields, a file's
// mount point, the parts of a rule) or half of an execution state's oneof.
func lossy(path []any) bool {
	k := path[len(path)-1].(string)
	inList := false
	for _, s := range path {
		if _, ok := s.(int); ok {
			inList = true
		}
	}
	switch {
	case k == "allowRules" || k == "denyRules":
		return true
	case inList && (k == "mountPoint" || k == "type" || k == "operation" || k == "filterMasks" || k == "workloadNames"):
		return true
	case path[0] == "workloadStates" && len(path) == 5 && (k == "state" || k == "subState"):
		return true
	}
	return false
}

// FuzzCompleteStateFromTree masks the full tree by deleting random keys,
// as a field-masked read does. FromTree must not panic; a tree the wire can
// hold must round-trip exactly, and any tree FromTree accepts must reach a
// fixpoint after one round.
func FuzzCompleteStateFromTree(f *testing.F) {
	full := fullState().ToTree()
	var paths [][]any
	keyPaths(full, nil, &paths)
	f.Add([]byte{})
	f.Add([]byte{0x01})
	f.Add([]byte{0xff, 0xff, 0xff, 0xff})
	f.Add([]byte{0x00, 0x10, 0x00, 0x04, 0x00, 0x00, 0x20, 0x00, 0x00, 0x08, 0x00, 0x00, 0x40})
	f.Add([]byte{0xaa, 0x55, 0xaa, 0x55, 0xaa, 0x55, 0xaa, 0x55, 0xaa, 0x55, 0xaa, 0x55, 0xaa, 0x55, 0xaa, 0x55})
	f.Fuzz(func(t *testing.T, mask []byte) {
		tree := state.CloneValue(full).(map[string]any)
		isLossy := false
		for i, p := range paths {
			if i/8 >= len(mask) {
				break
			}
			if mask[i/8]&(1<<(i%8)) != 0 && deleteAt(tree, p) && lossy(p) {
				isLossy = true
			}
		}
		p, err := CompleteStateFromTree(tree)
		if !isLossy {
			if err != nil {
				t.Fatalf("masked tree rejected: %v", err)
			}
			if got := CompleteStateToTree(p); !reflect.DeepEqual(got, tree) {
				t.Fatalf("round trip changed the tree:\n got %#v\nwant %#v", got, tree)
			}
			return
		}
		if err != nil {
			return
		}
		checkFixpoint(t, p)
	})
}

func checkFixpoint(t *testing.T, p *ankbase.CompleteState) {
	t.Helper()
	t1 := CompleteStateToTree(p)
	p2, err := CompleteStateFromTree(t1)
	if err != nil {
		t.Fatalf("tree of an accepted message rejected: %v\n%#v", err, t1)
	}
	if t2 := CompleteStateToTree(p2); !reflect.DeepEqual(t2, t1) {
		t.Fatalf("no fixpoint:\n got %#v\nwant %#v", t2, t1)
	}
}

// FuzzCompleteStateFromWire feeds arbitrary messages through every
// conversion from the wire: none may panic, and whatever FromTree accepts
// reaches a fixpoint.
func FuzzCompleteStateFromWire(f *testing.F) {
	full, err := proto.Marshal(CompleteStateToProto(fullState()))
	if err != nil {
		f.Fatal(err)
	}
	f.Add(full)
	f.Add([]byte{})
	f.Add(full[:len(full)/2])
	f.Fuzz(func(t *testing.T, data []byte) {
		var p ankbase.CompleteState
		if proto.Unmarshal(data, &p) != nil {
			return
		}
		for name, w := range p.GetDesiredState().GetWorkloads().GetWorkloads() {
			_, _ = WorkloadFromProto(w, name)
		}
		for _, wls := range p.GetWorkloadStates().GetAgentStateMap() {
			for _, ids := range wls.GetWlNameStateMap() {
				for _, e := range ids.GetIdStateMap() {
					_, _ = ExecutionStateFromProto(e)
				}
			}
		}
		tree := CompleteStateToTree(&p)
		if p2, err := CompleteStateFromTree(tree); err == nil {
			checkFixpoint(t, p2)
		}
	})
}

// Deleting any single key of the full tree is either held exactly by the
// wire or, for the keys lossy names, reaches a fixpoint.
func TestEverySingleDeletion(t *testing.T) {
	full := fullState().ToTree()
	var paths [][]any
	keyPaths(full, nil, &paths)
	exact := 0
	for _, path := range paths {
		tree := state.CloneValue(full).(map[string]any)
		if !deleteAt(tree, path) {
			t.Fatalf("cannot delete %v", path)
		}
		p, err := CompleteStateFromTree(tree)
		if lossy(path) {
			if err == nil {
				checkFixpoint(t, p)
			}
			continue
		}
		if err != nil {
			t.Fatalf("deleting %v: %v", path, err)
		}
		if got := CompleteStateToTree(p); !reflect.DeepEqual(got, tree) {
			t.Fatalf("deleting %v: round trip changed the tree", path)
		}
		exact++
	}
	if exact < len(paths)/2 {
		t.Fatalf("only %d of %d deletions round-trip exactly", exact, len(paths))
	}
}
