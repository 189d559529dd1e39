package rpc

import (
	"math"
	"reflect"
	"testing"

	"github.com/grapnel-io/grapnel/rpc/ankbase"
	"github.com/grapnel-io/grapnel/state"
)

type m = map[string]any

// Trees a field-masked read produces survive FromTree and ToTree unchanged.
func TestPartialTreesRoundTrip(t *testing.T) {
	full := fullState().ToTree()
	tests := []struct {
		name string
		tree state.Tree
	}{
		{"empty", state.Tree{}},
		{"full", full},
		{"apiVersion only", state.Tree{"desiredState": m{"apiVersion": "v1"}}},
		{"one workload field", state.Tree{"desiredState": m{"apiVersion": "v1", "workloads": m{"web": m{"agent": "agent_A"}}}}},
		{"empty workload", state.Tree{"desiredState": m{"workloads": m{"web": m{}}}}},
		{"empty workloads", state.Tree{"desiredState": m{"workloads": m{}}}},
		{"one workload", state.Tree{"desiredState": m{"workloads": m{"web": full["desiredState"].(m)["workloads"].(m)["web"]}}}},
		{"workload runtime parts", state.Tree{"desiredState": m{"workloads": m{"db": m{"runtime": "podman", "runtimeConfig": "", "restartPolicy": "ALWAYS"}}}}},
		{"tags and deps", state.Tree{"desiredState": m{"workloads": m{"web": m{"tags": m{"a": "b"}, "dependencies": m{"db": "ADD_COND_FAILED"}}}}}},
		{"empty access", state.Tree{"desiredState": m{"workloads": m{"web": m{"controlInterfaceAccess": m{"allowRules": []any{}, "denyRules": []any{}}}}}}},
		{"file without content", state.Tree{"desiredState": m{"workloads": m{"web": m{"files": []any{m{"mountPoint": "/a"}}}}}}},
		{"one config", state.Tree{"desiredState": m{"configs": m{"obj": m{"nested": m{"y": []any{"z"}}}}}}},
		{"configs only", state.Tree{"desiredState": m{"configs": full["desiredState"].(m)["configs"]}}},
		{"states of one workload", state.Tree{"workloadStates": m{"agent_A": m{"web": full["workloadStates"].(m)["agent_A"].(m)["web"]}}}},
		{"empty states", state.Tree{"workloadStates": m{"agent_A": m{"web": m{}}}}},
		{"additional info only", state.Tree{"workloadStates": m{"agent_A": m{"web": m{"1a2b": m{"additionalInfo": "x"}}}}}},
		{"state without info", state.Tree{"workloadStates": m{"a": m{"w": m{"i": m{"state": "Failed", "subState": "Lost"}}}}}},
		{"empty state entry", state.Tree{"workloadStates": m{"a": m{"w": m{"i": m{}}}}}},
		{"cpu only", state.Tree{"agents": m{"agent_A": m{"status": m{"cpuUsage": int64(3)}}}}},
		{"empty agent", state.Tree{"agents": m{"agent_B": m{}}}},
		{"agent tags", state.Tree{"agents": m{"agent_B": m{"tags": m{"x": "y"}}}}},
		{"big memory", state.Tree{"agents": m{"a": m{"status": m{"freeMemory": int64(math.MaxInt64)}}}}},
		{"effective state", state.Tree{"effectiveState": full["desiredState"]}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			p, err := CompleteStateFromTree(tc.tree)
			if err != nil {
				t.Fatal(err)
			}
			if got := CompleteStateToTree(p); !reflect.DeepEqual(got, tc.tree) {
				t.Fatalf("round trip changed the tree:\n got %#v\nwant %#v", got, tc.tree)
			}
		})
	}
}

