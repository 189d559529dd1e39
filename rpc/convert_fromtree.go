package rpc

import (
	"fmt"

	"github.com/grapnel-io/grapnel/rpc/ankbase"
	"github.com/grapnel-io/grapnel/state"
)

// CompleteStateFromTree converts a possibly partial Tree (the result of a
// field-masked read) into the wire message. A field missing in the tree
// stays unset; a null value counts as missing. An unknown key, a value of
// the wrong type or an unknown enum string gives a state.FieldError naming
// the path. It is the inverse of CompleteStateToTree on every tree that
// function produces.
func CompleteStateFromTree(t state.Tree) (*ankbase.CompleteState, error) {
	cs := &ankbase.CompleteState{}
	if err := state.OnlyKeys(t, "", "desiredState", "workloadStates", "agents", "effectiveState"); err != nil {
		return nil, err
	}
	var err error
	if v, ok := present(t, "desiredState"); ok {
		if cs.DesiredState, err = stateFromTree(v, "desiredState"); err != nil {
			return nil, err
		}
	}
	if v, ok := present(t, "effectiveState"); ok {
		if cs.EffectiveState, err = stateFromTree(v, "effectiveState"); err != nil {
			return nil, err
		}
	}
	if v, ok := present(t, "workloadStates"); ok {
		if cs.WorkloadStates, err = workloadStatesFromTree(v, "workloadStates"); err != nil {
			return nil, err
		}
	}
	if v, ok := present(t, "agents"); ok {
		if cs.Agents, err = agentsFromTree(v, "agents"); err != nil {
			return nil, err
		}
	}
	return cs, nil
}

func stateFromTree(v any, path string) (*ankbase.State, error) {
	m, err := asMap(v, path)
	if err != nil {
		return nil, err
	}
	if err := state.OnlyKeys(m, path, "apiVersion", "workloads", "configs"); err != nil {
		return nil, err
	}
	s := &ankbase.State{}
	if v, ok := present(m, "apiVersion"); ok {
		if s.ApiVersion, err = state.AsString(v, joinPath(path, "apiVersion")); err != nil {
			return nil, err
		}
	}
	if v, ok := present(m, "workloads"); ok {
		p := joinPath(path, "workloads")
		wls, err := asMap(v, p)
		if err != nil {
			return nil, err
		}
		s.Workloads = &ankbase.WorkloadMap{Workloads: make(map[string]*ankbase.Workload, len(wls))}
		for _, name := range state.SortedKeys(wls) {
			if s.Workloads.Workloads[name], err = workloadFromTree(wls[name], joinPath(p, name)); err != nil {
				return nil, err
			}
		}
	}
	if v, ok := present(m, "configs"); ok {
		p := joinPath(path, "configs")
		cfgs, err := asMap(v, p)
		if err != nil {
			return nil, err
		}
		s.Configs = &ankbase.ConfigMap{Configs: make(map[string]*ankbase.ConfigItem, len(cfgs))}
		for _, k := range state.SortedKeys(cfgs) {
			item, err := state.DecodeConfigItem(cfgs[k], joinPath(p, k))
			if err != nil {
				return nil, err
			}
			s.Configs.Configs[k] = configItemToProto(item)
		}
	}
	return s, nil
}

