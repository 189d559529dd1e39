package server

import (
	"bytes"
	"strings"
	"testing"
	"time"

	"github.com/grapnel-io/grapnel/fsm"
	"github.com/grapnel-io/grapnel/internal/clock"
	"github.com/grapnel-io/grapnel/internal/testwait"
	"github.com/grapnel-io/grapnel/rpc"
	"github.com/grapnel-io/grapnel/rpc/ankbase"
	"github.com/grapnel-io/grapnel/rpc/grpcapi"
	"github.com/grapnel-io/grapnel/state"
)

const nginx = `
apiVersion: v1
workloads:
  nginx:
    runtime: podman
    agent: agent_A
    restartPolicy: ALWAYS
    tags:
      owner: team
    runtimeConfig: |
      image: nginx
`

func isUpdateWorkload(m *grpcapi.FromServer) bool { return m.GetUpdateWorkload() != nil }

// stateBytes is snapshotBytes without the history, which records a
// refused update.
func stateBytes(t *testing.T, ts *testServer) []byte {
	t.Helper()
	var buf bytes.Buffer
	ts.fsm.Read(func(s *state.Store, _ uint64) {
		if err := fsm.WriteSnapshot(&buf, s.CloneWithoutHistory(), 0); err != nil {
			t.Fatal(err)
		}
	})
	return buf.Bytes()
}

func snapshotBytes(t *testing.T, ts *testServer) []byte {
	t.Helper()
	var buf bytes.Buffer
	ts.fsm.Read(func(s *state.Store, _ uint64) {
		c := s.Clone()
		// Agent load changes on its own schedule; compare the rest.
		if err := fsm.WriteSnapshot(&buf, c, 0); err != nil {
			t.Fatal(err)
		}
	})
	return buf.Bytes()
}

// swdd~server-provides-update-desired-state-interface~1
// swdd~update-desired-state-with-update-mask~1
// swdd~server-update-state-success-response~1
// swdd~server-detects-new-workload~1
func TestUpdateAddsWorkload(t *testing.T) {
	ts := startServer(t, nil)
	a := ts.agent("agent_A", nil)
	cli := ts.cli()
	r := cli.update(manifest(t, nginx), "desiredState.workloads.nginx")
	ok := r.GetUpdateStateSuccess()
	want := state.NewInstanceName("nginx", "agent_A", "image: nginx\n").String()
	if ok == nil || len(ok.GetAddedWorkloads()) != 1 || ok.GetAddedWorkloads()[0] != want {
		t.Fatalf("response %v, want added %s", r, want)
	}
	uw := a.expect("UpdateWorkload", isUpdateWorkload).GetUpdateWorkload()
	if len(uw.GetAddedWorkloads()) != 1 || uw.GetAddedWorkloads()[0].GetWorkload().GetRestartPolicy() != ankbase.RestartPolicy_ALWAYS {
		t.Fatalf("agent got %v", uw)
	}
}

// swdd~update-desired-state-empty-update-mask~1
// swdd~server-detects-deleted-workload~1
func TestUpdateEmptyMaskReplaces(t *testing.T) {
	ts := startServer(t, mustState(t, nginx))
	a := ts.agent("agent_A", nil)
	cli := ts.cli()
	r := cli.update(manifest(t, "apiVersion: v1\nworkloads: {}\n"))
	if len(r.GetUpdateStateSuccess().GetDeletedWorkloads()) != 1 {
		t.Fatalf("response %v", r)
	}
	uw := a.expect("delete", isUpdateWorkload).GetUpdateWorkload()
	if len(uw.GetDeletedWorkloads()) != 1 || uw.GetDeletedWorkloads()[0].GetInstanceName().GetWorkloadName() != "nginx" {
		t.Fatalf("agent got %v", uw)
	}
	if n := len(cli.get().GetDesiredState().GetWorkloads().GetWorkloads()); n != 0 {
		t.Fatalf("%d workloads left", n)
	}
}

