package rpc

import (
	"fmt"

	"github.com/grapnel-io/grapnel/rpc/ankbase"
	"github.com/grapnel-io/grapnel/rpc/grpcapi"
	"github.com/grapnel-io/grapnel/state"
)

// The manifest spelling of the access-rule operations; the other enums are
// spelled in the manifest exactly as their wire names.
var (
	rwToProto = map[state.ReadWrite]ankbase.ReadWriteEnum{
		state.RWNothing:   ankbase.ReadWriteEnum_RW_NOTHING,
		state.RWRead:      ankbase.ReadWriteEnum_RW_READ,
		state.RWWrite:     ankbase.ReadWriteEnum_RW_WRITE,
		state.RWReadWrite: ankbase.ReadWriteEnum_RW_READ_WRITE,
	}
	rwFromProto = map[ankbase.ReadWriteEnum]state.ReadWrite{
		ankbase.ReadWriteEnum_RW_NOTHING:    state.RWNothing,
		ankbase.ReadWriteEnum_RW_READ:       state.RWRead,
		ankbase.ReadWriteEnum_RW_WRITE:      state.RWWrite,
		ankbase.ReadWriteEnum_RW_READ_WRITE: state.RWReadWrite,
	}
)

// CompleteStateToProto converts the complete state. The model has no
// effective state, so that field stays unset.
func CompleteStateToProto(c *state.CompleteState) *ankbase.CompleteState {
	if c == nil {
		return &ankbase.CompleteState{}
	}
	return &ankbase.CompleteState{
		DesiredState:   StateToProto(c.DesiredState),
		WorkloadStates: WorkloadStatesMapToProto(c.WorkloadStates),
		Agents:         AgentMapToProto(c.Agents),
	}
}

// StateToProto converts a desired state; workloads and configs are always
// set, every workload completely.
func StateToProto(s state.State) *ankbase.State {
	p := &ankbase.State{
		ApiVersion: s.APIVersion,
		Workloads:  &ankbase.WorkloadMap{Workloads: make(map[string]*ankbase.Workload, len(s.Workloads))},
		Configs:    &ankbase.ConfigMap{Configs: make(map[string]*ankbase.ConfigItem, len(s.Configs))},
	}
	for name, w := range s.Workloads {
		p.Workloads.Workloads[name] = WorkloadToProto(w)
	}
	for k, v := range s.Configs {
		p.Configs.Configs[k] = configItemToProto(v)
	}
	return p
}

// configItemToProto converts a config item of the model (string, []any or
// map[string]any). Any other scalar is sent as its text, as the manifest
// parser would have read it.
func configItemToProto(v any) *ankbase.ConfigItem {
	switch x := v.(type) {
	case string:
		return &ankbase.ConfigItem{ConfigItemEnum: &ankbase.ConfigItem_String_{String_: x}}
	case []any:
		arr := &ankbase.ConfigArray{Values: make([]*ankbase.ConfigItem, len(x))}
		for i, e := range x {
			arr.Values[i] = configItemToProto(e)
		}
		return &ankbase.ConfigItem{ConfigItemEnum: &ankbase.ConfigItem_Array{Array: arr}}
	case map[string]any:
		obj := &ankbase.ConfigObject{Fields: make(map[string]*ankbase.ConfigItem, len(x))}
		for k, e := range x {
			obj.Fields[k] = configItemToProto(e)
		}
		return &ankbase.ConfigItem{ConfigItemEnum: &ankbase.ConfigItem_Object{Object: obj}}
	case nil:
		return &ankbase.ConfigItem{ConfigItemEnum: &ankbase.ConfigItem_String_{}}
	}
	return &ankbase.ConfigItem{ConfigItemEnum: &ankbase.ConfigItem_String_{String_: fmt.Sprint(v)}}
}

