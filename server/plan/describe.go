package plan

import (
	"encoding/json"
	"fmt"
	"strings"

	"github.com/grapnel-io/grapnel/placement"
	"github.com/grapnel-io/grapnel/rpc/grapnelpb"
	"github.com/grapnel-io/grapnel/state"
)

// describePlan fills resp with what a plan does, as a dry-run answers
// it: the workloads added, updated (with the fields that change) and
// deleted, the config items, and per agent the order of its actions. It
// reads st, the store the plan was made on, and changes nothing; what it
// computes beyond the plan is proportional to the workloads the update
// changes, not to the state.
func describePlan(resp *grapnelpb.PlanResponse, st *state.Store, next state.State, pd *planned) {
	d, rd := pd.diff, pd.rd
	resp.Changed = pd.Changed
	resp.ApiVersion = pd.Update.APIVersion
	resp.Workloads = plannedWorkloads(st, next, pd)
	for _, k := range state.SortedKeys(d.changedCfg) {
		change := "changed"
		if _, ok := st.Desired.Configs[k]; !ok {
			change = "added"
		} else if _, ok := next.Configs[k]; !ok {
			change = "deleted"
		}
		resp.Configs = append(resp.Configs, &grapnelpb.ConfigChange{Key: k, Change: change})
	}
	var blocked []string
	resp.Agents, blocked = agentPlans(st, pd)
	resp.Warnings = append(planWarnings(st, next, d, rd), blocked...)
	resp.Warnings = append(resp.Warnings, placementWarnings(st, pd.placed)...)
}

// placementWarnings names what the allocator does once the update is
// made: each placed workload it lays out anew, with the agents it gets
// and loses (an eviction by a pinned workload is one), and each it cannot
// place as asked.
func placementWarnings(st *state.Store, pl *Placed) []string {
	if pl == nil {
		return nil
	}
	var out []string
	for _, c := range placement.Diff(placement.Layout(st.Placement), pl.Update.Layout) {
		if _, changed := pl.Update.Layout[c.Workload]; !changed {
			continue
		}
		msg := fmt.Sprintf("placed workload '%s' is laid out anew after the update:", c.Workload)
		if len(c.Added) > 0 {
			msg += fmt.Sprintf(" onto %s", strings.Join(c.Added, ", "))
		}
		if len(c.Removed) > 0 {
			msg += fmt.Sprintf(" off %s", strings.Join(c.Removed, ", "))
		}
		out = append(out, msg)
	}
	for _, u := range pl.Unsatisfied {
		out = append(out, fmt.Sprintf("placed workload '%s' gets %d of the %d instances it asks for (%s)", u.Workload, u.Placed, u.Wanted, u.Reason))
	}
	return out
}

// plannedWorkloads lists, by name, every workload the update adds,
// changes or deletes in the desired state, and those it renders again
// because a config item they reference changed.
//
// swdd~server-detects-new-workload~1
// swdd~server-detects-deleted-workload~1
// swdd~server-detects-changed-workload~1
func plannedWorkloads(st *state.Store, next state.State, pd *planned) []*grapnelpb.PlannedWorkload {
	d, rd := pd.diff, pd.rd
	names := map[string]bool{}
	for n := range d.changed.Workloads {
		names[n] = true
	}
	for _, n := range d.deletedWl {
		names[n] = true
	}
	for n := range rd.put {
		names[n] = true
	}
	serverRemoves := map[state.InstanceName]bool{}
	for _, del := range pd.Deleted {
		if del.ServerHandled {
			serverRemoves[del.Instance] = true
		}
	}
	var out []*grapnelpb.PlannedWorkload
	for _, n := range sortedSet(names) {
		old, had := st.Desired.Workloads[n]
		oldR, hadR := st.Rendered[n]
		w, keeps := next.Workloads[n]
		nr, rendered := rd.put[n]
		pw := &grapnelpb.PlannedWorkload{Name: n}
		switch {
		case !keeps:
			pw.Change, pw.Agent = "deleted", old.Agent
			if hadR {
				pw.OldInstance = oldR.Instance.String()
				pw.ServerRemoves = serverRemoves[oldR.Instance]
			}
		case !had:
			pw.Change, pw.Agent = "added", w.Agent
			if rendered {
				pw.Instance = nr.Instance.String()
			}
		default:
			pw.Change, pw.Agent = "updated", w.Agent
			if hadR {
				pw.OldInstance = oldR.Instance.String()
				pw.Instance = pw.OldInstance
			}
			if rendered && hadR {
				pw.Instance = nr.Instance.String()
				pw.Fields = fieldChanges(oldR.Workload, nr.Workload)
			} else {
				pw.Fields = fieldChanges(old, w)
			}
			if _, ok := d.changed.Workloads[n]; ok {
				pw.Causes = append(pw.Causes, "spec")
			}
			for _, alias := range state.SortedKeys(w.Configs) {
				if key := w.Configs[alias]; d.changedCfg[key] {
					pw.Causes = append(pw.Causes, fmt.Sprintf("config '%s'", key))
				}
			}
		}
		out = append(out, pw)
	}
	return out
}

