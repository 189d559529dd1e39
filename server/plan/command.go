package plan

import (
	"reflect"

	"github.com/grapnel-io/grapnel/placement"
	"github.com/grapnel-io/grapnel/state"
)

// desiredUpdate builds the command's desired-state part: what changed,
// what is deleted, the new renderings and the initial state of each new
// instance (NotScheduled without an agent). Everything decided travels
// in it, so that every replica applies the same.
func desiredUpdate(cur, next state.State, d desiredDiff, rd *rendering) state.DesiredUpdate {
	var u state.DesiredUpdate
	if next.APIVersion != cur.APIVersion {
		u.APIVersion = next.APIVersion
	}
	if len(d.changed.Workloads) > 0 {
		u.PutWorkloads = d.changed.Workloads
	}
	u.DeleteWorkloads = d.deletedWl
	u.DeleteRendered = d.deletedWl
	if len(d.changed.Configs) > 0 {
		u.PutConfigs = d.changed.Configs
	}
	u.DeleteConfigs = d.deletedCfg
	if len(rd.put) > 0 {
		u.PutRendered = rd.put
	}
	for _, a := range rd.added {
		initial := state.PendingInitial
		if a.Instance.AgentName == "" {
			if placement.IsPlaced(a.Workload) {
				continue // its instances get their states when placed
			}
			initial = state.NotScheduled
		}
		u.SetStates = append(u.SetStates, state.WorkloadState{Instance: a.Instance, State: initial})
	}
	return u
}

// tagChanges is the tags of the stored agents that the update changes;
// nil if none.
func tagChanges(st *state.Store, tags map[string]map[string]string) map[string]map[string]string {
	var out map[string]map[string]string
	for agent, t := range tags {
		a, ok := st.Agents[agent]
		if !ok || reflect.DeepEqual(normTags(a.Tags), normTags(t)) {
			continue
		}
		if out == nil {
			out = map[string]map[string]string{}
		}
		out[agent] = t
	}
	return out
}
