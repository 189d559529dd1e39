package plan

import "github.com/grapnel-io/grapnel/state"

// deletions is every instance an update deletes: the replaced ones, then
// those of the deleted workloads (deletedWl is sorted).
func deletions(st *state.Store, replaced []Deletion, deletedWl []string) []Deletion {
	deleted := replaced
	for _, n := range deletedWl {
		if old, had := st.Rendered[n]; had {
			deleted = append(deleted, Deletion{Instance: old.Instance})
		}
	}
	return deleted
}

// serverDeletes marks, in deleted, the instances the server deletes
// itself, and returns them: an unscheduled one, and one still
// Pending(Initial) on an agent that is not connected, since no agent
// would ever report its removal. An instance rendered again under the
// same name stays the agent's to delete.
//
// swdd~server-handles-not-started-deleted-workloads~1
func serverDeletes(st *state.Store, deleted []Deletion, readded map[state.InstanceName]bool, connected func(string) bool) []state.InstanceName {
	var out []state.InstanceName
	for i, d := range deleted {
		if readded[d.Instance] {
			continue
		}
		agent := d.Instance.AgentName
		s, _ := st.States.Get(d.Instance)
		if agent == "" || (s.IsPendingInitial() && (connected == nil || !connected(agent))) {
			deleted[i].ServerHandled = true
			out = append(out, d.Instance)
		}
	}
	return out
}
