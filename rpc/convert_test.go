package rpc

import (
	"errors"
	"reflect"
	"strings"
	"testing"

	"google.golang.org/protobuf/proto"

	"github.com/grapnel-io/grapnel/rpc/ankbase"
	"github.com/grapnel-io/grapnel/rpc/grpcapi"
	"github.com/grapnel-io/grapnel/state"
)

// The fixture is what the manifest decoder produces, so that comparisons
// below test the conversions and not the fixture.
func TestFixtureIsDecoderNormalised(t *testing.T) {
	c := fullState()
	got, err := state.DecodeState(c.DesiredState.ToTree(), "desiredState")
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(got, c.DesiredState) {
		t.Fatalf("fixture is not normalised:\n got %#v\nwant %#v", got, c.DesiredState)
	}
}

// model -> proto -> Tree gives the model's own Tree, and the desired state
// decodes back to the model.
func TestRoundTripModelProtoTree(t *testing.T) {
	c := fullState()
	p := CompleteStateToProto(c)
	wire, err := proto.Marshal(p)
	if err != nil {
		t.Fatal(err)
	}
	var received ankbase.CompleteState
	if err := proto.Unmarshal(wire, &received); err != nil {
		t.Fatal(err)
	}
	tree := CompleteStateToTree(&received)
	if want := c.ToTree(); !reflect.DeepEqual(tree, want) {
		t.Fatalf("tree differs from the model's tree:\n got %#v\nwant %#v", tree, want)
	}
	ds, err := state.DecodeState(tree["desiredState"].(map[string]any), "desiredState")
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(ds, c.DesiredState) {
		t.Fatalf("decoded desired state differs:\n got %#v\nwant %#v", ds, c.DesiredState)
	}
}

// The model's Tree converts to the same message as the typed path.
func TestFromTreeOfFullStateEqualsTypedPath(t *testing.T) {
	c := fullState()
	p, err := CompleteStateFromTree(c.ToTree())
	if err != nil {
		t.Fatal(err)
	}
	if want := CompleteStateToProto(c); !proto.Equal(p, want) {
		t.Fatalf("FromTree differs from CompleteStateToProto:\n got %v\nwant %v", p, want)
	}
}

func TestWorkloadRoundTrip(t *testing.T) {
	for name, w := range fullState().DesiredState.Workloads {
		t.Run(name, func(t *testing.T) {
			p := WorkloadToProto(w)
			for field, set := range map[string]bool{
				"agent": p.Agent != nil, "restartPolicy": p.RestartPolicy != nil, "dependencies": p.Dependencies != nil,
				"tags": p.Tags != nil, "runtime": p.Runtime != nil, "runtimeConfig": p.RuntimeConfig != nil,
				"controlInterfaceAccess": p.ControlInterfaceAccess != nil, "configs": p.Configs != nil, "files": p.Files != nil,
			} {
				if !set {
					t.Errorf("WorkloadToProto left %s unset", field)
				}
			}
			got, err := WorkloadFromProto(p, "desiredState.workloads."+name)
			if err != nil {
				t.Fatal(err)
			}
			if !reflect.DeepEqual(got, w) {
				t.Fatalf("round trip differs:\n got %#v\nwant %#v", got, w)
			}
		})
	}
}

func TestWorkloadToProtoDefaultsRestartPolicy(t *testing.T) {
	p := WorkloadToProto(&state.Workload{Runtime: "podman"})
	if p.GetRestartPolicy() != ankbase.RestartPolicy_NEVER || p.RestartPolicy == nil {
		t.Fatalf("restart policy = %v, want NEVER set", p.RestartPolicy)
	}
	if WorkloadToProto(nil) != nil {
		t.Fatal("nil workload must give nil")
	}
}

func TestWorkloadStatesRoundTrip(t *testing.T) {
	all := fullState().WorkloadStates.All()
	got, err := WorkloadStatesFromProto(WorkloadStatesToProto(all))
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(got, all) {
		t.Fatalf("got %v, want %v", got, all)
	}
}

func TestInstanceNameRoundTrip(t *testing.T) {
	n := state.InstanceName{WorkloadName: "web", AgentName: "agent_A", ID: "abc"}
	if got := InstanceNameFromProto(InstanceNameToProto(n)); got != n {
		t.Fatalf("got %v, want %v", got, n)
	}
	if got := InstanceNameFromProto(nil); got != (state.InstanceName{}) {
		t.Fatalf("nil gives %v", got)
	}
}

func TestAddedAndDeletedWorkloadToProto(t *testing.T) {
	n := state.InstanceName{WorkloadName: "web", AgentName: "agent_A", ID: "1a2b"}
	w := fullState().DesiredState.Workloads["web"]
	a := AddedWorkloadToProto(n, w)
	if !proto.Equal(a.InstanceName, InstanceNameToProto(n)) || !proto.Equal(a.Workload, WorkloadToProto(w)) {
		t.Fatalf("added workload = %v", a)
	}
	d := DeletedWorkloadToProto(n, map[string]state.DeleteCondition{
		"front": state.DelCondRunning,
		"back":  state.DelCondNotPendingNorRunning,
		"odd":   "SOMETHING_ELSE",
	})
	want := map[string]grpcapi.DeleteCondition{
		"front": grpcapi.DeleteCondition_DEL_COND_RUNNING,
		"back":  grpcapi.DeleteCondition_DEL_COND_NOT_PENDING_NOR_RUNNING,
		"odd":   grpcapi.DeleteCondition_DEL_COND_NOT_PENDING_NOR_RUNNING,
	}
	if !reflect.DeepEqual(d.Dependencies, want) || !proto.Equal(d.InstanceName, InstanceNameToProto(n)) {
		t.Fatalf("deleted workload = %v", d)
	}
}