func workloadFromTree(v any, path string) (*ankbase.Workload, error) {
	m, err := asMap(v, path)
	if err != nil {
		return nil, err
	}
	if err := state.OnlyKeys(m, path, "agent", "tags", "dependencies", "restartPolicy", "runtime",
		"runtimeConfig", "configs", "files", "controlInterfaceAccess"); err != nil {
		return nil, err
	}
	w := &ankbase.Workload{}
	if w.Agent, err = optStringPtr(m, "agent", path); err != nil {
		return nil, err
	}
	if w.Runtime, err = optStringPtr(m, "runtime", path); err != nil {
		return nil, err
	}
	if w.RuntimeConfig, err = optStringPtr(m, "runtimeConfig", path); err != nil {
		return nil, err
	}
	if v, ok := present(m, "restartPolicy"); ok {
		p := joinPath(path, "restartPolicy")
		s, err := state.AsString(v, p)
		if err != nil {
			return nil, err
		}
		n, ok := ankbase.RestartPolicy_value[s]
		if !ok {
			return nil, fieldErr(p, "unknown restart policy '%s' (NEVER, ON_FAILURE or ALWAYS)", s)
		}
		w.RestartPolicy = ankbase.RestartPolicy(n).Enum()
	}
	if v, ok := present(m, "dependencies"); ok {
		p := joinPath(path, "dependencies")
		deps, err := asMap(v, p)
		if err != nil {
			return nil, err
		}
		w.Dependencies = &ankbase.Dependencies{Dependencies: make(map[string]ankbase.AddCondition, len(deps))}
		for _, k := range state.SortedKeys(deps) {
			s, err := state.AsString(deps[k], joinPath(p, k))
			if err != nil {
				return nil, err
			}
			n, ok := ankbase.AddCondition_value[s]
			if !ok {
				return nil, fieldErr(joinPath(p, k), "unknown add condition '%s' (ADD_COND_RUNNING, ADD_COND_SUCCEEDED or ADD_COND_FAILED)", s)
			}
			w.Dependencies.Dependencies[k] = ankbase.AddCondition(n)
		}
	}
	if v, ok := present(m, "tags"); ok {
		tags, err := state.DecodeTags(v, joinPath(path, "tags"))
		if err != nil {
			return nil, err
		}
		w.Tags = &ankbase.Tags{Tags: tags}
	}
	if v, ok := present(m, "configs"); ok {
		cfgs, err := state.DecodeTags(v, joinPath(path, "configs"))
		if err != nil {
			return nil, err
		}
		w.Configs = &ankbase.ConfigMappings{Configs: cfgs}
	}
	if v, ok := present(m, "files"); ok {
		if w.Files, err = filesFromTree(v, joinPath(path, "files")); err != nil {
			return nil, err
		}
	}
	if v, ok := present(m, "controlInterfaceAccess"); ok {
		if w.ControlInterfaceAccess, err = accessFromTree(v, joinPath(path, "controlInterfaceAccess")); err != nil {
			return nil, err
		}
	}
	return w, nil
}

func filesFromTree(v any, path string) (*ankbase.Files, error) {
	list, err := state.AsList(v, path)
	if err != nil {
		return nil, err
	}
	out := &ankbase.Files{Files: make([]*ankbase.File, 0, len(list))}
	for i, e := range list {
		p := fmt.Sprintf("%s.%d", path, i)
		m, err := asMap(e, p)
		if err != nil {
			return nil, err
		}
		if err := state.OnlyKeys(m, p, "mountPoint", "data", "binaryData"); err != nil {
			return nil, err
		}
		f := &ankbase.File{}
		if v, ok := present(m, "mountPoint"); ok {
			if f.MountPoint, err = state.AsString(v, joinPath(p, "mountPoint")); err != nil {
				return nil, err
			}
		}
		data, hasData := present(m, "data")
		bin, hasBin := present(m, "binaryData")
		switch {
		case hasData && hasBin:
			return nil, fieldErr(p, "a file has either data or binaryData, not both")
		case hasData:
			s, err := state.AsString(data, joinPath(p, "data"))
			if err != nil {
				return nil, err
			}
			f.FileContent = &ankbase.File_Data{Data: s}
		case hasBin:
			s, err := state.AsString(bin, joinPath(p, "binaryData"))
			if err != nil {
				return nil, err
			}
			f.FileContent = &ankbase.File_BinaryData{BinaryData: s}
		}
		out.Files = append(out.Files, f)
	}
	return out, nil
}

func accessFromTree(v any, path string) (*ankbase.ControlInterfaceAccess, error) {
	m, err := asMap(v, path)
	if err != nil {
		return nil, err
	}
	if err := state.OnlyKeys(m, path, "allowRules", "denyRules"); err != nil {
		return nil, err
	}
	a := &ankbase.ControlInterfaceAccess{}
	if a.AllowRules, err = rulesFromTree(m["allowRules"], joinPath(path, "allowRules")); err != nil {
		return nil, err
	}
	if a.DenyRules, err = rulesFromTree(m["denyRules"], joinPath(path, "denyRules")); err != nil {
		return nil, err
	}
	return a, nil
}