// WorkloadToProto converts a workload with every field set, so that the
// receiver never has to guess a default. A nil workload gives nil.
func WorkloadToProto(w *state.Workload) *ankbase.Workload {
	if w == nil {
		return nil
	}
	rp := ankbase.RestartPolicy_NEVER
	if v, ok := ankbase.RestartPolicy_value[string(w.RestartPolicy)]; ok {
		rp = ankbase.RestartPolicy(v)
	}
	agent, runtime, rc := w.Agent, w.Runtime, w.RuntimeConfig
	p := &ankbase.Workload{
		Agent:         &agent,
		RestartPolicy: &rp,
		Dependencies:  &ankbase.Dependencies{Dependencies: make(map[string]ankbase.AddCondition, len(w.Dependencies))},
		Tags:          &ankbase.Tags{Tags: cloneStrings(w.Tags)},
		Runtime:       &runtime,
		RuntimeConfig: &rc,
		ControlInterfaceAccess: &ankbase.ControlInterfaceAccess{
			AllowRules: rulesToProto(w.ControlInterfaceAccess.AllowRules),
			DenyRules:  rulesToProto(w.ControlInterfaceAccess.DenyRules),
		},
		Configs: &ankbase.ConfigMappings{Configs: cloneStrings(w.Configs)},
		Files:   &ankbase.Files{Files: make([]*ankbase.File, len(w.Files))},
	}
	for k, c := range w.Dependencies {
		p.Dependencies.Dependencies[k] = ankbase.AddCondition(ankbase.AddCondition_value[string(c)])
	}
	for i, f := range w.Files {
		pf := &ankbase.File{MountPoint: f.MountPoint}
		if f.Binary {
			pf.FileContent = &ankbase.File_BinaryData{BinaryData: f.Content}
		} else {
			pf.FileContent = &ankbase.File_Data{Data: f.Content}
		}
		p.Files.Files[i] = pf
	}
	return p
}

func rulesToProto(rs []state.AccessRule) []*ankbase.AccessRightsRule {
	out := make([]*ankbase.AccessRightsRule, len(rs))
	for i, r := range rs {
		if r.IsLogRule {
			out[i] = &ankbase.AccessRightsRule{AccessRightsRuleEnum: &ankbase.AccessRightsRule_LogRule{
				LogRule: &ankbase.LogRule{WorkloadNames: append([]string{}, r.WorkloadNames...)},
			}}
			continue
		}
		out[i] = &ankbase.AccessRightsRule{AccessRightsRuleEnum: &ankbase.AccessRightsRule_StateRule{
			StateRule: &ankbase.StateRule{Operation: rwToProto[r.Operation], FilterMasks: append([]string{}, r.FilterMasks...)},
		}}
	}
	return out
}

// WorkloadFromProto converts a workload received on the wire, as an agent
// gets it in ServerHello or UpdateWorkload. runtime and runtimeConfig are
// required, as in a manifest; unset messages give empty values. path
// prefixes the field names in errors.
func WorkloadFromProto(p *ankbase.Workload, path string) (*state.Workload, error) {
	if p == nil {
		return nil, fieldErr(path, "missing workload")
	}
	if p.Runtime == nil {
		return nil, fieldErr(joinPath(path, "runtime"), "missing field")
	}
	if p.RuntimeConfig == nil {
		return nil, fieldErr(joinPath(path, "runtimeConfig"), "missing field")
	}
	w := &state.Workload{
		Agent:         p.GetAgent(),
		RestartPolicy: state.RestartNever,
		Tags:          cloneStrings(p.GetTags().GetTags()),
		Runtime:       p.GetRuntime(),
		RuntimeConfig: p.GetRuntimeConfig(),
		Configs:       cloneStrings(p.GetConfigs().GetConfigs()),
	}
	if p.RestartPolicy != nil {
		name, ok := ankbase.RestartPolicy_name[int32(*p.RestartPolicy)]
		if !ok {
			return nil, fieldErr(joinPath(path, "restartPolicy"), "unknown restart policy %d", *p.RestartPolicy)
		}
		w.RestartPolicy = state.RestartPolicy(name)
	}
	if p.Dependencies != nil {
		w.Dependencies = make(map[string]state.AddCondition, len(p.Dependencies.Dependencies))
		for k, c := range p.Dependencies.Dependencies {
			name, ok := ankbase.AddCondition_name[int32(c)]
			if !ok {
				return nil, fieldErr(joinPath(path, "dependencies."+k), "unknown add condition %d", c)
			}
			w.Dependencies[k] = state.AddCondition(name)
		}
	}
	if p.Files != nil {
		w.Files = make([]state.File, 0, len(p.Files.Files))
		for i, f := range p.Files.Files {
			fp := fmt.Sprintf("%s.%d", joinPath(path, "files"), i)
			sf := state.File{MountPoint: f.GetMountPoint()}
			switch c := f.GetFileContent().(type) {
			case *ankbase.File_Data:
				sf.Content = c.Data
			case *ankbase.File_BinaryData:
				sf.Content, sf.Binary = c.BinaryData, true
			default:
				return nil, fieldErr(fp, "a file needs data or binaryData")
			}
			w.Files = append(w.Files, sf)
		}
	}
	var err error
	cia := p.GetControlInterfaceAccess()
	ciaPath := joinPath(path, "controlInterfaceAccess")
	if w.ControlInterfaceAccess.AllowRules, err = rulesFromProto(cia.GetAllowRules(), joinPath(ciaPath, "allowRules")); err != nil {
		return nil, err
	}
	if w.ControlInterfaceAccess.DenyRules, err = rulesFromProto(cia.GetDenyRules(), joinPath(ciaPath, "denyRules")); err != nil {
		return nil, err
	}
	return w, nil
}