// Broken messages from the wire give an error naming the field, never a
// panic.
func TestFromProtoRejectsBadMessages(t *testing.T) {
	str := func(s string) *string { return &s }
	ok := func() *ankbase.Workload { return WorkloadToProto(fullState().DesiredState.Workloads["web"]) }
	tests := []struct {
		name     string
		mutate   func(*ankbase.Workload) *ankbase.Workload
		wantPath string
	}{
		{"nil workload", func(*ankbase.Workload) *ankbase.Workload { return nil }, "wl"},
		{"no runtime", func(w *ankbase.Workload) *ankbase.Workload { w.Runtime = nil; return w }, "wl.runtime"},
		{"no runtimeConfig", func(w *ankbase.Workload) *ankbase.Workload { w.RuntimeConfig = nil; return w }, "wl.runtimeConfig"},
		{"unknown restart policy", func(w *ankbase.Workload) *ankbase.Workload {
			w.RestartPolicy = ankbase.RestartPolicy(9).Enum()
			return w
		}, "wl.restartPolicy"},
		{"unknown add condition", func(w *ankbase.Workload) *ankbase.Workload {
			w.Dependencies.Dependencies["db"] = 7
			return w
		}, "wl.dependencies.db"},
		{"file without content", func(w *ankbase.Workload) *ankbase.Workload {
			w.Files.Files[1].FileContent = nil
			return w
		}, "wl.files.1"},
		{"nil file", func(w *ankbase.Workload) *ankbase.Workload {
			w.Files.Files = append(w.Files.Files, nil)
			return w
		}, "wl.files.2"},
		{"rule without kind", func(w *ankbase.Workload) *ankbase.Workload {
			w.ControlInterfaceAccess.DenyRules[0] = &ankbase.AccessRightsRule{}
			return w
		}, "wl.controlInterfaceAccess.denyRules.0"},
		{"unknown operation", func(w *ankbase.Workload) *ankbase.Workload {
			w.ControlInterfaceAccess.AllowRules[0] = &ankbase.AccessRightsRule{AccessRightsRuleEnum: &ankbase.AccessRightsRule_StateRule{
				StateRule: &ankbase.StateRule{Operation: 3}}}
			return w
		}, "wl.controlInterfaceAccess.allowRules.0.operation"},
		{"agent given as empty", func(w *ankbase.Workload) *ankbase.Workload { w.Agent = str(""); return w }, ""},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			_, err := WorkloadFromProto(tc.mutate(ok()), "wl")
			if tc.wantPath == "" {
				if err != nil {
					t.Fatalf("unexpected error %v", err)
				}
				return
			}
			checkFieldErr(t, err, tc.wantPath)
		})
	}
}

func TestWorkloadStatesFromProtoRejectsBadEntries(t *testing.T) {
	good := WorkloadStatesToProto(fullState().WorkloadStates.All())
	tests := []struct {
		name     string
		entry    *ankbase.WorkloadState
		wantPath string
	}{
		{"nil entry", nil, "workloadStates.4.instanceName"},
		{"no instance name", &ankbase.WorkloadState{ExecutionState: ExecutionStateToProto(state.RunningOk)}, "workloadStates.4.instanceName"},
		{"no execution state", &ankbase.WorkloadState{InstanceName: good[0].InstanceName}, "workloadStates.4.executionState"},
		{"unset oneof", &ankbase.WorkloadState{InstanceName: good[0].InstanceName, ExecutionState: &ankbase.ExecutionState{}}, "workloadStates.4.executionState"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			_, err := WorkloadStatesFromProto(append(append([]*ankbase.WorkloadState{}, good...), tc.entry))
			checkFieldErr(t, err, tc.wantPath)
		})
	}
}

// checkFieldErr asserts err is a state.FieldError (so ErrInvalid) for path.
func checkFieldErr(t *testing.T, err error, path string) {
	t.Helper()
	if err == nil {
		t.Fatalf("no error, want one for %s", path)
	}
	if !errors.Is(err, state.ErrInvalid) {
		t.Errorf("error %v does not wrap state.ErrInvalid", err)
	}
	var fe *state.FieldError
	if !errors.As(err, &fe) || fe.Path != path {
		t.Errorf("error %q names path %q, want %q", err, pathOf(fe), path)
	}
	if !strings.HasPrefix(err.Error(), path) {
		t.Errorf("message %q does not start with the path %q", err, path)
	}
}

func pathOf(fe *state.FieldError) string {
	if fe == nil {
		return "<no FieldError>"
	}
	return fe.Path
}
