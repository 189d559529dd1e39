package state

import (
	"fmt"
	"math"
	"strconv"
)

// DecodeState converts the Tree view of a desired state into the model. It
// rejects unknown fields and wrong types with an error naming the field.
// The apiVersion is not checked here (see CheckAPIVersion) but selects the
// legacy v0.1 tag format.
func DecodeState(t Tree, path string) (State, error) {
	s := State{Workloads: map[string]*Workload{}, Configs: map[string]any{}}
	if err := onlyKeys(t, path, "apiVersion", "workloads", "configs"); err != nil {
		return s, err
	}
	if v, ok := t["apiVersion"]; ok && v != nil {
		str, err := AsString(v, join(path, "apiVersion"))
		if err != nil {
			return s, err
		}
		s.APIVersion = str
	}
	if v, ok := t["workloads"]; ok && v != nil {
		m, err := AsMap(v, join(path, "workloads"))
		if err != nil {
			return s, err
		}
		for _, name := range SortedKeys(m) {
			w, err := DecodeWorkload(m[name], join(path, "workloads."+name), s.APIVersion)
			if err != nil {
				return s, err
			}
			s.Workloads[name] = w
		}
	}
	if v, ok := t["configs"]; ok && v != nil {
		m, err := AsMap(v, join(path, "configs"))
		if err != nil {
			return s, err
		}
		for _, k := range SortedKeys(m) {
			item, err := DecodeConfigItem(m[k], join(path, "configs."+k))
			if err != nil {
				return s, err
			}
			s.Configs[k] = item
		}
	}
	return s, nil
}

// DecodeWorkload converts the Tree view of one workload.
func DecodeWorkload(v any, path, apiVersion string) (*Workload, error) {
	t, err := AsMap(v, path)
	if err != nil {
		return nil, err
	}
	if err := onlyKeys(t, path, "agent", "tags", "dependencies", "restartPolicy", "runtime",
		"runtimeConfig", "configs", "files", "controlInterfaceAccess"); err != nil {
		return nil, err
	}
	w := &Workload{RestartPolicy: RestartNever}
	if w.Agent, err = optString(t, "agent", path); err != nil {
		return nil, err
	}
	if w.Runtime, err = optString(t, "runtime", path); err != nil {
		return nil, err
	}
	if _, ok := t["runtime"]; !ok {
		return nil, fieldErr(join(path, "runtime"), "missing field")
	}
	if _, ok := t["runtimeConfig"]; !ok {
		return nil, fieldErr(join(path, "runtimeConfig"), "missing field")
	}
	if w.RuntimeConfig, err = optString(t, "runtimeConfig", path); err != nil {
		return nil, err
	}
	if v, ok := t["restartPolicy"]; ok && v != nil {
		s, err := AsString(v, join(path, "restartPolicy"))
		if err != nil {
			return nil, err
		}
		switch RestartPolicy(s) {
		case RestartNever, RestartOnFailure, RestartAlways:
			w.RestartPolicy = RestartPolicy(s)
		default:
			return nil, fieldErr(join(path, "restartPolicy"), "unknown restart policy '%s' (NEVER, ON_FAILURE or ALWAYS)", s)
		}
	}
	if w.Tags, err = decodeTags(t["tags"], join(path, "tags"), apiVersion); err != nil {
		return nil, err
	}
	if w.Configs, err = decodeStringMap(t["configs"], join(path, "configs")); err != nil {
		return nil, err
	}
	if v, ok := t["dependencies"]; ok && v != nil {
		m, err := AsMap(v, join(path, "dependencies"))
		if err != nil {
			return nil, err
		}
		w.Dependencies = make(map[string]AddCondition, len(m))
		for _, k := range SortedKeys(m) {
			s, err := AsString(m[k], join(path, "dependencies."+k))
			if err != nil {
				return nil, err
			}
			switch AddCondition(s) {
			case AddCondRunning, AddCondSucceeded, AddCondFailed:
				w.Dependencies[k] = AddCondition(s)
			default:
				return nil, fieldErr(join(path, "dependencies."+k), "unknown add condition '%s' (ADD_COND_RUNNING, ADD_COND_SUCCEEDED or ADD_COND_FAILED)", s)
			}
		}
	}
	if v, ok := t["files"]; ok && v != nil {
		if w.Files, err = decodeFiles(v, join(path, "files")); err != nil {
			return nil, err
		}
	}
	if v, ok := t["controlInterfaceAccess"]; ok && v != nil {
		if w.ControlInterfaceAccess, err = decodeAccess(v, join(path, "controlInterfaceAccess")); err != nil {
			return nil, err
		}
	}
	return w, nil
}

