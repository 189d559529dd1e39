package state

import (
	"maps"
	"strings"
)

// Roots and fields an update mask can address.
const (
	keyAgents    = "agents"
	keyTags      = "tags"
	keyWorkloads = "workloads"
	keyConfigs   = "configs"
)

// ApplyUpdateMask computes the desired state and agent tags that an
// UpdateStateRequest asks for.
//
// cur is the current desired state and curTags the tags of the connected
// agents; neither is modified, and the result may share unchanged
// *Workload values and config items with cur, as those are immutable. Its
// maps are its own. newState is the Tree view of the request's
// CompleteState: only what the client sent.
//
// Without masks the desired state is newState's desiredState as a whole,
// and every connected agent for which newState carries tags gets those.
// With masks each path is copied from newState when it is there (creating
// its parents) and removed when it is not; a null value counts as absent,
// and a parent that cannot hold the path (a string, or a sequence without
// that index) is an error. Only desiredState... and agents.<name>.tags...
// are taken; other roots, and tags of agents that are not connected, are
// ignored. Wildcards are rejected. Workloads edited field by field are
// decoded after the last mask, so several masks may build one together.
//
// Besides one copy of the workload and config maps, the work is
// proportional to what the masks touch: a mask into one workload converts
// only that workload to a Tree and back.
func ApplyUpdateMask(cur State, curTags map[string]map[string]string, newState Tree, masks []string) (State, map[string]map[string]string, error) {
	u := &updater{
		res:      State{APIVersion: cur.APIVersion, Workloads: cur.Workloads, Configs: cur.Configs},
		tags:     cloneTags(curTags),
		newState: newState,
		api:      requestAPIVersion(newState, cur.APIVersion),
	}
	if len(masks) == 0 {
		if err := u.replaceAll(); err != nil {
			return State{}, nil, err
		}
	}
	for _, m := range masks {
		if err := u.apply(m); err != nil {
			return State{}, nil, err
		}
	}
	if err := u.decodeEdited(); err != nil {
		return State{}, nil, err
	}
	u.ownWorkloads()
	u.ownConfigs()
	return u.res, u.tags, nil
}

// updater carries one ApplyUpdateMask call. res starts out sharing cur's
// maps; the own* methods copy a map before its first change.
type updater struct {
	res       State
	ownedWls  bool
	ownedCfgs bool
	// edited holds the workloads changed field by field, as trees. They
	// are decoded once all masks are in, as several masks may be needed
	// to make a workload complete.
	edited   map[string]any
	tags     map[string]map[string]string
	newState Tree
	// api selects the tag format when decoding workloads: the request's
	// apiVersion if it carries one, else the current one.
	api string
}

func requestAPIVersion(newState Tree, current string) string {
	if v, ok := GetPath(newState, []string{keyDesiredState, keyAPIVersion}); ok {
		if s, ok := v.(string); ok {
			return s
		}
	}
	return current
}

func cloneTags(in map[string]map[string]string) map[string]map[string]string {
	out := make(map[string]map[string]string, len(in))
	for name, tags := range in {
		out[name] = maps.Clone(tags)
		if out[name] == nil {
			out[name] = map[string]string{}
		}
	}
	return out
}

func (u *updater) ownWorkloads() {
	if u.ownedWls {
		return
	}
	u.res.Workloads = maps.Clone(u.res.Workloads)
	if u.res.Workloads == nil {
		u.res.Workloads = map[string]*Workload{}
	}
	u.ownedWls = true
}

func (u *updater) ownConfigs() {
	if u.ownedCfgs {
		return
	}
	u.res.Configs = maps.Clone(u.res.Configs)
	if u.res.Configs == nil {
		u.res.Configs = map[string]any{}
	}
	u.ownedCfgs = true
}

