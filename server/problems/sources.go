package problems

import (
	"fmt"
	"maps"
	"slices"
	"strings"

	"github.com/grapnel-io/grapnel/state"
)

// missingDependencies finds every dependency on a workload that is not in
// the desired state. Ankaios accepts such a manifest (the dependency may
// come later); until it does, the dependent never starts.
func missingDependencies(st *state.Store, _ *Facts, c *Cache, r *Result) {
	if c != nil {
		r.Findings = append(r.Findings, c.deps...)
		return
	}
	r.Findings = append(r.Findings, findMissingDependencies(st)...)
}

// findMissingDependencies walks every workload's dependencies.
func findMissingDependencies(st *state.Store) []Finding {
	var out []Finding
	// Map order is fine: Detect sorts the findings by key.
	for name, w := range st.Desired.Workloads {
		if w == nil {
			continue
		}
		for dep := range w.Dependencies {
			if _, ok := st.Desired.Workloads[dep]; ok {
				continue
			}
			out = append(out, Finding{
				Kind:    MissingDependency,
				Key:     key(MissingDependency, name, dep),
				Objects: []state.ProblemObject{{Kind: ObjWorkload, Name: name}, {Kind: ObjWorkload, Name: dep}},
				Summary: fmt.Sprintf("Workload %s depends on %s, which does not exist.", name, dep),
				Detail: fmt.Sprintf("Workload %s lists %s in its dependencies (condition %s), but the desired state has no workload %s, "+
					"so %s waits and never starts. Add workload %s, or remove the dependency from %s.",
					name, dep, w.Dependencies[dep], dep, name, dep, name),
			})
		}
	}
	return out
}

// agentProblems finds the agents with workloads assigned that are away:
// gone (seen once, away past its reconnect grace: the FSM holds it no
// more) or never connected (never seen, away past the grace this leader
// gave it). An agent in a grace keeps the agent problem it has and gets
// none new; an agent in Maintenance or Disabled gets none: neither is
// monitored (MAMID's modes).
func agentProblems(st *state.Store, f *Facts, c *Cache, r *Result) {
	var assigned map[string][]string
	if c != nil {
		assigned = c.assigned
	} else {
		assigned = Assigned(st)
	}
	for agent, wls := range assigned {
		if _, ok := st.Agents[agent]; ok || f.Connected[agent] || f.Maintenance[agent] || f.Disabled[agent] {
			continue
		}
		gone, never := key(AgentGone, agent), key(AgentNeverConnected, agent)
		if f.InGrace[agent] {
			for _, k := range []string{gone, never} {
				if p, ok := st.Problems.Open[k]; ok {
					r.Findings = append(r.Findings, findingOf(p))
				}
			}
			continue
		}
		wls = slices.Sorted(slices.Values(wls))
		objs := []state.ProblemObject{{Kind: ObjAgent, Name: agent}}
		for _, w := range wls[:min(len(wls), maxObjects)] {
			objs = append(objs, state.ProblemObject{Kind: ObjWorkload, Name: w})
		}
		list := nameList(wls, maxListed)
		if Seen(st, agent) {
			r.Findings = append(r.Findings, Finding{
				Kind: AgentGone, Key: gone, Objects: objs,
				Summary: fmt.Sprintf("Agent %s is gone; %d workload(s) assigned to it are not observed: %s.", agent, len(wls), list),
				Detail: fmt.Sprintf("Agent %s was connected and has not come back within its reconnect grace. Its workloads (%s) "+
					"show AgentDisconnected: they may still run on its host, but nobody observes them. Bring the agent back "+
					"(its host, its network, its service), or move the workloads to another agent.", agent, list),
			})
			continue
		}
		r.Findings = append(r.Findings, Finding{
			Kind: AgentNeverConnected, Key: never, Objects: objs,
			Summary: fmt.Sprintf("Agent %s has never connected; %d workload(s) wait for it: %s.", agent, len(wls), list),
			Detail: fmt.Sprintf("Workloads (%s) are assigned to agent %s, which has never connected to this cluster. Check the "+
				"agent's name (a typo in the manifest's agent field names an agent that does not exist), start the agent, "+
				"or move the workloads to an agent that runs.", list, agent),
		})
	}
}

