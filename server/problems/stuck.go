package problems

import (
	"fmt"
	"slices"
	"strings"

	"github.com/grapnel-io/grapnel/state"
)

// Instances that sit in a state that waits for somebody: a deleted
// workload's instance in Stopping(WaitingToStop), held by the delete
// conditions of the workloads that depend on it, and a desired instance
// in Failed(Lost), which its agent lost and, under restart policy NEVER,
// never starts again. Both are ordinary for a moment (a delete waits for
// its dependents to stop; a lost instance with a restart policy is
// restarted within seconds), so an instance is reported only once it has
// sat in that state for StuckMs, by the time of the history's record of
// the transition into it. Without such a record (the history pruned it,
// or it was taken before this check) the state counts as old.
const StuckMs = 30 * 1000

// stuckInstances finds the deletes that wait for dependents and the
// desired instances that sit in Failed(Lost).
func stuckInstances(st *state.Store, f *Facts, _ *Cache, r *Result) {
	type stuck struct {
		in state.InstanceName
		es state.ExecutionState
	}
	var found []stuck
	for agent, byWl := range st.States {
		for wl, byID := range byWl {
			for id, es := range byID {
				in := state.InstanceName{WorkloadName: wl, AgentName: agent, ID: id}
				switch {
				case es.Is(state.StateStopping, state.SubWaitingToStop):
				case es.Is(state.StateFailed, state.SubLost) && slices.Contains(st.Instances(wl), in):
				default:
					continue
				}
				found = append(found, stuck{in, es})
			}
		}
	}
	if len(found) == 0 {
		return
	}
	entered := enteredAt(st)
	for _, s := range found {
		if t, ok := entered[s.in]; ok && t.State.Is(s.es.State, s.es.SubState) && f.NowMs-t.TimeMs < StuckMs {
			r.wakeAt(t.TimeMs + StuckMs)
			continue
		}
		if s.es.State == state.StateStopping {
			r.Findings = append(r.Findings, deleteWaiting(st, s.in, s.es))
		} else {
			r.Findings = append(r.Findings, instanceLost(s.in, s.es))
		}
	}
}

// enteredAt is the history's last transition of each instance.
func enteredAt(st *state.Store) map[state.InstanceName]state.Transition {
	out := map[state.InstanceName]state.Transition{}
	if st.History == nil {
		return out
	}
	for _, t := range st.History.Transitions {
		out[t.Instance] = t
	}
	return out
}

// deleteWaiting is the finding of an instance whose delete waits for its
// dependents: those of the delete graph that still depend on it.
func deleteWaiting(st *state.Store, in state.InstanceName, es state.ExecutionState) Finding {
	deps := slices.Sorted(func(yield func(string) bool) {
		for d := range st.DeleteGraph[in.WorkloadName] {
			if !yield(d) {
				return
			}
		}
	})
	objs := []state.ProblemObject{{Kind: ObjWorkload, Name: in.WorkloadName}, {Kind: ObjAgent, Name: in.AgentName},
		{Kind: ObjInstance, Name: in.String()}}
	for _, d := range deps[:min(len(deps), maxObjects)] {
		objs = append(objs, state.ProblemObject{Kind: ObjWorkload, Name: d})
	}
	who := "the workloads that depend on it"
	if len(deps) > 0 {
		who = "its dependents " + nameList(deps, maxListed)
	}
	why := ""
	if es.AdditionalInfo != "" {
		why = fmt.Sprintf(" The agent says: %s.", strings.TrimSuffix(es.AdditionalInfo, "."))
	}
	return Finding{
		Kind: DeleteWaiting, Key: key(DeleteWaiting, in.String()), Objects: objs,
		Summary: fmt.Sprintf("The delete of workload %s on agent %s waits for %s.", in.WorkloadName, in.AgentName, who),
		Detail: fmt.Sprintf("Instance %s is in Stopping(WaitingToStop): its agent deletes it only once %s are neither pending "+
			"nor running (their delete conditions, Ankaios's DEL_COND_NOT_PENDING_NOR_RUNNING), and it has waited at least "+
			"%d seconds.%s Delete or stop the dependents first, or remove their dependency on %s.",
			in, who, StuckMs/1000, why, in.WorkloadName),
	}
}

// instanceLost is the finding of a desired instance in Failed(Lost).
func instanceLost(in state.InstanceName, es state.ExecutionState) Finding {
	why := ""
	if es.AdditionalInfo != "" {
		why = fmt.Sprintf(" The agent says: %s.", strings.TrimSuffix(es.AdditionalInfo, "."))
	}
	return Finding{
		Kind: WorkloadLost, Key: key(WorkloadLost, in.String()),
		Objects: []state.ProblemObject{{Kind: ObjWorkload, Name: in.WorkloadName}, {Kind: ObjAgent, Name: in.AgentName},
			{Kind: ObjInstance, Name: in.String()}},
		Summary: fmt.Sprintf("Workload %s on agent %s is lost: it is desired but not running.", in.WorkloadName, in.AgentName),
		Detail: fmt.Sprintf("Instance %s has been in Failed(Lost) for at least %d seconds: its agent no longer finds it "+
			"(killed or removed behind the agent's back) and does not start it again, as its restart policy says "+
			"(NEVER, or the restarts gave up).%s Apply the workload again (delete and re-add it), or give it the restart "+
			"policy ON_FAILURE or ALWAYS.", in, StuckMs/1000, why),
	}
}

// replicaProblems reports the voters the leader cannot reach, and a
// quorum with no margin left: as many voters reachable as a quorum needs,
// so that one more failure stops every write. A cluster that has no
// margin by its size (one or two voters) and lost nobody is not reported:
// that is its configuration, not a failure.
func replicaProblems(_ *state.Store, f *Facts, _ *Cache, r *Result) {
	oneEach(r, ReplicaDown, ObjReplica, f.ReplicasDown, func(id, why string) (string, string) {
		return sentence(fmt.Sprintf("Replica %s is down: %s", id, why)),
			fmt.Sprintf("Voter %s of the Raft configuration does not answer the leader (%s), so the cluster tolerates one "+
				"failure fewer. Bring it back (its host, its network, its service: `systemctl status grapnel-server` there); "+
				"if it is gone for good, remove it with `grapnel cluster remove %s` and add a new replica.", id, why, id)
	})
	q := f.Quorum
	if q.Voters == 0 || q.Reachable >= q.Voters || q.Reachable != q.Voters/2+1 {
		return
	}
	down := slices.Sorted(func(yield func(string) bool) {
		for id := range f.ReplicasDown {
			if !yield(id) {
				return
			}
		}
	})
	var objs []state.ProblemObject
	for _, id := range down {
		objs = append(objs, state.ProblemObject{Kind: ObjReplica, Name: id})
	}
	r.Findings = append(r.Findings, Finding{
		Kind: QuorumAtRisk, Key: key(QuorumAtRisk, "voters"), Objects: objs,
		Summary: fmt.Sprintf("Quorum is at risk: %d of %d voting replicas are reachable, exactly a quorum.", q.Reachable, q.Voters),
		Detail: fmt.Sprintf("The leader reaches %d of the %d voters, the fewest that can still commit (%s not answering). "+
			"One more failure stops every write and every election until a replica comes back. Bring the replicas that are "+
			"down back first, and avoid restarting any other replica until then.", q.Reachable, q.Voters, nameList(down, maxListed)),
	})
}
