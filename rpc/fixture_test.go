package rpc

import (
	"github.com/grapnel-io/grapnel/state"
)

func u32(v uint32) *uint32 { return &v }
func u64(v uint64) *uint64 { return &v }

// fullState returns a complete state that uses every field of the model,
// normalised the way the manifest decoder produces it (empty maps and file
// lists present, empty rule lists nil).
func fullState() *state.CompleteState {
	web := &state.Workload{
		Agent:         "agent_A",
		RestartPolicy: state.RestartAlways,
		Dependencies: map[string]state.AddCondition{
			"db":   state.AddCondRunning,
			"init": state.AddCondSucceeded,
			"fix":  state.AddCondFailed,
		},
		Tags:          map[string]string{"owner": "team-a", "tier": "front"},
		Runtime:       "podman",
		RuntimeConfig: "image: docker.io/nginx:latest\ncommandOptions: [\"-p\", \"8080:80\"]\n",
		ControlInterfaceAccess: state.ControlInterfaceAccess{
			AllowRules: []state.AccessRule{
				{Operation: state.RWReadWrite, FilterMasks: []string{"desiredState.workloads.*", "workloadStates"}},
				{Operation: state.RWNothing, FilterMasks: []string{"agents"}},
				{IsLogRule: true, WorkloadNames: []string{"db", "web*"}},
			},
			DenyRules: []state.AccessRule{
				{Operation: state.RWWrite, FilterMasks: []string{"desiredState.workloads.db"}},
				{Operation: state.RWRead, FilterMasks: []string{"desiredState.configs"}},
				{IsLogRule: true, WorkloadNames: []string{"secret"}},
			},
		},
		Configs: map[string]string{"port": "web_port", "cfg": "obj"},
		Files: []state.File{
			{MountPoint: "/etc/nginx/nginx.conf", Content: "worker_processes 1;"},
			{MountPoint: "/usr/share/logo.png", Content: "iVBORw0KGgo=", Binary: true},
		},
	}
	db := &state.Workload{
		Agent:         "",
		RestartPolicy: state.RestartOnFailure,
		Dependencies:  map[string]state.AddCondition{},
		Tags:          map[string]string{},
		Runtime:       "podman-kube",
		RuntimeConfig: "",
		Configs:       map[string]string{},
		Files:         []state.File{},
	}
	never := &state.Workload{
		Agent:         "agent_B",
		RestartPolicy: state.RestartNever,
		Dependencies:  map[string]state.AddCondition{},
		Tags:          map[string]string{},
		Runtime:       "podman",
		RuntimeConfig: "image: alpine",
		Configs:       map[string]string{},
		Files:         []state.File{},
	}
	ws := state.WorkloadStatesMap{}
	ws.Set(state.InstanceName{WorkloadName: "web", AgentName: "agent_A", ID: "1a2b"}, state.RunningOk)
	ws.Set(state.InstanceName{WorkloadName: "web", AgentName: "agent_A", ID: "3c4d"},
		state.ExecutionState{State: state.StateStopping, SubState: state.SubDeleteFailed, AdditionalInfo: "container busy"})
	ws.Set(state.InstanceName{WorkloadName: "db", AgentName: "agent_A", ID: "5e6f"},
		state.ExecutionState{State: state.StatePending, SubState: state.SubStartingFailed, AdditionalInfo: "no image"})
	ws.Set(state.InstanceName{WorkloadName: "never", AgentName: "agent_B", ID: "7a8b"}, state.AgentDisconnected)
	return &state.CompleteState{
		DesiredState: state.State{
			APIVersion: state.APIVersion,
			Workloads:  map[string]*state.Workload{"web": web, "db": db, "never": never},
			Configs: map[string]any{
				"web_port": "8080",
				"list":     []any{"a", []any{"b", "c"}, map[string]any{"k": "v"}},
				"obj": map[string]any{
					"x":      "1",
					"nested": map[string]any{"y": []any{"z"}, "empty": map[string]any{}},
					"none":   []any{},
				},
			},
		},
		WorkloadStates: ws,
		Agents: state.AgentMap{
			"agent_A": {Status: state.AgentStatus{CPUUsage: u32(42), FreeMemory: u64(1 << 33)}, Tags: map[string]string{"region": "eu"}},
			"agent_B": {Tags: map[string]string{}},
			"agent_C": {Status: state.AgentStatus{CPUUsage: u32(0)}, Tags: map[string]string{}},
		},
	}
}