// An agent may host hundreds of workloads: a problem names the first
// maxObjects as objects and the first maxListed in its descriptions, so
// that the entry recording it stays small.
const (
	maxObjects = 20
	maxListed  = 5
)

// nameList joins the first n names and counts the rest.
func nameList(names []string, n int) string {
	if len(names) <= n {
		return strings.Join(names, ", ")
	}
	return fmt.Sprintf("%s and %d more", strings.Join(names[:n], ", "), len(names)-n)
}

// Assigned is the workloads rendered for each named agent, in no
// particular order.
func Assigned(st *state.Store) map[string][]string {
	assigned := map[string][]string{}
	for n, rw := range st.Rendered {
		if a := rw.Instance.AgentName; a != "" {
			assigned[a] = append(assigned[a], n)
		}
	}
	return assigned
}

// Seen reports whether the store shows that an agent was connected once:
// it has a report mark, or an instance its departure set
// AgentDisconnected.
func Seen(st *state.Store, agent string) bool {
	if _, ok := st.ReportMarks[agent]; ok {
		return true
	}
	for _, ws := range st.States.OfAgent(agent) {
		if ws.State == state.AgentDisconnected {
			return true
		}
	}
	return false
}

// shortfalls turns the allocator's shortfalls into problems: one per
// workload and reason. Each text is whole sentences: what was placed,
// why not more, the allocator's own explanation, and what helps for that
// reason.
func shortfalls(_ *state.Store, f *Facts, _ *Cache, r *Result) {
	for _, s := range f.Shortfalls {
		k := Kind(s.Reason)
		var why, help string
		switch s.Reason {
		case ShortSpread:
			why = "Its instances cannot be spread over the risk groups it asks for."
			help = "Add agents in other risk groups (tag grapnel.io/risk-group), give the agents there room, or lower the instances the workload wants."
		case ShortCapacity:
			why = "The agents that take new instances are full: their capacities hold fewer instances than it wants."
			help = "Raise the agents' capacities (tag grapnel.io/capacity), add agents, or lower the instances the workload wants."
		case ShortEligible:
			why = "Fewer agents take new instances than it wants instances, and an agent hosts at most one instance of a workload."
			help = "Connect more agents, bring agents in Maintenance or Disabled back with `grapnel agent activate NAME`, or lower the instances the workload wants."
		default:
			why = fmt.Sprintf("The allocator says: %s.", s.Reason)
		}
		detail := fmt.Sprintf("The allocator placed %d of the %d instances workload %s wants. %s", s.Placed, s.Wanted, s.Workload, why)
		if s.Detail != "" {
			detail += " " + sentence(s.Detail)
		}
		if help != "" {
			detail += " " + help
		}
		r.Findings = append(r.Findings, Finding{
			Kind: k, Key: key(k, s.Workload),
			Objects: []state.ProblemObject{{Kind: ObjWorkload, Name: s.Workload}},
			Summary: fmt.Sprintf("Workload %s: %d of %d instances placed (%s).", s.Workload, s.Placed, s.Wanted, k),
			Detail:  detail,
		})
	}
}

// sentence makes a text a sentence: a capital first letter and a full
// stop.
func sentence(t string) string {
	t = strings.TrimSpace(t)
	if t == "" {
		return t
	}
	t = strings.ToUpper(t[:1]) + t[1:]
	if !strings.HasSuffix(t, ".") {
		t += "."
	}
	return t
}

// findingOf is an open problem found again as it is.
func findingOf(p *state.Problem) Finding {
	return Finding{Kind: Kind(p.Kind), Key: p.Key, Objects: p.Objects, Summary: p.Summary, Detail: p.Detail}
}