func rulesFromTree(v any, path string) ([]*ankbase.AccessRightsRule, error) {
	list, err := state.AsList(v, path)
	if err != nil {
		return nil, err
	}
	out := make([]*ankbase.AccessRightsRule, 0, len(list))
	for i, e := range list {
		p := fmt.Sprintf("%s.%d", path, i)
		m, err := asMap(e, p)
		if err != nil {
			return nil, err
		}
		tv, ok := present(m, "type")
		if !ok {
			return nil, fieldErr(joinPath(p, "type"), "missing field (StateRule or LogRule)")
		}
		typ, err := state.AsString(tv, joinPath(p, "type"))
		if err != nil {
			return nil, err
		}
		switch typ {
		case "StateRule":
			if err := state.OnlyKeys(m, p, "type", "operation", "filterMasks"); err != nil {
				return nil, err
			}
			r := &ankbase.StateRule{}
			if v, ok := present(m, "operation"); ok {
				s, err := state.AsString(v, joinPath(p, "operation"))
				if err != nil {
					return nil, err
				}
				op, ok := rwToProto[state.ReadWrite(s)]
				if !ok {
					return nil, fieldErr(joinPath(p, "operation"), "unknown operation '%s' (Nothing, Read, Write or ReadWrite)", s)
				}
				r.Operation = op
			}
			if r.FilterMasks, err = state.DecodeStrings(m["filterMasks"], joinPath(p, "filterMasks")); err != nil {
				return nil, err
			}
			out = append(out, &ankbase.AccessRightsRule{AccessRightsRuleEnum: &ankbase.AccessRightsRule_StateRule{StateRule: r}})
		case "LogRule":
			if err := state.OnlyKeys(m, p, "type", "workloadNames"); err != nil {
				return nil, err
			}
			r := &ankbase.LogRule{}
			if r.WorkloadNames, err = state.DecodeStrings(m["workloadNames"], joinPath(p, "workloadNames")); err != nil {
				return nil, err
			}
			out = append(out, &ankbase.AccessRightsRule{AccessRightsRuleEnum: &ankbase.AccessRightsRule_LogRule{LogRule: r}})
		default:
			return nil, fieldErr(joinPath(p, "type"), "unknown rule type '%s' (StateRule or LogRule)", typ)
		}
	}
	return out, nil
}

func workloadStatesFromTree(v any, path string) (*ankbase.WorkloadStatesMap, error) {
	agents, err := asMap(v, path)
	if err != nil {
		return nil, err
	}
	out := &ankbase.WorkloadStatesMap{AgentStateMap: make(map[string]*ankbase.ExecutionsStatesOfWorkload, len(agents))}
	for _, agent := range state.SortedKeys(agents) {
		ap := joinPath(path, agent)
		wls, err := asMap(agents[agent], ap)
		if err != nil {
			return nil, err
		}
		pw := &ankbase.ExecutionsStatesOfWorkload{WlNameStateMap: make(map[string]*ankbase.ExecutionsStatesForId, len(wls))}
		for _, wl := range state.SortedKeys(wls) {
			wp := joinPath(ap, wl)
			ids, err := asMap(wls[wl], wp)
			if err != nil {
				return nil, err
			}
			pi := &ankbase.ExecutionsStatesForId{IdStateMap: make(map[string]*ankbase.ExecutionState, len(ids))}
			for _, id := range state.SortedKeys(ids) {
				if pi.IdStateMap[id], err = execFromTree(ids[id], joinPath(wp, id)); err != nil {
					return nil, err
				}
			}
			pw.WlNameStateMap[wl] = pi
		}
		out.AgentStateMap[agent] = pw
	}
	return out, nil
}

// execFromTree reads {state, subState, additionalInfo}. A state without a
// subState (a mask that picked only `state`) gets the state's default
// substate; a subState without a state cannot be sent and is an error.
func execFromTree(v any, path string) (*ankbase.ExecutionState, error) {
	m, err := asMap(v, path)
	if err != nil {
		return nil, err
	}
	if err := state.OnlyKeys(m, path, "state", "subState", "additionalInfo"); err != nil {
		return nil, err
	}
	e := &ankbase.ExecutionState{}
	if e.AdditionalInfo, err = optStringPtr(m, "additionalInfo", path); err != nil {
		return nil, err
	}
	sv, hasState := present(m, "state")
	subv, hasSub := present(m, "subState")
	if !hasState {
		if hasSub {
			return nil, fieldErr(joinPath(path, "state"), "missing field (a subState needs its state)")
		}
		return e, nil
	}
	s, err := state.AsString(sv, joinPath(path, "state"))
	if err != nil {
		return nil, err
	}
	st := state.ExecState(s)
	if _, known := execCodes[st]; !known {
		return nil, fieldErr(joinPath(path, "state"), "unknown execution state '%s'", s)
	}
	var code int32
	if hasSub {
		sub, err := state.AsString(subv, joinPath(path, "subState"))
		if err != nil {
			return nil, err
		}
		var ok bool
		if code, ok = subToCode(st, sub); !ok {
			return nil, fieldErr(joinPath(path, "subState"), "'%s' is not a substate of %s", sub, st)
		}
	}
	setExecEnum(e, st, code)
	return e, nil
}