// fieldChanges is the field-level difference of two workloads: every
// leaf of their tree views whose value differs, by path, lists compared
// whole. Values are JSON text; an absent one is empty. They hold sealed
// secrets as tokens, which the caller masks (DryRun's mask).
func fieldChanges(old, cur *state.Workload) []*grapnelpb.FieldChange {
	a, b := map[string]string{}, map[string]string{}
	if old != nil {
		flatten("", map[string]any(old.ToTree()), a)
	}
	if cur != nil {
		flatten("", map[string]any(cur.ToTree()), b)
	}
	paths := map[string]bool{}
	for p, v := range a {
		if b[p] != v {
			paths[p] = true
		}
	}
	for p, v := range b {
		if a[p] != v {
			paths[p] = true
		}
	}
	out := make([]*grapnelpb.FieldChange, 0, len(paths))
	for _, p := range sortedSet(paths) {
		out = append(out, &grapnelpb.FieldChange{Path: p, Old: a[p], New: b[p]})
	}
	return out
}

// flatten writes the leaves of a tree into out by dotted path. Empty
// maps and lists are left out, so that an absent field and an empty one
// read the same.
func flatten(prefix string, v any, out map[string]string) {
	switch x := v.(type) {
	case map[string]any:
		for k, e := range x {
			p := k
			if prefix != "" {
				p = prefix + "." + k
			}
			flatten(p, e, out)
		}
	case []any:
		if len(x) > 0 {
			out[prefix] = jsonText(x)
		}
	default:
		out[prefix] = jsonText(x)
	}
}

func jsonText(v any) string {
	b, err := json.Marshal(v)
	if err != nil {
		return fmt.Sprint(v)
	}
	return string(b)
}

// planWarnings names what will not make the update fail but may keep a
// workload waiting: a dependency on a workload the desired state does
// not have (swdd~cycle-detection-ignores-non-existing-workloads~1: the
// server accepts it, the agent waits), and an agent not connected.
func planWarnings(st *state.Store, next state.State, d desiredDiff, rd *rendering) []string {
	var out []string
	for _, n := range d.deletedWl {
		for _, dep := range state.SortedKeys(st.DeleteGraph[n]) {
			if _, stays := next.Workloads[dep]; stays {
				if _, changed := d.changed.Workloads[dep]; !changed {
					out = append(out, fmt.Sprintf("workload '%s' depends on '%s', which the update deletes: a new instance of '%s' would wait until '%s' is added again", dep, n, dep, n))
				}
			}
		}
	}
	for _, n := range state.SortedKeys(d.changed.Workloads) {
		w := d.changed.Workloads[n]
		for _, dep := range state.SortedKeys(w.Dependencies) {
			if _, ok := next.Workloads[dep]; !ok {
				out = append(out, fmt.Sprintf("workload '%s' depends on '%s', which is not in the desired state: it waits until '%s' is added", n, dep, dep))
			}
		}
	}
	agents := map[string]bool{}
	for _, r := range rd.put {
		if a := r.Instance.AgentName; a != "" {
			if _, ok := st.Agents[a]; !ok {
				agents[a] = true
			}
		}
	}
	for _, a := range sortedSet(agents) {
		out = append(out, fmt.Sprintf("agent '%s' is not connected: its workloads start when it connects", a))
	}
	return out
}
