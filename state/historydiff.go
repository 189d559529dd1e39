package state

import (
	"encoding/json"
	"maps"
	"slices"
	"strconv"
)

// maxHistoryValue is the most bytes of one field value a transaction
// keeps: enough to read a changed image or command line, not a whole
// runtimeConfig or file.
const maxHistoryValue = 256

// removedByServer is the state a transaction lists for an instance the
// server removed itself.
const removedByServer = "Removed (by the server: no agent would remove it)"

// TxOfUpdate is what an accepted update does to the store it is about to
// be applied to: the workloads added, updated (with the fields and their
// values before and after) and deleted, with their instance names, and
// the config items. It only reads s; the FSM calls it before
// ApplyDesired. Workloads and configs come sorted by name.
func TxOfUpdate(s *Store, u *DesiredUpdate) *Tx {
	tx := &Tx{Kind: TxUpdate, APIVersion: u.APIVersion}
	names := make([]string, 0, len(u.PutWorkloads)+len(u.PutRendered)+len(u.DeleteWorkloads))
	names = append(names, SortedKeys(u.PutWorkloads)...)
	for n := range u.PutRendered {
		if _, ok := u.PutWorkloads[n]; !ok {
			names = append(names, n)
		}
	}
	names = append(names, u.DeleteWorkloads...)
	slices.Sort(names)
	names = slices.Compact(names)
	for _, n := range names {
		old, had := s.Desired.Workloads[n]
		oldR, hadR := s.Rendered[n]
		w := TxWorkload{Name: n}
		if hadR {
			w.OldInstance = oldR.Instance.String()
		}
		if r, ok := u.PutRendered[n]; ok {
			w.Instance = r.Instance.String()
		}
		switch nw, put := u.PutWorkloads[n]; {
		case slices.Contains(u.DeleteWorkloads, n) && !put:
			w.Op = OpDeleted
		case put && !had:
			w.Op = OpAdded
			w.Changes = WorkloadChanges(nil, nw)
		case put:
			w.Op = OpUpdated
			w.Changes = WorkloadChanges(old, nw)
		default:
			// Rendered again for a changed config item; the spec is the
			// same.
			w.Op = OpUpdated
			w.Changes = []FieldChange{{Field: "rendering", Old: w.OldInstance, New: w.Instance}}
		}
		tx.Workloads = append(tx.Workloads, w)
	}
	// Instances no agent would report removed (unscheduled, or never
	// started on an agent that is not connected) the server removes
	// itself: a decision within the update.
	for _, in := range u.DeleteStates {
		name := in.String()
		i := slices.IndexFunc(tx.Workloads, func(w TxWorkload) bool { return w.Name == in.WorkloadName && w.OldInstance == name })
		if i < 0 {
			tx.Workloads = append(tx.Workloads, TxWorkload{Name: in.WorkloadName, Op: OpStates, OldInstance: name})
			i = len(tx.Workloads) - 1
		}
		tx.Workloads[i].States = append(tx.Workloads[i].States, removedByServer)
	}
	for _, k := range SortedKeys(u.PutConfigs) {
		op := OpUpdated
		if _, ok := s.Desired.Configs[k]; !ok {
			op = OpAdded
		}
		tx.Configs = append(tx.Configs, TxConfig{Key: k, Op: op})
	}
	for _, k := range u.DeleteConfigs {
		tx.Configs = append(tx.Configs, TxConfig{Key: k, Op: OpDeleted})
	}
	return tx
}