// swdd~server-detects-changed-workload~1
// swdd~server-state-compares-rendered-workloads~1
// swdd~server-state-triggers-configuration-rendering-of-workloads~1
func TestConfigChangeReRendersReferencingWorkload(t *testing.T) {
	m := `
apiVersion: v1
workloads:
  web:
    runtime: podman
    agent: agent_A
    configs:
      c: web_cfg
    runtimeConfig: "image: {{c.image}}"
  other:
    runtime: podman
    agent: agent_A
    runtimeConfig: "image: other"
configs:
  web_cfg:
    image: nginx:1
`
	ts := startServer(t, mustState(t, m))
	a := ts.agent("agent_A", nil)
	cli := ts.cli()
	up := state.Tree{"desiredState": state.Tree{"configs": state.Tree{"web_cfg": map[string]any{"image": "nginx:2"}}}}
	r := cli.update(up, "desiredState.configs.web_cfg")
	ok := r.GetUpdateStateSuccess()
	newInst := state.NewInstanceName("web", "agent_A", "image: nginx:2").String()
	oldInst := state.NewInstanceName("web", "agent_A", "image: nginx:1").String()
	if ok == nil || len(ok.GetAddedWorkloads()) != 1 || ok.GetAddedWorkloads()[0] != newInst ||
		len(ok.GetDeletedWorkloads()) != 1 || ok.GetDeletedWorkloads()[0] != oldInst {
		t.Fatalf("response %v", r)
	}
	uw := a.expect("update", isUpdateWorkload).GetUpdateWorkload()
	if len(uw.GetAddedWorkloads()) != 1 || len(uw.GetDeletedWorkloads()) != 1 {
		t.Fatalf("agent got %v", uw)
	}
	if got := uw.GetAddedWorkloads()[0].GetWorkload().GetRuntimeConfig(); got != "image: nginx:2" {
		t.Fatalf("rendered %q", got)
	}
}

// swdd~server-state-updates-state-on-unmodified-workloads~1
func TestConfigOnlyUpdateStoresState(t *testing.T) {
	ts := startServer(t, mustState(t, nginx))
	a := ts.agent("agent_A", nil)
	cli := ts.cli()
	up := state.Tree{"desiredState": state.Tree{"configs": state.Tree{"unused": "x"}}}
	r := cli.update(up, "desiredState.configs.unused")
	if ok := r.GetUpdateStateSuccess(); ok == nil || len(ok.GetAddedWorkloads())+len(ok.GetDeletedWorkloads()) != 0 {
		t.Fatalf("response %v", r)
	}
	if got := cli.get("desiredState.configs").GetDesiredState().GetConfigs().GetConfigs()["unused"].GetString_(); got != "x" {
		t.Fatalf("config not stored: %q", got)
	}
	if _, ok := a.tryExpect(200e6, isUpdateWorkload); ok {
		t.Fatal("an unchanged workload was sent to the agent")
	}
}

