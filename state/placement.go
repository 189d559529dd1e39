package state

import "slices"

// The store's part of placement (docs/placement.md): the agents' modes
// and the layout of the placed workloads, both replicated. The allocator
// that decides the layout is the placement package; the store only holds
// what the leader decided.

// PlacementUpdate is a new layout as the leader decided it, with the
// states the server sets itself: Pending(Initial) for each new instance,
// and the removal of each instance on an agent that is gone (no agent
// would ever report it).
type PlacementUpdate struct {
	// Layout holds the workloads whose agents change: the new agents,
	// sorted; an empty list drops the workload from the layout.
	Layout       map[string][]string
	SetStates    []WorkloadState
	DeleteStates []InstanceName
}

// ApplyPlacement applies a new layout.
func (s *Store) ApplyPlacement(u *PlacementUpdate) {
	if s.Placement == nil {
		s.Placement = map[string][]string{}
	}
	for w, agents := range u.Layout {
		if len(agents) == 0 {
			delete(s.Placement, w)
			continue
		}
		s.Placement[w] = slices.Clone(agents)
	}
	for _, st := range u.SetStates {
		s.setState(st.Instance, st.State)
	}
	for _, in := range u.DeleteStates {
		s.deleteState(in)
		s.removeFromGraphIfGone(in.WorkloadName)
	}
}

// SetAgentMode records an operator's mode for an agent, known or not (an
// agent may be put in maintenance before it reboots, or while it is
// away). Active is the default and is not stored.
func (s *Store) SetAgentMode(agent string, m AgentMode) {
	if m == ModeActive {
		delete(s.Modes, agent)
		return
	}
	if s.Modes == nil {
		s.Modes = map[string]AgentMode{}
	}
	s.Modes[agent] = m
}

// AgentMode is an agent's mode; Active unless set.
func (s *Store) AgentMode(agent string) AgentMode { return s.Modes[agent] }

// KnowsAgent reports whether the cluster knows an agent of that name: it
// is connected, has a mode, has ever reported, has workload states, or a
// workload or the layout names it. An operator may set the mode of an
// agent that is not connected (before it reboots), but not of a name
// nothing knows: that is a typo, and the real agent would stay as it is.
func (s *Store) KnowsAgent(agent string) bool {
	_, connected := s.Agents[agent]
	_, moded := s.Modes[agent]
	_, reported := s.ReportMarks[agent]
	if connected || moded || reported || len(s.States[agent]) > 0 {
		return true
	}
	for _, w := range s.Desired.Workloads {
		if w.Agent == agent {
			return true
		}
	}
	for _, agents := range s.Placement {
		if slices.Contains(agents, agent) {
			return true
		}
	}
	return false
}

// Instances lists the instances of a rendered workload: the one on its
// agent for a pinned workload, one per agent of the layout for a placed
// one (its rendering names no agent), none for an unscheduled one.
func (s *Store) Instances(name string) []InstanceName {
	r, ok := s.Rendered[name]
	if !ok {
		return nil
	}
	return r.InstancesIn(s.Placement)
}

// InstancesIn lists a rendering's instances given a layout: itself if it
// names an agent, else one per agent the layout gives its workload.
func (r Rendered) InstancesIn(layout map[string][]string) []InstanceName {
	if r.Instance.AgentName != "" {
		return []InstanceName{r.Instance}
	}
	agents := layout[r.Instance.WorkloadName]
	out := make([]InstanceName, len(agents))
	for i, a := range agents {
		out[i] = r.Instance
		out[i].AgentName = a
	}
	return out
}

// OnAgent is the rendering as an agent receives it for one placed
// instance: the workload with that agent filled in.
func (r Rendered) OnAgent(agent string) Rendered {
	if r.Instance.AgentName == agent {
		return r
	}
	w := r.Workload.Clone()
	w.Agent = agent
	inst := r.Instance
	inst.AgentName = agent
	return Rendered{Instance: inst, Workload: w}
}

// clonePlacement copies a layout.
func clonePlacement(p map[string][]string) map[string][]string {
	if p == nil {
		return nil
	}
	out := make(map[string][]string, len(p))
	for w, as := range p {
		out[w] = slices.Clone(as)
	}
	return out
}