// FromTree accepts what YAML gives besides canonical values and fills in
// what a mask may cut off.
func TestFromTreeNormalises(t *testing.T) {
	tests := []struct {
		name string
		in   state.Tree
		want state.Tree
	}{
		{"null means absent", state.Tree{"desiredState": m{"apiVersion": "v1", "workloads": nil}, "agents": nil},
			state.Tree{"desiredState": m{"apiVersion": "v1"}}},
		{"scalar tags and configs become text", state.Tree{"desiredState": m{"workloads": m{"w": m{"tags": m{"port": int64(80)}}}, "configs": m{"n": true}}},
			state.Tree{"desiredState": m{"workloads": m{"w": m{"tags": m{"port": "80"}}}, "configs": m{"n": "true"}}}},
		{"state without subState gets the default", state.Tree{"workloadStates": m{"a": m{"w": m{"i": m{"state": "Stopping"}}}}},
			state.Tree{"workloadStates": m{"a": m{"w": m{"i": m{"state": "Stopping", "subState": "Stopping"}}}}}},
		{"operation defaults to Nothing", state.Tree{"desiredState": m{"workloads": m{"w": m{"controlInterfaceAccess": m{"allowRules": []any{m{"type": "StateRule", "filterMasks": []any{"a"}}}}}}}},
			state.Tree{"desiredState": m{"workloads": m{"w": m{"controlInterfaceAccess": m{"allowRules": []any{m{"type": "StateRule", "operation": "Nothing", "filterMasks": []any{"a"}}}, "denyRules": []any{}}}}}}},
		{"other integer types", state.Tree{"agents": m{"a": m{"status": m{"cpuUsage": 7, "freeMemory": float64(1024)}}}},
			state.Tree{"agents": m{"a": m{"status": m{"cpuUsage": int64(7), "freeMemory": int64(1024)}}}}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			p, err := CompleteStateFromTree(tc.in)
			if err != nil {
				t.Fatal(err)
			}
			if got := CompleteStateToTree(p); !reflect.DeepEqual(got, tc.want) {
				t.Fatalf("got %#v\nwant %#v", got, tc.want)
			}
		})
	}
}