// replaceAll is the empty-mask update.
func (u *updater) replaceAll() error {
	ds := u.newState[keyDesiredState]
	m, err := AsMap(ds, keyDesiredState)
	if err != nil {
		return err
	}
	s, err := DecodeState(m, keyDesiredState)
	if err != nil {
		return err
	}
	u.setState(s)
	av := u.newState[keyAgents]
	agents, err := AsMap(av, keyAgents)
	if err != nil {
		return err
	}
	for _, name := range SortedKeys(u.tags) {
		entry, ok := agents[name]
		if !ok || entry == nil {
			continue
		}
		p := keyAgents + "." + name
		em, err := AsMap(entry, p)
		if err != nil {
			return err
		}
		tv, ok := em[keyTags]
		if !ok {
			continue
		}
		tags, err := DecodeTags(tv, p+"."+keyTags)
		if err != nil {
			return err
		}
		u.tags[name] = tags
	}
	return nil
}

func (u *updater) setState(s State) {
	u.res = s
	u.edited = nil
	u.ownedWls, u.ownedCfgs = false, false
	u.ownWorkloads()
	u.ownConfigs()
}

// apply carries out one mask. A value that is present but null counts as
// absent, as it does when decoding.
func (u *updater) apply(mask string) error {
	if mask == "" {
		return &FieldError{Reason: "an update mask entry must not be empty"}
	}
	segs := SplitMask(mask)
	for _, s := range segs {
		switch s {
		case wildcard:
			return fieldErr(mask, "wildcards are not allowed in update masks")
		case "":
			return fieldErr(mask, "update mask has an empty segment")
		}
	}
	v, present := GetPath(u.newState, segs)
	present = present && v != nil
	switch segs[0] {
	case keyDesiredState:
		return u.desired(mask, segs[1:], v, present)
	case keyAgents:
		if len(segs) >= 3 && segs[2] == keyTags {
			return u.agentTags(mask, segs[1], segs[3:], v, present)
		}
	}
	return nil
}

func (u *updater) desired(mask string, rest []string, v any, present bool) error {
	if len(rest) == 0 {
		if !present {
			u.setState(State{})
			return nil
		}
		m, err := AsMap(v, keyDesiredState)
		if err != nil {
			return err
		}
		s, err := DecodeState(m, keyDesiredState)
		if err != nil {
			return err
		}
		u.setState(s)
		return nil
	}
	switch rest[0] {
	case keyAPIVersion:
		return u.apiVersion(mask, rest[1:], v, present)
	case keyWorkloads:
		return u.workloads(mask, rest[1:], v, present)
	case keyConfigs:
		return u.configs(mask, rest[1:], v, present)
	}
	if present {
		return fieldErr(keyDesiredState+"."+rest[0], "unknown field")
	}
	return nil
}

func (u *updater) apiVersion(mask string, deeper []string, v any, present bool) error {
	p := keyDesiredState + "." + keyAPIVersion
	if len(deeper) > 0 {
		if present {
			return fieldErr(mask, "%s is a string and has no field '%s'", p, deeper[0])
		}
		return nil
	}
	if !present {
		u.res.APIVersion = ""
		return nil
	}
	s, err := AsString(v, p)
	if err != nil {
		return err
	}
	u.res.APIVersion = s
	return nil
}

func (u *updater) workloads(mask string, rest []string, v any, present bool) error {
	base := keyDesiredState + "." + keyWorkloads
	if len(rest) == 0 {
		wls := map[string]*Workload{}
		if present {
			m, err := AsMap(v, base)
			if err != nil {
				return err
			}
			for _, name := range SortedKeys(m) {
				w, err := DecodeWorkload(m[name], base+"."+name, u.api)
				if err != nil {
					return err
				}
				wls[name] = w
			}
		}
		u.res.Workloads, u.ownedWls = wls, true
		u.edited = nil
		return nil
	}
	name := rest[0]
	p := base + "." + name
	if len(rest) == 1 {
		delete(u.edited, name)
		if !present {
			if _, ok := u.res.Workloads[name]; ok {
				u.ownWorkloads()
				delete(u.res.Workloads, name)
			}
			return nil
		}
		w, err := DecodeWorkload(v, p, u.api)
		if err != nil {
			return err
		}
		u.ownWorkloads()
		u.res.Workloads[name] = w
		return nil
	}
	t, ok := u.edited[name]
	if !ok {
		t = Tree{}
		if old, ok := u.res.Workloads[name]; ok {
			wt := old.ToTree()
			if u.api == APIVersionLegacy {
				wt[keyTags] = legacyTags(old.Tags)
			}
			t = wt
		}
	}
	t, changed, err := editTree(mask, p, t, rest[1:], v, present)
	if err != nil || !changed {
		return err
	}
	if u.edited == nil {
		u.edited = map[string]any{}
	}
	u.edited[name] = t
	return nil
}