func rulesFromProto(ps []*ankbase.AccessRightsRule, path string) ([]state.AccessRule, error) {
	var out []state.AccessRule
	for i, p := range ps {
		rp := fmt.Sprintf("%s.%d", path, i)
		switch r := p.GetAccessRightsRuleEnum().(type) {
		case *ankbase.AccessRightsRule_StateRule:
			op, ok := rwFromProto[r.StateRule.GetOperation()]
			if !ok {
				return nil, fieldErr(joinPath(rp, "operation"), "unknown operation %d", r.StateRule.GetOperation())
			}
			out = append(out, state.AccessRule{Operation: op, FilterMasks: append([]string(nil), r.StateRule.GetFilterMasks()...)})
		case *ankbase.AccessRightsRule_LogRule:
			out = append(out, state.AccessRule{IsLogRule: true, WorkloadNames: append([]string(nil), r.LogRule.GetWorkloadNames()...)})
		default:
			return nil, fieldErr(rp, "a rule needs a stateRule or a logRule")
		}
	}
	return out, nil
}

// AddedWorkloadToProto builds the message that tells an agent to start an
// instance.
func AddedWorkloadToProto(n state.InstanceName, w *state.Workload) *grpcapi.AddedWorkload {
	return &grpcapi.AddedWorkload{InstanceName: InstanceNameToProto(n), Workload: WorkloadToProto(w)}
}

// DeletedWorkloadToProto builds the message that tells an agent to stop an
// instance once its dependents reach the given conditions. A condition the
// wire does not know is sent as the stricter DEL_COND_NOT_PENDING_NOR_RUNNING.
func DeletedWorkloadToProto(n state.InstanceName, deps map[string]state.DeleteCondition) *grpcapi.DeletedWorkload {
	out := &grpcapi.DeletedWorkload{InstanceName: InstanceNameToProto(n), Dependencies: make(map[string]grpcapi.DeleteCondition, len(deps))}
	for k, c := range deps {
		v, ok := grpcapi.DeleteCondition_value[string(c)]
		if !ok {
			v = int32(grpcapi.DeleteCondition_DEL_COND_NOT_PENDING_NOR_RUNNING)
		}
		out.Dependencies[k] = grpcapi.DeleteCondition(v)
	}
	return out
}

func cloneStrings(m map[string]string) map[string]string {
	out := make(map[string]string, len(m))
	for k, v := range m {
		out[k] = v
	}
	return out
}

func joinPath(path, key string) string {
	if path == "" {
		return key
	}
	return path + "." + key
}
