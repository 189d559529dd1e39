package state

import (
	"errors"
	"fmt"
	"reflect"
	"strings"
	"testing"
)

const fuzzManifest = `apiVersion: v1
workloads:
  nginx:
    runtime: podman
    agent: agent_A
    restartPolicy: ALWAYS
    tags:
      owner: team-a
      port: 80
    dependencies:
      api: ADD_COND_RUNNING
    configs:
      web: web
    files:
      - mountPoint: /etc/a
        data: "{{web.port}}"
      - mountPoint: /etc/b
        binaryData: Yg==
    controlInterfaceAccess:
      allowRules:
        - type: StateRule
          operation: Read
          filterMasks: ["desiredState.workloads.*"]
        - type: LogRule
          workloadNames: ["api*"]
    runtimeConfig: |
      image: nginx
  api:
    runtime: podman
    runtimeConfig: "image: api"
configs:
  web:
    port: 8080
    hosts: [a, b]
`

const fuzzLegacyManifest = `apiVersion: v0.1
workloads:
  nginx:
    runtime: podman
    agent: agent_A
    tags:
      - key: owner
        value: team-a
    runtimeConfig: "image: nginx"
`

// FuzzParseManifest checks that no input makes ParseManifest panic and
// that an accepted manifest survives ToTree and DecodeState unchanged.
func FuzzParseManifest(f *testing.F) {
	f.Add([]byte(fuzzManifest))
	f.Add([]byte(fuzzLegacyManifest))
	f.Add([]byte(`{"apiVersion":"v1","workloads":{"w":{"runtime":"r","runtimeConfig":""}},"configs":{"c":[1,2.5,true]}}`))
	f.Add([]byte("apiVersion: v1\nconfigs:\n  a: [1, {b: c}]\n"))
	f.Add([]byte("- just a list"))
	f.Add([]byte("apiVersion: v2\n"))
	f.Add([]byte(""))
	f.Fuzz(func(t *testing.T, data []byte) {
		s, _, err := ParseManifest(data)
		if err != nil {
			if !errors.Is(err, ErrInvalid) {
				t.Fatalf("rejection %v does not wrap ErrInvalid", err)
			}
			return
		}
		tree := s.ToTree()
		if s.APIVersion == APIVersionLegacy {
			// ToTree writes tags in the v1 form only.
			tree[keyAPIVersion] = APIVersion
		}
		s2, err := DecodeState(tree, "")
		if err != nil {
			t.Fatalf("the Tree of an accepted manifest does not decode: %v", err)
		}
		if err := s2.Validate(); err != nil {
			t.Fatalf("the Tree of an accepted manifest does not validate: %v", err)
		}
		tree2 := s2.ToTree()
		tree2[keyAPIVersion] = tree[keyAPIVersion]
		if d := CompareTrees(tree, tree2); !d.Empty() {
			t.Fatalf("round trip changed %+v", d)
		}
	})
}

func splitFuzzMasks(s string) []string {
	if s == "" {
		return nil
	}
	return strings.Split(s, ",")
}

// FuzzFilterTree checks that no mask makes FilterTree panic, that it leaves
// its input alone and returns only what the input holds.
func FuzzFilterTree(f *testing.F) {
	f.Add("workloadStates.*.*.*.state")
	f.Add("desiredState.workloads.*.tags.owner,agents")
	f.Add("*.*.*.*.subState")
	f.Add("desiredState.workloads.nginx.files.*.mountPoint,desiredState.workloads.nginx.files.0")
	f.Add("a..b,,*,.,desiredState.workloads.nginx.files.01")
	f.Fuzz(func(t *testing.T, masks string) {
		in := sampleTree()
		got := FilterTree(in, splitFuzzMasks(masks))
		if !reflect.DeepEqual(in, sampleTree()) {
			t.Fatal("FilterTree changed its input")
		}
		if got == nil {
			t.Fatal("FilterTree returned nil")
		}
		forEachLeaf(got, nil, func(path []string, leaf any) {
			if !holdsLoosely(in, path, leaf) {
				t.Fatalf("result holds %v at %s, which the input does not", leaf, strings.Join(path, "."))
			}
		})
	})
}