// Wrong input gives an error naming the path, never a panic.
func TestFromTreeRejects(t *testing.T) {
	wl := func(w m) state.Tree { return state.Tree{"desiredState": m{"workloads": m{"w": w}}} }
	ws := func(e any) state.Tree { return state.Tree{"workloadStates": m{"a": m{"w": m{"i": e}}}} }
	rule := func(r any) state.Tree { return wl(m{"controlInterfaceAccess": m{"denyRules": []any{r}}}) }
	status := func(s m) state.Tree { return state.Tree{"agents": m{"a": m{"status": s}}} }
	const rp = "desiredState.workloads.w.controlInterfaceAccess.denyRules.0"
	tests := []struct {
		name string
		tree state.Tree
		path string
	}{
		{"unknown top key", state.Tree{"desired": m{}}, "desired"},
		{"desiredState not a map", state.Tree{"desiredState": "x"}, "desiredState"},
		{"effectiveState not a map", state.Tree{"effectiveState": []any{}}, "effectiveState"},
		{"unknown state key", state.Tree{"desiredState": m{"version": "v1"}}, "desiredState.version"},
		{"apiVersion number", state.Tree{"desiredState": m{"apiVersion": int64(1)}}, "desiredState.apiVersion"},
		{"workloads list", state.Tree{"desiredState": m{"workloads": []any{}}}, "desiredState.workloads"},
		{"workload string", state.Tree{"desiredState": m{"workloads": m{"w": "x"}}}, "desiredState.workloads.w"},
		// A null is not an empty map on the wire (state.AsMap would take it).
		{"workload null", state.Tree{"desiredState": m{"workloads": m{"w": nil}}}, "desiredState.workloads.w"},
		{"agent null", state.Tree{"agents": m{"a": nil}}, "agents.a"},
		{"config item null", state.Tree{"desiredState": m{"configs": m{"c": m{"k": nil}}}}, "desiredState.configs.c.k"},
		{"unknown workload key", wl(m{"image": "x"}), "desiredState.workloads.w.image"},
		{"agent number", wl(m{"agent": int64(3)}), "desiredState.workloads.w.agent"},
		{"runtime map", wl(m{"runtime": m{}}), "desiredState.workloads.w.runtime"},
		{"restart policy", wl(m{"restartPolicy": "SOMETIMES"}), "desiredState.workloads.w.restartPolicy"},
		{"restart policy type", wl(m{"restartPolicy": true}), "desiredState.workloads.w.restartPolicy"},
		{"add condition", wl(m{"dependencies": m{"db": "ADD_COND_LATER"}}), "desiredState.workloads.w.dependencies.db"},
		{"dependencies list", wl(m{"dependencies": []any{"db"}}), "desiredState.workloads.w.dependencies"},
		{"tags list", wl(m{"tags": []any{m{"key": "a", "value": "b"}}}), "desiredState.workloads.w.tags"},
		{"tag value map", wl(m{"tags": m{"a": m{}}}), "desiredState.workloads.w.tags.a"},
		{"configs value list", wl(m{"configs": m{"a": []any{}}}), "desiredState.workloads.w.configs.a"},
		{"files map", wl(m{"files": m{}}), "desiredState.workloads.w.files"},
		{"file string", wl(m{"files": []any{"x"}}), "desiredState.workloads.w.files.0"},
		{"file null", wl(m{"files": []any{nil}}), "desiredState.workloads.w.files.0"},
		{"file both contents", wl(m{"files": []any{m{"mountPoint": "/a", "data": "x", "binaryData": "eA=="}}}), "desiredState.workloads.w.files.0"},
		{"file unknown key", wl(m{"files": []any{m{"path": "/a"}}}), "desiredState.workloads.w.files.0.path"},
		{"file data number", wl(m{"files": []any{m{"data": int64(1)}}}), "desiredState.workloads.w.files.0.data"},
		{"file binary number", wl(m{"files": []any{m{"binaryData": int64(1)}}}), "desiredState.workloads.w.files.0.binaryData"},
		{"mount point number", wl(m{"files": []any{m{"mountPoint": int64(1)}}}), "desiredState.workloads.w.files.0.mountPoint"},
		{"access list", wl(m{"controlInterfaceAccess": []any{}}), "desiredState.workloads.w.controlInterfaceAccess"},
		{"access unknown key", wl(m{"controlInterfaceAccess": m{"rules": []any{}}}), "desiredState.workloads.w.controlInterfaceAccess.rules"},
		{"rules map", wl(m{"controlInterfaceAccess": m{"allowRules": m{}}}), "desiredState.workloads.w.controlInterfaceAccess.allowRules"},
		{"rule string", rule("x"), rp},
		{"rule without type", rule(m{"operation": "Read"}), rp + ".type"},
		{"rule type number", rule(m{"type": int64(1)}), rp + ".type"},
		{"rule unknown type", rule(m{"type": "FileRule"}), rp + ".type"},
		{"state rule operation", rule(m{"type": "StateRule", "operation": "Execute"}), rp + ".operation"},
		{"state rule operation type", rule(m{"type": "StateRule", "operation": int64(1)}), rp + ".operation"},
		{"state rule masks string", rule(m{"type": "StateRule", "filterMasks": "a"}), rp + ".filterMasks"},
		{"state rule mask number", rule(m{"type": "StateRule", "filterMasks": []any{int64(1)}}), rp + ".filterMasks.0"},
		{"state rule foreign key", rule(m{"type": "StateRule", "workloadNames": []any{}}), rp + ".workloadNames"},
		{"log rule names", rule(m{"type": "LogRule", "workloadNames": []any{m{}}}), rp + ".workloadNames.0"},
		{"log rule foreign key", rule(m{"type": "LogRule", "operation": "Read"}), rp + ".operation"},
		{"states list", state.Tree{"workloadStates": []any{}}, "workloadStates"},
		{"agent states string", state.Tree{"workloadStates": m{"a": "x"}}, "workloadStates.a"},
		{"workload states string", state.Tree{"workloadStates": m{"a": m{"w": "x"}}}, "workloadStates.a.w"},
		{"execution state string", ws("Running"), "workloadStates.a.w.i"},
		{"unknown execution key", ws(m{"state": "Running", "sub": "Ok"}), "workloadStates.a.w.i.sub"},
		{"unknown state", ws(m{"state": "Sleeping", "subState": "Ok"}), "workloadStates.a.w.i.state"},
		{"state number", ws(m{"state": int64(1)}), "workloadStates.a.w.i.state"},
		{"foreign substate", ws(m{"state": "Running", "subState": "Lost"}), "workloadStates.a.w.i.subState"},
		{"substate number", ws(m{"state": "Running", "subState": int64(0)}), "workloadStates.a.w.i.subState"},
		{"substate without state", ws(m{"subState": "Ok"}), "workloadStates.a.w.i.state"},
		{"info number", ws(m{"additionalInfo": int64(1)}), "workloadStates.a.w.i.additionalInfo"},
		{"agents list", state.Tree{"agents": []any{}}, "agents"},
		{"agent string", state.Tree{"agents": m{"a": "x"}}, "agents.a"},
		{"agent unknown key", state.Tree{"agents": m{"a": m{"name": "a"}}}, "agents.a.name"},
		{"agent tags list", state.Tree{"agents": m{"a": m{"tags": []any{}}}}, "agents.a.tags"},
		{"status string", state.Tree{"agents": m{"a": m{"status": "ok"}}}, "agents.a.status"},
		{"status unknown key", status(m{"cpu": int64(1)}), "agents.a.status.cpu"},
		{"cpu negative", status(m{"cpuUsage": int64(-1)}), "agents.a.status.cpuUsage"},
		{"cpu negative int", status(m{"cpuUsage": -1}), "agents.a.status.cpuUsage"},
		{"cpu too large", status(m{"cpuUsage": int64(math.MaxUint32) + 1}), "agents.a.status.cpuUsage"},
		{"cpu string", status(m{"cpuUsage": "5"}), "agents.a.status.cpuUsage"},
		{"memory fraction", status(m{"freeMemory": 1.5}), "agents.a.status.freeMemory"},
		{"memory negative float", status(m{"freeMemory": -2.0}), "agents.a.status.freeMemory"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			p, err := CompleteStateFromTree(tc.tree)
			if err == nil {
				t.Fatalf("no error, got %v", p)
			}
			checkFieldErr(t, err, tc.path)
		})
	}
}

