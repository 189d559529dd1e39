package rpc

import (
	"math"
	"strconv"

	"github.com/grapnel-io/grapnel/rpc/ankbase"
	"github.com/grapnel-io/grapnel/state"
)

// CompleteStateToTree converts a (possibly partial) complete state into its
// Tree view, with the key names of the Ankaios manifest and `ank get state`
// output. Only what is set appears: an unset optional field or message is
// absent, so a field-masked read keeps its shape. Repeated fields have no
// presence on the wire and appear whenever their parent does. Enums become
// their manifest strings (a number unknown to this version becomes its
// decimal text, which the model's decoder then rejects by name); integers
// are int64.
func CompleteStateToTree(cs *ankbase.CompleteState) state.Tree {
	t := state.Tree{}
	if cs == nil {
		return t
	}
	if cs.DesiredState != nil {
		t["desiredState"] = stateTree(cs.DesiredState)
	}
	if cs.WorkloadStates != nil {
		t["workloadStates"] = workloadStatesTree(cs.WorkloadStates)
	}
	if cs.Agents != nil {
		t["agents"] = agentsTree(cs.Agents)
	}
	if cs.EffectiveState != nil {
		t["effectiveState"] = stateTree(cs.EffectiveState)
	}
	return t
}

// stateTree leaves out an empty apiVersion: proto3 cannot tell it from an
// absent one, and a masked read without it must stay without it.
func stateTree(s *ankbase.State) map[string]any {
	t := map[string]any{}
	if s.ApiVersion != "" {
		t["apiVersion"] = s.ApiVersion
	}
	if s.Workloads != nil {
		wls := make(map[string]any, len(s.Workloads.Workloads))
		for name, w := range s.Workloads.Workloads {
			wls[name] = workloadTree(w)
		}
		t["workloads"] = wls
	}
	if s.Configs != nil {
		t["configs"] = configFieldsTree(s.Configs.Configs)
	}
	return t
}

func workloadTree(w *ankbase.Workload) map[string]any {
	t := map[string]any{}
	if w == nil {
		return t
	}
	if w.Agent != nil {
		t["agent"] = *w.Agent
	}
	if w.RestartPolicy != nil {
		t["restartPolicy"] = enumName(ankbase.RestartPolicy_name, int32(*w.RestartPolicy))
	}
	if w.Dependencies != nil {
		deps := make(map[string]any, len(w.Dependencies.Dependencies))
		for k, c := range w.Dependencies.Dependencies {
			deps[k] = enumName(ankbase.AddCondition_name, int32(c))
		}
		t["dependencies"] = deps
	}
	if w.Tags != nil {
		t["tags"] = stringMap(w.Tags.Tags)
	}
	if w.Runtime != nil {
		t["runtime"] = *w.Runtime
	}
	if w.RuntimeConfig != nil {
		t["runtimeConfig"] = *w.RuntimeConfig
	}
	if w.ControlInterfaceAccess != nil {
		t["controlInterfaceAccess"] = map[string]any{
			"allowRules": rulesTree(w.ControlInterfaceAccess.AllowRules),
			"denyRules":  rulesTree(w.ControlInterfaceAccess.DenyRules),
		}
	}
	if w.Configs != nil {
		t["configs"] = stringMap(w.Configs.Configs)
	}
	if w.Files != nil {
		files := make([]any, 0, len(w.Files.Files))
		for _, f := range w.Files.Files {
			ft := map[string]any{"mountPoint": f.GetMountPoint()}
			switch c := f.GetFileContent().(type) {
			case *ankbase.File_Data:
				ft["data"] = c.Data
			case *ankbase.File_BinaryData:
				ft["binaryData"] = c.BinaryData
			}
			files = append(files, ft)
		}
		t["files"] = files
	}
	return t
}