// WorkloadChanges lists the fields in which two workload specs differ,
// in manifest order and spelling, with their values shortened; old nil
// lists every field new sets.
func WorkloadChanges(old, nw *Workload) []FieldChange {
	var o Workload
	if old != nil {
		o = *old
	}
	var out []FieldChange
	add := func(field, a, b string) {
		if a != b {
			out = append(out, FieldChange{Field: field, Old: shorten(a), New: shorten(b)})
		}
	}
	add("agent", o.Agent, nw.Agent)
	if old != nil || nw.RestartPolicy != "" {
		add("restartPolicy", string(restartPolicy(o.RestartPolicy)), string(restartPolicy(nw.RestartPolicy)))
	}
	if !maps.Equal(o.Dependencies, nw.Dependencies) {
		add("dependencies", jsonText(o.Dependencies), jsonText(nw.Dependencies))
	}
	if !maps.Equal(o.Tags, nw.Tags) {
		add("tags", jsonText(o.Tags), jsonText(nw.Tags))
	}
	add("runtime", o.Runtime, nw.Runtime)
	add("runtimeConfig", o.RuntimeConfig, nw.RuntimeConfig)
	if !maps.Equal(o.Configs, nw.Configs) {
		add("configs", jsonText(o.Configs), jsonText(nw.Configs))
	}
	if !slices.Equal(o.Files, nw.Files) {
		add("files", filesText(o.Files), filesText(nw.Files))
	}
	oa, na := o.ControlInterfaceAccess, nw.ControlInterfaceAccess
	if !slices.EqualFunc(oa.AllowRules, na.AllowRules, sameRule) || !slices.EqualFunc(oa.DenyRules, na.DenyRules, sameRule) {
		add("controlInterfaceAccess", accessText(oa), accessText(na))
	}
	return out
}

// jsonText is a map as JSON (keys sorted), empty for an empty map.
func jsonText[V any](m map[string]V) string {
	if len(m) == 0 {
		return ""
	}
	b, err := json.Marshal(m)
	if err != nil {
		return "?"
	}
	return string(b)
}

// filesText names the mounted files and the size of each, not their
// content.
func filesText(fs []File) string {
	s := ""
	for i, f := range fs {
		if i > 0 {
			s += ", "
		}
		s += f.MountPoint + " (" + strconv.Itoa(len(f.Content)) + " bytes)"
	}
	return s
}

// accessText counts the rules.
func accessText(a ControlInterfaceAccess) string {
	if len(a.AllowRules) == 0 && len(a.DenyRules) == 0 {
		return ""
	}
	return strconv.Itoa(len(a.AllowRules)) + " allow, " + strconv.Itoa(len(a.DenyRules)) + " deny rules"
}

// shorten cuts a value at maxHistoryValue bytes (on a rune boundary)
// and says how long it was.
func shorten(s string) string {
	if len(s) <= maxHistoryValue {
		return s
	}
	cut := maxHistoryValue
	for cut > 0 && s[cut]&0xC0 == 0x80 {
		cut--
	}
	return s[:cut] + "… (" + strconv.Itoa(len(s)) + " bytes)"
}

// RemovedTransitions are the transitions of the instances an update
// removes itself (DeleteStates), for the instances s holds a state of.
func RemovedTransitions(s *Store, u *DesiredUpdate, index uint64, timeMs int64) []Transition {
	var out []Transition
	for _, in := range u.DeleteStates {
		if _, ok := s.States.Get(in); ok {
			out = append(out, Transition{Index: index, TimeMs: timeMs, Instance: in, State: Removed})
		}
	}
	return out
}

// UnknownRemovals lists, as transitions at index and timeMs, the Removed
// states of instances s holds no state of: what TransitionsOf leaves
// out. An agent's drift repair reports such a state for an unknown
// instance with its labels that it removed; it is no transition (the
// store never held the instance), but it is a repair.
func UnknownRemovals(s *Store, states []WorkloadState, index uint64, timeMs int64) []Transition {
	var out []Transition
	for _, ws := range states {
		if _, ok := s.States.Get(ws.Instance); !ok && ws.State.IsRemoved() {
			out = append(out, Transition{Index: index, TimeMs: timeMs, Instance: ws.Instance, State: ws.State})
		}
	}
	return out
}

// TransitionsOf lists the states that differ from what s holds, as
// transitions at index and timeMs; a Removed state of an instance s does
// not hold is no transition.
func TransitionsOf(s *Store, states []WorkloadState, index uint64, timeMs int64) []Transition {
	var out []Transition
	for _, ws := range states {
		old, ok := s.States.Get(ws.Instance)
		if ok && old == ws.State || !ok && ws.State.IsRemoved() {
			continue
		}
		out = append(out, Transition{Index: index, TimeMs: timeMs, Instance: ws.Instance, State: ws.State})
	}
	return out
}