// storageFailures turns the replicas whose storage failed into problems,
// one per replica. The fault is the one the replica announced first; a
// problem keeps the descriptions it opened with.
func storageFailures(_ *state.Store, f *Facts, _ *Cache, r *Result) {
	oneEach(r, StorageFailed, ObjReplica, f.StorageFailed, func(id, fault string) (string, string) {
		return sentence(fmt.Sprintf("Replica %s: storage failed: %s", id, fault)),
			fmt.Sprintf("Replica %s could not write its data directory (%s). It stores no Raft entries and casts no votes, "+
				"so the cluster tolerates one failure fewer; it stepped down if it led. It probes its data directory and restarts "+
				"itself once a write and an fsync work there again, then catches up. Free space, or repair and remount the file "+
				"system (its log and systemd status say more); replace the flash if it keeps failing.", id, fault)
	})
}

// oneEach adds a finding of kind about each entry of m, in name order:
// the object of objKind the entry names, with the summary and detail
// texts describe gives for it and what m says of it. The problems that
// replicas and agents report of themselves take this shape.
func oneEach(r *Result, kind Kind, objKind string, m map[string]string, describe func(name, what string) (summary, detail string)) {
	for _, name := range slices.Sorted(maps.Keys(m)) {
		summary, detail := describe(name, m[name])
		r.Findings = append(r.Findings, Finding{
			Kind: kind, Key: key(kind, name), Objects: []state.ProblemObject{{Kind: objKind, Name: name}},
			Summary: summary, Detail: detail,
		})
	}
}

// voteHolds turns the replicas that hold their votes into problems, one
// per replica. Most end within a second, once the replica has caught up
// from the leader; one that stays means no leader can be elected
// without it, or it cannot reach the leader.
func voteHolds(_ *state.Store, f *Facts, _ *Cache, r *Result) {
	oneEach(r, VoteHeld, ObjReplica, f.VoteHeld, func(id, why string) (string, string) {
		return sentence(fmt.Sprintf("Replica %s holds its vote: %s", id, why)),
			fmt.Sprintf("Replica %s lost Raft entries it may have acknowledged (%s). Until its log has caught up from the "+
				"leader it grants no vote that could elect a leader lacking them, and does not stand, so the cluster tolerates one "+
				"failure fewer. It ends by itself once a leader reaches it. If no leader can be elected without its vote (a majority "+
				"lost the same entries), `grapnel cluster repair %s` releases it, accepting that entries only the lost logs held are "+
				"gone (docs/operations.md, \"Corrupted or lost data\").", id, why, id)
	})
}

// agentStorageFailures turns the agents whose run folder failed into
// problems, one per agent. An agent in its reconnect grace (a failover,
// a broken stream) keeps the problem it has: whether its run folder still
// fails, its next hello says. One gone past its grace has none: AgentGone
// says more. A problem keeps the descriptions it opened with.
func agentStorageFailures(st *state.Store, f *Facts, _ *Cache, r *Result) {
	oneEach(r, AgentStorageFailed, ObjAgent, f.AgentStorageFailed, func(agent, fault string) (string, string) {
		return sentence(fmt.Sprintf("Agent %s: run folder failed: %s", agent, fault)),
			fmt.Sprintf("Agent %s could not write its run folder (%s). Its running workloads keep running and it "+
				"keeps reporting their states, but it starts, replaces and deletes none until the run folder works again: "+
				"those wait, their states say why. It probes the run folder and resumes by itself once a write and an fsync "+
				"work there again. Free space, or repair and remount the file system (the agent's log and systemd status say "+
				"more); replace the flash if it keeps failing.", agent, fault)
	})
	for _, p := range st.Problems.Open {
		if p.Kind != string(AgentStorageFailed) || len(p.Objects) == 0 {
			continue
		}
		agent := p.Objects[0].Name
		if _, told := f.AgentStorageFailed[agent]; !told && f.InGrace[agent] && !f.Connected[agent] {
			r.Findings = append(r.Findings, findingOf(p))
		}
	}
}