func decodeFiles(v any, path string) ([]File, error) {
	list, err := AsList(v, path)
	if err != nil {
		return nil, err
	}
	files := make([]File, 0, len(list))
	for i, e := range list {
		p := fmt.Sprintf("%s.%d", path, i)
		m, err := AsMap(e, p)
		if err != nil {
			return nil, err
		}
		if err := onlyKeys(m, p, "mountPoint", "data", "binaryData"); err != nil {
			return nil, err
		}
		var f File
		if f.MountPoint, err = optString(m, "mountPoint", p); err != nil {
			return nil, err
		}
		_, hasData := m["data"]
		_, hasBin := m["binaryData"]
		switch {
		case hasData && hasBin:
			return nil, fieldErr(p, "a file has either data or binaryData, not both")
		case hasData:
			f.Content, err = optString(m, "data", p)
		case hasBin:
			f.Content, err = optString(m, "binaryData", p)
			f.Binary = true
		default:
			return nil, fieldErr(p, "a file needs data or binaryData")
		}
		if err != nil {
			return nil, err
		}
		files = append(files, f)
	}
	return files, nil
}

func decodeAccess(v any, path string) (ControlInterfaceAccess, error) {
	var a ControlInterfaceAccess
	m, err := AsMap(v, path)
	if err != nil {
		return a, err
	}
	if err := onlyKeys(m, path, "allowRules", "denyRules"); err != nil {
		return a, err
	}
	if a.AllowRules, err = decodeRules(m["allowRules"], join(path, "allowRules")); err != nil {
		return a, err
	}
	a.DenyRules, err = decodeRules(m["denyRules"], join(path, "denyRules"))
	return a, err
}

func decodeRules(v any, path string) ([]AccessRule, error) {
	if v == nil {
		return nil, nil
	}
	list, err := AsList(v, path)
	if err != nil {
		return nil, err
	}
	var rules []AccessRule
	for i, e := range list {
		p := fmt.Sprintf("%s.%d", path, i)
		m, err := AsMap(e, p)
		if err != nil {
			return nil, err
		}
		typ, err := optString(m, "type", p)
		if err != nil {
			return nil, err
		}
		switch typ {
		case "StateRule":
			if err := onlyKeys(m, p, "type", "operation", "filterMasks", "filterMask"); err != nil {
				return nil, err
			}
			r := AccessRule{Operation: RWNothing}
			if op, ok := m["operation"]; ok && op != nil {
				s, err := AsString(op, join(p, "operation"))
				if err != nil {
					return nil, err
				}
				switch ReadWrite(s) {
				case RWNothing, RWRead, RWWrite, RWReadWrite:
					r.Operation = ReadWrite(s)
				default:
					return nil, fieldErr(join(p, "operation"), "unknown operation '%s' (Nothing, Read, Write or ReadWrite)", s)
				}
			}
			key := "filterMasks"
			if _, ok := m[key]; !ok {
				key = "filterMask" // accepted as in the v0.1 format
			}
			if r.FilterMasks, err = decodeStrings(m[key], join(p, key)); err != nil {
				return nil, err
			}
			rules = append(rules, r)
		case "LogRule":
			if err := onlyKeys(m, p, "type", "workloadNames"); err != nil {
				return nil, err
			}
			r := AccessRule{IsLogRule: true}
			if r.WorkloadNames, err = decodeStrings(m["workloadNames"], join(p, "workloadNames")); err != nil {
				return nil, err
			}
			rules = append(rules, r)
		default:
			return nil, fieldErr(join(p, "type"), "unknown rule type '%s' (StateRule or LogRule)", typ)
		}
	}
	return rules, nil
}

func decodeTags(v any, path, apiVersion string) (map[string]string, error) {
	if v == nil {
		return map[string]string{}, nil
	}
	if list, ok := v.([]any); ok {
		if apiVersion != APIVersionLegacy {
			return nil, fieldErr(path, "tags are a map in API version %s; the list form belongs to %s", APIVersion, APIVersionLegacy)
		}
		out := make(map[string]string, len(list))
		for i, e := range list {
			p := fmt.Sprintf("%s.%d", path, i)
			m, err := AsMap(e, p)
			if err != nil {
				return nil, err
			}
			if err := onlyKeys(m, p, "key", "value"); err != nil {
				return nil, err
			}
			k, err := optString(m, "key", p)
			if err != nil {
				return nil, err
			}
			val, err := optString(m, "value", p)
			if err != nil {
				return nil, err
			}
			out[k] = val
		}
		return out, nil
	}
	if apiVersion == APIVersionLegacy {
		return nil, fieldErr(path, "tags are a list of {key, value} in API version %s", APIVersionLegacy)
	}
	return decodeStringMap(v, path)
}

// DecodeTags converts the map form of tags (agents.<name>.tags).
func DecodeTags(v any, path string) (map[string]string, error) { return decodeStringMap(v, path) }

func decodeStringMap(v any, path string) (map[string]string, error) {
	if v == nil {
		return map[string]string{}, nil
	}
	m, err := AsMap(v, path)
	if err != nil {
		return nil, err
	}
	out := make(map[string]string, len(m))
	for k, e := range m {
		s, err := asScalarString(e, join(path, k))
		if err != nil {
			return nil, err
		}
		out[k] = s
	}
	return out, nil
}

