package state

import "maps"

// ForPlanning returns a copy of s to plan an update on while s goes on
// changing: the leader takes one of its speculative store for a dry-run,
// which plans on another goroutine while the leader loop executes new
// entries on s. It holds what planning and describing a plan read
// (server/plan): the desired state, the renderings, the workload
// states, the delete graph, the agents, the placement, the locks, the
// sequence numbers, the sizes and the agents' modes (the allocator a
// dry-run runs reads them); not the history, the revisions, the report
// marks, the problems or the removals.
//
// It is cheap for a large state: the desired state and the renderings
// are copy-on-write already and are shared, and so are the per-agent
// maps of States, which s copies, one agent at a time, the first time it
// changes them afterwards (setState, deleteState). The rest is copied:
// the delete graph, the agents, the placement and the locks, each
// bounded by the limits. Neither store may be changed by two goroutines,
// but each may be read and changed by its own.
func (s *Store) ForPlanning() *Store {
	s.ensureUsage()
	// A batch after this must copy the desired state again: the view
	// holds its maps.
	s.owned = false
	s.statesShared, s.statesOwned = true, nil
	return &Store{
		Desired:     s.Desired,
		Rendered:    s.Rendered,
		DeleteGraph: s.DeleteGraph.Clone(),
		Agents:      s.Agents.Clone(),
		States:      maps.Clone(s.States),
		Revision:    s.Revision,
		DesiredSeq:  s.DesiredSeq,
		Placement:   clonePlacement(s.Placement),
		Modes:       maps.Clone(s.Modes),
		Locks:       s.Locks.Clone(),
		usage:       s.usage.clone(),
		// What the plan may write depends on it.
		ClusterVersion: s.ClusterVersion,
		// The view shares the per-agent maps too: it must not change
		// them in place either.
		statesShared: true,
	}
}

// ownStates makes the states of agent this store's own before it
// changes them: while a planning view shares them, the agent's maps are
// copied first (once per agent and view).
func (s *Store) ownStates(agent string) {
	if !s.statesShared || s.statesOwned[agent] {
		return
	}
	if wls, ok := s.States[agent]; ok {
		c := make(map[string]map[string]ExecutionState, len(wls))
		for w, ids := range wls {
			c[w] = maps.Clone(ids)
		}
		s.States[agent] = c
	}
	if s.statesOwned == nil {
		s.statesOwned = map[string]bool{}
	}
	s.statesOwned[agent] = true
}

// setState stores the state of an instance (WorkloadStatesMap.Set),
// copying its agent's maps first if a planning view shares them.
func (s *Store) setState(n InstanceName, st ExecutionState) {
	s.ownStates(n.AgentName)
	s.States.Set(n, st)
}

// deleteState removes the state of an instance
// (WorkloadStatesMap.Delete), copying its agent's maps first if a
// planning view shares them.
func (s *Store) deleteState(n InstanceName) {
	s.ownStates(n.AgentName)
	s.States.Delete(n)
}