// ToTree copes with everything a message can hold: nil entries in maps and
// lists, unset oneofs and enum numbers from a newer peer.
func TestToTreeOfOddMessages(t *testing.T) {
	p := &ankbase.CompleteState{
		DesiredState: &ankbase.State{
			Workloads: &ankbase.WorkloadMap{Workloads: map[string]*ankbase.Workload{
				"nil": nil,
				"odd": {
					RestartPolicy: ankbase.RestartPolicy(9).Enum(),
					Dependencies:  &ankbase.Dependencies{Dependencies: map[string]ankbase.AddCondition{"x": 7}},
					ControlInterfaceAccess: &ankbase.ControlInterfaceAccess{AllowRules: []*ankbase.AccessRightsRule{
						nil, {AccessRightsRuleEnum: &ankbase.AccessRightsRule_StateRule{StateRule: &ankbase.StateRule{Operation: 4}}},
					}},
					Files: &ankbase.Files{Files: []*ankbase.File{nil}},
				},
			}},
			Configs: &ankbase.ConfigMap{Configs: map[string]*ankbase.ConfigItem{
				"unset": {},
				"nil":   nil,
				"arr":   {ConfigItemEnum: &ankbase.ConfigItem_Array{Array: &ankbase.ConfigArray{Values: []*ankbase.ConfigItem{nil, {}, {ConfigItemEnum: &ankbase.ConfigItem_String_{String_: "s"}}}}}},
				"obj":   {ConfigItemEnum: &ankbase.ConfigItem_Object{}},
			}},
		},
		WorkloadStates: &ankbase.WorkloadStatesMap{AgentStateMap: map[string]*ankbase.ExecutionsStatesOfWorkload{
			"a": nil,
			"b": {WlNameStateMap: map[string]*ankbase.ExecutionsStatesForId{"w": nil, "v": {IdStateMap: map[string]*ankbase.ExecutionState{"i": nil}}}},
		}},
		Agents: &ankbase.AgentMap{Agents: map[string]*ankbase.AgentAttributes{"a": nil, "b": {Status: &ankbase.AgentStatus{FreeMemory: &ankbase.FreeMemory{FreeMemory: math.MaxUint64}}}}},
	}
	want := state.Tree{
		"desiredState": m{
			"workloads": m{
				"nil": m{},
				"odd": m{
					"restartPolicy": "9",
					"dependencies":  m{"x": "7"},
					"controlInterfaceAccess": m{
						"allowRules": []any{m{}, m{"type": "StateRule", "operation": "4", "filterMasks": []any{}}},
						"denyRules":  []any{},
					},
					"files": []any{m{"mountPoint": ""}},
				},
			},
			"configs": m{"arr": []any{"s"}, "obj": m{}},
		},
		"workloadStates": m{"a": m{}, "b": m{"w": m{}, "v": m{"i": m{}}}},
		"agents":         m{"a": m{}, "b": m{"status": m{"freeMemory": int64(math.MaxInt64)}}},
	}
	if got := CompleteStateToTree(p); !reflect.DeepEqual(got, want) {
		t.Fatalf("got %#v\nwant %#v", got, want)
	}
	// The model's decoder names the unknown enum values.
	_, err := state.DecodeWorkload(want["desiredState"].(m)["workloads"].(m)["odd"], "w", state.APIVersion)
	if err == nil {
		t.Fatal("decoder accepted unknown enum numbers")
	}
	if CompleteStateToTree(nil) == nil {
		t.Fatal("nil message must give an empty tree")
	}
}