// Every rejected update answers with an Error naming the field and the
// reason, leaves the replicated state byte-for-byte unchanged, and the
// server keeps serving.
//
// swdd~server-continues-on-invalid-updated-state~1
// swdd~update-desired-state-with-invalid-version~1
// swdd~update-desired-state-with-missing-version~1
// swdd~server-desired-state-field-conventions~1
// swdd~server-state-rejects-state-with-cyclic-dependencies~1
// swdd~server-state-triggers-validation-of-workload-fields~1
func TestRejectedUpdatesChangeNothing(t *testing.T) {
	fake := clock.NewFake(time.Unix(1_700_000_000, 0))
	ts := startServerCfg(t, t.TempDir(), mustState(t, nginx), func(c *Config) { c.Clock = fake })
	cli := ts.cli()
	cases := []struct {
		name  string
		y     string
		masks []string
		want  []string
	}{
		{"invalid api version", "apiVersion: v2\nworkloads: {}", nil, []string{"Unsupported API version", "v2"}},
		{"missing api version", "workloads: {}", nil, []string{"Unsupported API version", "''"}},
		{"bad workload name", "apiVersion: v1\nworkloads:\n  bad.name:\n    runtime: podman\n    agent: a\n    runtimeConfig: x", nil, []string{"bad.name"}},
		{"long workload name", "apiVersion: v1\nworkloads:\n  " + strings.Repeat("w", 64) + ":\n    runtime: podman\n    agent: a\n    runtimeConfig: x", nil, []string{"longer than 63"}},
		{"bad agent name", "apiVersion: v1\nworkloads:\n  w:\n    runtime: podman\n    agent: 'a b'\n    runtimeConfig: x", nil, []string{"agent", "a b"}},
		{"cycle", "apiVersion: v1\nworkloads:\n  x:\n    runtime: p\n    agent: a\n    runtimeConfig: x\n    dependencies: {y: ADD_COND_RUNNING}\n  y:\n    runtime: p\n    agent: a\n    runtimeConfig: y\n    dependencies: {x: ADD_COND_RUNNING}", nil, []string{"part of a cycle"}},
		{"missing config key", "apiVersion: v1\nworkloads:\n  w:\n    runtime: p\n    agent: a\n    runtimeConfig: '{{c.x}}'\n    configs: {c: nope}", nil, []string{"nope", "does not exist"}},
		{"missing template value", "apiVersion: v1\nworkloads:\n  w:\n    runtime: p\n    agent: a\n    runtimeConfig: '{{c.missing}}'\n    configs: {c: k}\nconfigs:\n  k: {x: '1'}", nil, []string{"runtimeConfig"}},
		{"empty filter mask", "apiVersion: v1\nworkloads:\n  w:\n    runtime: p\n    agent: a\n    runtimeConfig: x\n    controlInterfaceAccess:\n      allowRules:\n        - type: StateRule\n          operation: Read\n          filterMasks: ['']", nil, []string{"filter mask"}},
		{"wildcard in update mask", "apiVersion: v1", []string{"desiredState.workloads.*"}, []string{"*"}},
	}
	// Sent together, they wait together for the flush window after the
	// first (a refusal is answered once the history holds it).
	before := stateBytes(t, ts)
	ids := make([]string, len(cases))
	for i, c := range cases {
		ids[i] = cli.updateAsync(manifest(t, c.y), c.masks...)
	}
	cli.get() // the loop took them all
	fake.Advance(firstFlushWindow)
	for i, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			msg := cli.answer(ids[i], 5*time.Second).GetError().GetMessage()
			if msg == "" {
				t.Fatalf("not rejected")
			}
			for _, w := range c.want {
				if !strings.Contains(msg, w) {
					t.Errorf("error %q does not mention %q", msg, w)
				}
			}
		})
	}
	if after := stateBytes(t, ts); !bytes.Equal(before, after) {
		t.Fatal("a rejected update changed the state")
	}
	// Still serving.
	if r := cli.update(manifest(t, nginx), "desiredState.workloads.nginx"); r.GetUpdateStateSuccess() == nil {
		t.Fatalf("server stopped serving: %v", r)
	}
}

// swdd~cycle-detection-ignores-non-existing-workloads~1
func TestDependencyOnAbsentWorkloadAccepted(t *testing.T) {
	ts := startServer(t, nil)
	y := "apiVersion: v1\nworkloads:\n  x:\n    runtime: p\n    agent: a\n    runtimeConfig: x\n    dependencies: {later: ADD_COND_RUNNING}"
	if r := ts.cli().update(manifest(t, y)); r.GetUpdateStateSuccess() == nil {
		t.Fatalf("rejected: %v", r)
	}
}

// swdd~server-state-stores-delete-condition~1
// swdd~server-state-adds-delete-conditions-to-deleted-workload~1
func TestDeleteCarriesDeleteConditions(t *testing.T) {
	y := `
apiVersion: v1
workloads:
  db:
    runtime: p
    agent: agent_A
    runtimeConfig: db
  app:
    runtime: p
    agent: agent_A
    runtimeConfig: app
    dependencies:
      db: ADD_COND_RUNNING
  job:
    runtime: p
    agent: agent_A
    runtimeConfig: job
    dependencies:
      db: ADD_COND_SUCCEEDED
`
	ts := startServer(t, mustState(t, y))
	a := ts.agent("agent_A", nil)
	ts.store(func(s *state.Store) {
		if got := s.DeleteGraph["db"]; len(got) != 1 || got["app"] != state.DelCondNotPendingNorRunning {
			t.Errorf("delete graph %v", s.DeleteGraph)
		}
	})
	r := ts.cli().update(state.Tree{}, "desiredState.workloads.db")
	if len(r.GetUpdateStateSuccess().GetDeletedWorkloads()) != 1 {
		t.Fatalf("response %v", r)
	}
	uw := a.expect("delete", isUpdateWorkload).GetUpdateWorkload()
	deps := uw.GetDeletedWorkloads()[0].GetDependencies()
	if len(deps) != 1 || deps["app"] != grpcapi.DeleteCondition_DEL_COND_NOT_PENDING_NOR_RUNNING {
		t.Fatalf("delete conditions %v", deps)
	}
}