// forEachLeaf calls fn for every scalar and empty container below v.
func forEachLeaf(v any, path []string, fn func([]string, any)) {
	switch x := v.(type) {
	case map[string]any:
		if len(x) == 0 {
			fn(path, x)
		}
		for k, c := range x {
			forEachLeaf(c, append(path[:len(path):len(path)], k), fn)
		}
	case []any:
		if len(x) == 0 {
			fn(path, x)
		}
		for i, c := range x {
			forEachLeaf(c, append(path[:len(path):len(path)], fmt.Sprint(i)), fn)
		}
	default:
		fn(path, v)
	}
}

// holdsLoosely reports whether v has leaf at path, where a sequence index
// may stand for any element (a filtered sequence keeps only the selected
// elements, so indices can shift).
func holdsLoosely(v any, path []string, leaf any) bool {
	if len(path) == 0 {
		switch l := leaf.(type) {
		case map[string]any:
			_, ok := v.(map[string]any)
			return ok && len(l) == 0
		case []any:
			_, ok := v.([]any)
			return ok && len(l) == 0
		}
		return equalValues(v, leaf)
	}
	switch x := v.(type) {
	case map[string]any:
		c, ok := x[path[0]]
		return ok && holdsLoosely(c, path[1:], leaf)
	case []any:
		for _, c := range x {
			if holdsLoosely(c, path[1:], leaf) {
				return true
			}
		}
	}
	return false
}

// FuzzApplyUpdateMask checks that no mask or request makes ApplyUpdateMask
// panic, that it leaves its inputs alone and rejects only with a
// *FieldError.
func FuzzApplyUpdateMask(f *testing.F) {
	f.Add("desiredState.workloads.nginx", []byte(""))
	f.Add("desiredState.workloads.nginx.agent", []byte("desiredState:\n  workloads:\n    nginx:\n      agent: B\n"))
	f.Add("agents.agent_A.tags.zone,workloadStates.*", []byte("agents: {agent_A: {tags: {zone: b}}}"))
	f.Add("desiredState.configs.list.0.x,desiredState.configs.web.port.x", []byte("desiredState: {configs: {list: [{x: 1}]}}"))
	f.Add("", []byte("desiredState: {apiVersion: v1, workloads: {w: {runtime: r, runtimeConfig: ''}}}"))
	f.Add("desiredState.workloads.nginx.files.0.data,desiredState.workloads.nginx.files.5", []byte("desiredState: {workloads: {nginx: {files: [{data: x}]}}}"))
	f.Fuzz(func(t *testing.T, masks string, doc []byte) {
		newState, err := ParseTree(doc)
		if err != nil {
			newState = Tree{"desiredState": tmap{"workloads": tmap{"nginx": nginxTree()}}}
		}
		cur, curTags := sampleState(), sampleTags()
		newBefore := fmt.Sprint(newState)
		got, gotTags, err := ApplyUpdateMask(cur, curTags, newState, splitFuzzMasks(masks))
		if !reflect.DeepEqual(cur, sampleState()) || !reflect.DeepEqual(curTags, sampleTags()) {
			t.Fatal("ApplyUpdateMask changed the current state")
		}
		if fmt.Sprint(newState) != newBefore {
			t.Fatal("ApplyUpdateMask changed the request")
		}
		if err != nil {
			var fe *FieldError
			if !errors.As(err, &fe) || !errors.Is(err, ErrInvalid) {
				t.Fatalf("rejection %v is not a *FieldError", err)
			}
			return
		}
		if got.Workloads == nil || got.Configs == nil {
			t.Fatal("result has nil maps")
		}
		if len(gotTags) != len(curTags) {
			t.Fatalf("tags of %d agents, want %d", len(gotTags), len(curTags))
		}
		for name, w := range got.Workloads {
			if w == nil {
				t.Fatalf("workload %s is nil", name)
			}
		}
	})
}