// decodeEdited turns the workloads edited field by field back into the
// model.
func (u *updater) decodeEdited() error {
	for _, name := range SortedKeys(u.edited) {
		w, err := DecodeWorkload(u.edited[name], keyDesiredState+"."+keyWorkloads+"."+name, u.api)
		if err != nil {
			return err
		}
		u.ownWorkloads()
		u.res.Workloads[name] = w
	}
	return nil
}

// legacyTags writes tags in the v0.1 form, a list of {key, value}.
func legacyTags(tags map[string]string) []any {
	out := make([]any, 0, len(tags))
	for _, k := range SortedKeys(tags) {
		out = append(out, map[string]any{"key": k, "value": tags[k]})
	}
	return out
}

func (u *updater) configs(mask string, rest []string, v any, present bool) error {
	base := keyDesiredState + "." + keyConfigs
	if len(rest) == 0 {
		cfgs := map[string]any{}
		if present {
			m, err := AsMap(v, base)
			if err != nil {
				return err
			}
			for _, k := range SortedKeys(m) {
				item, err := DecodeConfigItem(m[k], base+"."+k)
				if err != nil {
					return err
				}
				cfgs[k] = item
			}
		}
		u.res.Configs, u.ownedCfgs = cfgs, true
		return nil
	}
	key := rest[0]
	p := base + "." + key
	if len(rest) == 1 {
		if !present {
			if _, ok := u.res.Configs[key]; ok {
				u.ownConfigs()
				delete(u.res.Configs, key)
			}
			return nil
		}
		item, err := DecodeConfigItem(v, p)
		if err != nil {
			return err
		}
		u.ownConfigs()
		u.res.Configs[key] = item
		return nil
	}
	var t any = Tree{}
	if old, ok := u.res.Configs[key]; ok {
		t = CloneValue(old)
	}
	t, changed, err := editTree(mask, p, t, rest[1:], v, present)
	if err != nil || !changed {
		return err
	}
	item, err := DecodeConfigItem(t, p)
	if err != nil {
		return err
	}
	u.ownConfigs()
	u.res.Configs[key] = item
	return nil
}

func (u *updater) agentTags(mask, agent string, rest []string, v any, present bool) error {
	old, connected := u.tags[agent]
	if !connected {
		return nil
	}
	p := keyAgents + "." + agent + "." + keyTags
	if len(rest) == 0 {
		if !present {
			u.tags[agent] = map[string]string{}
			return nil
		}
		tags, err := DecodeTags(v, p)
		if err != nil {
			return err
		}
		u.tags[agent] = tags
		return nil
	}
	t, changed, err := editTree(mask, p, stringMapTree(old), rest, v, present)
	if err != nil || !changed {
		return err
	}
	tags, err := DecodeTags(t, p)
	if err != nil {
		return err
	}
	u.tags[agent] = tags
	return nil
}

// editTree sets (present) or removes the value at path below t, a private
// copy of the field at prefix, and returns the new t and whether anything
// changed. A parent on the way that cannot hold the path is an error.
func editTree(mask, prefix string, t any, path []string, v any, present bool) (any, bool, error) {
	if !present {
		nt, ok := removeIn(t, path)
		return nt, ok, nil
	}
	nt, blocked := setIn(t, path, v, false)
	if blocked < 0 {
		return nt, true, nil
	}
	at := prefix
	if blocked > 0 {
		at += "." + strings.Join(path[:blocked], ".")
	}
	parent, _ := valueAt(t, path[:blocked])
	if _, isList := parent.([]any); isList {
		return nil, false, fieldErr(mask, "cannot set field: %s is a list and '%s' is not an index in it", at, path[blocked])
	}
	return nil, false, fieldErr(mask, "cannot set field: %s is %s, not a map", at, TypeName(parent))
}