// rulesTree gives {type: StateRule, operation, filterMasks} or {type:
// LogRule, workloadNames}; a rule with neither set becomes an empty map.
func rulesTree(rs []*ankbase.AccessRightsRule) []any {
	out := make([]any, 0, len(rs))
	for _, r := range rs {
		switch x := r.GetAccessRightsRuleEnum().(type) {
		case *ankbase.AccessRightsRule_StateRule:
			op, ok := rwFromProto[x.StateRule.GetOperation()]
			opName := string(op)
			if !ok {
				opName = strconv.Itoa(int(x.StateRule.GetOperation()))
			}
			out = append(out, map[string]any{"type": "StateRule", "operation": opName, "filterMasks": stringList(x.StateRule.GetFilterMasks())})
		case *ankbase.AccessRightsRule_LogRule:
			out = append(out, map[string]any{"type": "LogRule", "workloadNames": stringList(x.LogRule.GetWorkloadNames())})
		default:
			out = append(out, map[string]any{})
		}
	}
	return out
}

// configFieldsTree converts a map of config items; an item without a value
// is left out.
func configFieldsTree(m map[string]*ankbase.ConfigItem) map[string]any {
	out := make(map[string]any, len(m))
	for k, item := range m {
		if v, ok := configItemTree(item); ok {
			out[k] = v
		}
	}
	return out
}

func configItemTree(item *ankbase.ConfigItem) (any, bool) {
	switch x := item.GetConfigItemEnum().(type) {
	case *ankbase.ConfigItem_String_:
		return x.String_, true
	case *ankbase.ConfigItem_Array:
		vals := x.Array.GetValues()
		out := make([]any, 0, len(vals))
		for _, e := range vals {
			if v, ok := configItemTree(e); ok {
				out = append(out, v)
			}
		}
		return out, true
	case *ankbase.ConfigItem_Object:
		return configFieldsTree(x.Object.GetFields()), true
	}
	return nil, false
}

func workloadStatesTree(m *ankbase.WorkloadStatesMap) map[string]any {
	out := make(map[string]any, len(m.AgentStateMap))
	for agent, wls := range m.AgentStateMap {
		tw := make(map[string]any, len(wls.GetWlNameStateMap()))
		for wl, ids := range wls.GetWlNameStateMap() {
			ti := make(map[string]any, len(ids.GetIdStateMap()))
			for id, e := range ids.GetIdStateMap() {
				ti[id] = execTree(e)
			}
			tw[wl] = ti
		}
		out[agent] = tw
	}
	return out
}

// execTree gives {state, subState, additionalInfo}; state and subState are
// absent when the oneof is unset, additionalInfo when it is unset.
func execTree(e *ankbase.ExecutionState) map[string]any {
	t := map[string]any{}
	if e == nil {
		return t
	}
	if st, code, ok := execEnum(e); ok {
		sub, known := codeToSub(st, code)
		if !known {
			sub = strconv.Itoa(int(code))
		}
		t["state"] = string(st)
		t["subState"] = sub
	}
	if e.AdditionalInfo != nil {
		t["additionalInfo"] = *e.AdditionalInfo
	}
	return t
}

func agentsTree(m *ankbase.AgentMap) map[string]any {
	out := make(map[string]any, len(m.Agents))
	for name, a := range m.Agents {
		t := map[string]any{}
		if a.GetStatus() != nil {
			st := map[string]any{}
			if a.Status.CpuUsage != nil {
				st["cpuUsage"] = int64(a.Status.CpuUsage.CpuUsage)
			}
			if a.Status.FreeMemory != nil {
				st["freeMemory"] = clampInt64(a.Status.FreeMemory.FreeMemory)
			}
			t["status"] = st
		}
		if a.GetTags() != nil {
			t["tags"] = stringMap(a.Tags.Tags)
		}
		out[name] = t
	}
	return out
}

// clampInt64 keeps a huge (bogus) report from wrapping to a negative
// number, which would make the whole tree unreadable.
func clampInt64(v uint64) int64 {
	if v > math.MaxInt64 {
		return math.MaxInt64
	}
	return int64(v)
}

func enumName(names map[int32]string, v int32) string {
	if n, ok := names[v]; ok {
		return n
	}
	return strconv.Itoa(int(v))
}

func stringMap(m map[string]string) map[string]any {
	out := make(map[string]any, len(m))
	for k, v := range m {
		out[k] = v
	}
	return out
}

func stringList(s []string) []any {
	out := make([]any, len(s))
	for i, v := range s {
		out[i] = v
	}
	return out
}