// DecodeStrings decodes a list of strings, naming the element that is not
// one; nil decodes to nil.
func DecodeStrings(v any, path string) ([]string, error) { return decodeStrings(v, path) }

func decodeStrings(v any, path string) ([]string, error) {
	if v == nil {
		return nil, nil
	}
	list, err := AsList(v, path)
	if err != nil {
		return nil, err
	}
	out := make([]string, len(list))
	for i, e := range list {
		if out[i], err = AsString(e, fmt.Sprintf("%s.%d", path, i)); err != nil {
			return nil, err
		}
	}
	return out, nil
}

// DecodeConfigItem normalises a config item: strings stay, other scalars
// become their text, lists and maps are decoded recursively.
func DecodeConfigItem(v any, path string) (any, error) {
	switch x := v.(type) {
	case []any:
		out := make([]any, len(x))
		for i, e := range x {
			item, err := DecodeConfigItem(e, fmt.Sprintf("%s.%d", path, i))
			if err != nil {
				return nil, err
			}
			out[i] = item
		}
		return out, nil
	case map[string]any:
		out := make(map[string]any, len(x))
		for k, e := range x {
			item, err := DecodeConfigItem(e, join(path, k))
			if err != nil {
				return nil, err
			}
			out[k] = item
		}
		return out, nil
	case map[any]any:
		m, err := AsMap(x, path)
		if err != nil {
			return nil, err
		}
		return DecodeConfigItem(m, path)
	}
	return asScalarString(v, path)
}

// OnlyKeys rejects a key of t that is not allowed, naming it; decoders of
// Tree views outside this package use it too.
func OnlyKeys(t map[string]any, path string, allowed ...string) error {
	return onlyKeys(t, path, allowed...)
}

func onlyKeys(t map[string]any, path string, allowed ...string) error {
	for _, k := range SortedKeys(t) {
		found := false
		for _, a := range allowed {
			if k == a {
				found = true
				break
			}
		}
		if !found {
			return fieldErr(join(path, k), "unknown field")
		}
	}
	return nil
}

func optString(t map[string]any, key, path string) (string, error) {
	v, ok := t[key]
	if !ok || v == nil {
		return "", nil
	}
	return AsString(v, join(path, key))
}

// The As helpers read one value of a Tree (as YAML, JSON or a field-masked
// read leaves it) as the kind a field needs, or return a FieldError for
// path naming what was there instead. The wire conversions of package rpc
// use them too.

// AsString reads a string.
func AsString(v any, path string) (string, error) {
	s, ok := v.(string)
	if !ok {
		return "", fieldErr(path, "expected a string, got %s", TypeName(v))
	}
	return s, nil
}

// asScalarString accepts any scalar and gives its text, so that `port: 80`
// in a tag or config item is taken as "80".
func asScalarString(v any, path string) (string, error) {
	switch x := v.(type) {
	case string:
		return x, nil
	case bool:
		return strconv.FormatBool(x), nil
	case int:
		return strconv.Itoa(x), nil
	case int64:
		return strconv.FormatInt(x, 10), nil
	case uint64:
		return strconv.FormatUint(x, 10), nil
	case float64:
		if x == math.Trunc(x) && math.Abs(x) < 1e15 {
			return strconv.FormatInt(int64(x), 10), nil
		}
		return strconv.FormatFloat(x, 'g', -1, 64), nil
	}
	return "", fieldErr(path, "expected a string, got %s", TypeName(v))
}

// AsMap reads a map with string keys; a null is an empty map, as an empty
// `workloads:` in a manifest is no workloads.
func AsMap(v any, path string) (map[string]any, error) {
	switch x := v.(type) {
	case map[string]any:
		return x, nil
	case map[any]any:
		out := make(map[string]any, len(x))
		for k, e := range x {
			ks, ok := k.(string)
			if !ok {
				return nil, fieldErr(path, "map keys must be strings, got %s", TypeName(k))
			}
			out[ks] = e
		}
		return out, nil
	case nil:
		return map[string]any{}, nil
	}
	return nil, fieldErr(path, "expected a map, got %s", TypeName(v))
}

// AsList reads a list; a null is an empty one.
func AsList(v any, path string) ([]any, error) {
	switch x := v.(type) {
	case []any:
		return x, nil
	case nil:
		return nil, nil
	}
	return nil, fieldErr(path, "expected a list, got %s", TypeName(v))
}

// TypeName names the kind of a Tree value for error messages.
func TypeName(v any) string {
	switch v.(type) {
	case nil:
		return "nothing"
	case string:
		return "a string"
	case bool:
		return "a boolean"
	case int, int64, uint64, float64:
		return "a number"
	case []any:
		return "a list"
	case map[string]any, map[any]any:
		return "a map"
	}
	return fmt.Sprintf("%T", v)
}
