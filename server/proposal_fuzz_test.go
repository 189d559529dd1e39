package server

import (
	"bytes"
	"errors"
	"strings"
	"testing"

	"github.com/hashicorp/raft"

	"github.com/grapnel-io/grapnel/fsm"
	"github.com/grapnel-io/grapnel/server/plan"
	"github.com/grapnel-io/grapnel/state"
	"github.com/grapnel-io/grapnel/state/render"
)

// FuzzProposalPath holds the rule that lets no input take the cluster
// down: whatever update the leader accepts, the entry it proposes decodes
// with the FSM's decoder and applies with the same result on a fresh FSM,
// on one restored from a snapshot, and on the leader's speculative store.
// Each input is two manifests: the first sets the state, the second is
// applied to it through an update mask. A refusal must be a field error;
// an accepted update must never halt an FSM.
func FuzzProposalPath(f *testing.F) {
	base := "apiVersion: v1\nworkloads:\n  web:\n    runtime: podman\n    agent: agent_A\n    runtimeConfig: 'image: {{c.img}}'\n    configs: {c: web_cfg}\n    dependencies: {db: ADD_COND_RUNNING}\n  db:\n    runtime: podman\n    agent: agent_B\n    runtimeConfig: 'image: db'\nconfigs:\n  web_cfg: {img: nginx, ports: ['80', '443']}\n"
	for _, seed := range []struct{ base, next, mask string }{
		{base, "apiVersion: v1\nconfigs:\n  web_cfg: {img: httpd, ports: []}\n", "desiredState.configs.web_cfg"},
		{base, "apiVersion: v1\n", ""},
		{base, "apiVersion: v1\nworkloads:\n  db:\n    runtime: podman\n    agent: agent_C\n    runtimeConfig: 'image: db2'\n", "desiredState.workloads.db"},
		{base, "apiVersion: v1\nworkloads:\n  f:\n    runtime: p\n    agent: '{{c.a}}'\n    runtimeConfig: x\n    configs: {c: k}\n    files: [{mountPoint: /f, data: '{{#each c.l}}{{this}}{{/each}}'}]\nconfigs:\n  k: {a: agent_A, l: [x, y, z]}\n", "desiredState"},
		{"", "apiVersion: v1\nconfigs:\n  deep: [[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[x]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]\n", "desiredState.configs.deep"},
		{"", "apiVersion: v1\nworkloads:\n  a:\n    runtime: p\n    agent: x\n    runtimeConfig: x\n    dependencies: {b: ADD_COND_RUNNING}\n  b:\n    runtime: p\n    agent: x\n    runtimeConfig: y\n    dependencies: {a: ADD_COND_RUNNING}\n", ""},
		{base, "apiVersion: v1\nworkloads:\n  web:\n    runtime: podman\n    agent: agent_A\n    restartPolicy: ALWAYS\n    runtimeConfig: 'image: {{c.img}}'\n    configs: {c: web_cfg}\n    tags: {t: v}\n    controlInterfaceAccess:\n      allowRules: [{type: StateRule, operation: Read, filterMasks: ['desiredState.*']}]\n", "desiredState.workloads.web"},
	} {
		f.Add(seed.base, seed.next, seed.mask)
	}
	// Small limits keep the inputs cheap and reach every limit.
	lim := state.Limits{MaxConfigDepth: 16, MaxStringBytes: 4096, MaxConfigItemBytes: 16384, MaxWorkloads: 64,
		MaxConfigItems: 64, MaxWorkloadBytes: 16384, MaxUpdateBytes: 65536, MaxDesiredStateBytes: 65536, MaxAgentBytes: 32768}
	r := render.NewLimited(lim.MaxWorkloadBytes)
	f.Fuzz(func(t *testing.T, baseYAML, nextYAML, mask string) {
		leader := state.NewStore()
		fresh := fsm.New()
		var index uint64
		propose := func(y string, masks []string) (*fsm.FSM, bool) {
			tree, err := state.ParseTree([]byte(y))
			if err != nil {
				return nil, false
			}
			next, tags, err := state.ApplyUpdateMask(leader.Desired, nil, state.Tree{"desiredState": tree}, masks)
			if err != nil {
				return nil, false
			}
			p, err := plan.Make(r, lim, plan.Admission{}, leader, next, tags, nil)
			if err != nil {
				if !errors.Is(err, state.ErrInvalid) {
					t.Fatalf("a refusal that is not a field error: %v (%T)", err, err)
				}
				return nil, false
			}
			if !p.Changed {
				return nil, false
			}
			buf, err := fsm.Encode(&fsm.UpdateDesiredStateRequest{Update: p.Update, Seq: leader.DesiredSeq + 1})
			if err != nil {
				t.Fatalf("an accepted update does not encode: %v", err)
			}
			typ, body, err := fsm.Decode(buf)
			if err != nil || typ != fsm.UpdateDesiredStatePackedType {
				t.Fatalf("an accepted update does not decode: %v", err)
			}
			// The replica restored from a snapshot of the state before.
			var snap bytes.Buffer
			if err := fsm.WriteSnapshot(&snap, snapshotOf(fresh), index); err != nil {
				t.Fatal(err)
			}
			restored := fsm.New()
			if err := restored.Restore(nopCloser{&snap}); err != nil {
				t.Fatalf("restore: %v", err)
			}
			index++
			if resp := fsm.Execute(leader, body, index); resp != nil {
				t.Fatalf("the speculative store refused an accepted update: %v", resp)
			}
			for _, rep := range []*fsm.FSM{fresh, restored} {
				if resp := rep.Apply(&raft.Log{Index: index, Type: raft.LogCommand, Data: buf}); resp != nil {
					t.Fatalf("an accepted update did not apply: %v", resp)
				}
			}
			return restored, true
		}
		propose(baseYAML, nil)
		masks := []string(nil)
		if mask != "" {
			masks = strings.Split(mask, ",")
		}
		restored, ok := propose(nextYAML, masks)
		if !ok {
			return
		}
		want := snapshotBytesOf(t, leader, index)
		if got := snapshotBytesOf(t, snapshotOf(fresh), index); !bytes.Equal(got, want) {
			t.Fatal("a fresh FSM applied the entry differently from the leader's plan")
		}
		if got := snapshotBytesOf(t, snapshotOf(restored), index); !bytes.Equal(got, want) {
			t.Fatal("an FSM restored from a snapshot applied the entry differently")
		}
	})
}

func snapshotOf(f *fsm.FSM) *state.Store {
	var c *state.Store
	f.Read(func(s *state.Store, _ uint64) { c = s.Clone() })
	return c
}

func snapshotBytesOf(t *testing.T, s *state.Store, index uint64) []byte {
	t.Helper()
	var b bytes.Buffer
	if err := fsm.WriteSnapshot(&b, s, index); err != nil {
		t.Fatal(err)
	}
	return b.Bytes()
}

type nopCloser struct{ *bytes.Buffer }

func (nopCloser) Close() error { return nil }