// swdd~server-handles-not-started-deleted-workloads~1
func TestServerDeletesNeverStartedWorkloads(t *testing.T) {
	ts := startServer(t, mustState(t, twoAgents))
	b := ts.agent("agent_B", nil)
	cli := ts.cli()
	instA := state.NewInstanceName("wl_a", "agent_A", "image: a") // agent_A never connected
	cli.update(state.Tree{}, "desiredState.workloads.wl_a", "desiredState.workloads.unscheduled")
	m := b.expect("removed state", isStateOf(instA)).GetUpdateWorkloadState()
	for _, ws := range m.GetWorkloadStates() {
		if ws.GetExecutionState().GetRemoved() != ankbase.Removed_REMOVED || ws.GetExecutionState().ExecutionStateEnum == nil {
			t.Fatalf("expected Removed, got %v", ws)
		}
	}
	ts.store(func(s *state.Store) {
		if _, ok := s.States.Get(instA); ok {
			t.Error("state of the never-started workload kept")
		}
		if len(s.States.OfAgent("")) != 0 {
			t.Error("state of the unscheduled workload kept")
		}
	})
}

// swdd~server-cleans-up-state~1
// swdd~server-removes-obsolete-delete-graph-entires~1
func TestRemovedStateCleansUp(t *testing.T) {
	y := "apiVersion: v1\nworkloads:\n  db:\n    runtime: p\n    agent: agent_A\n    runtimeConfig: db\n  app:\n    runtime: p\n    agent: agent_A\n    runtimeConfig: app\n    dependencies: {db: ADD_COND_RUNNING}\n"
	ts := startServer(t, mustState(t, y))
	a := ts.agent("agent_A", nil)
	cli := ts.cli()
	cli.update(state.Tree{}, "desiredState.workloads.app")
	a.expect("delete", isUpdateWorkload)
	app := state.NewInstanceName("app", "agent_A", "app")
	a.send(statesMsg(state.WorkloadState{Instance: app, State: state.Removed}))
	testwait.For(t, 5e9, func() bool {
		clean := false
		ts.store(func(s *state.Store) {
			_, has := s.States.Get(app)
			clean = !has && len(s.DeleteGraph) == 0
		})
		return clean
	}, "cleanup")
}

// A manifest applied through the real conversion keeps every field.
func TestUpdateRoundTripsAllFields(t *testing.T) {
	y := `
apiVersion: v1
workloads:
  full:
    runtime: podman
    agent: agent_A
    restartPolicy: ON_FAILURE
    tags: {a: b}
    dependencies: {other: ADD_COND_FAILED}
    runtimeConfig: "image: x"
    files:
      - mountPoint: /a
        data: text
      - mountPoint: /b
        binaryData: aGVsbG8=
    controlInterfaceAccess:
      allowRules:
        - type: StateRule
          operation: ReadWrite
          filterMasks: ["desiredState.workloads.*"]
        - type: LogRule
          workloadNames: ["full*"]
      denyRules:
        - type: StateRule
          operation: Write
          filterMasks: ["desiredState.workloads.full"]
`
	ts := startServer(t, nil)
	cli := ts.cli()
	if r := cli.update(manifest(t, y)); r.GetUpdateStateSuccess() == nil {
		t.Fatalf("rejected: %v", r)
	}
	got, err := state.DecodeState(rpc.CompleteStateToTree(cli.get())["desiredState"].(state.Tree), "")
	if err != nil {
		t.Fatal(err)
	}
	want := mustState(t, y)
	if !got.Workloads["full"].Equal(want.Workloads["full"]) {
		t.Fatalf("round trip lost fields:\n got %v\nwant %v", got.Workloads["full"].ToTree(), want.Workloads["full"].ToTree())
	}
}
