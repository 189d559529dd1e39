package state

import "maps"

// usage is what the desired state and the renderings weigh (see Size),
// kept up to date as updates apply, so that the leader checks an update
// against the budgets without walking the whole state. It is derived
// from the store, never replicated or snapshotted, and computed on first
// use.
type usage struct {
	desired int            // workloads as written and config items
	agents  map[string]int // renderings, by the agent they run on
}

func newUsage(d State, r map[string]Rendered) *usage {
	u := &usage{agents: map[string]int{}}
	for _, w := range d.Workloads {
		u.desired += w.Size()
	}
	for _, v := range d.Configs {
		u.desired += ConfigSize(v)
	}
	for _, rw := range r {
		u.agents[rw.Instance.AgentName] += rw.Workload.Size()
	}
	return u
}

func (u *usage) clone() *usage {
	if u == nil {
		return nil
	}
	return &usage{desired: u.desired, agents: maps.Clone(u.agents)}
}

// account moves the usage from the state before du to the state after
// it. It runs before du is applied, while d and r still hold the old
// values.
func (u *usage) account(d State, r map[string]Rendered, du *DesiredUpdate) {
	for _, n := range du.DeleteWorkloads {
		u.desired -= d.Workloads[n].Size()
	}
	for n, w := range du.PutWorkloads {
		if !contains(du.DeleteWorkloads, n) {
			u.desired -= d.Workloads[n].Size()
		}
		u.desired += w.Size()
	}
	for _, k := range du.DeleteConfigs {
		if v, ok := d.Configs[k]; ok {
			u.desired -= ConfigSize(v)
		}
	}
	for k, v := range du.PutConfigs {
		if old, ok := d.Configs[k]; ok && !contains(du.DeleteConfigs, k) {
			u.desired -= ConfigSize(old)
		}
		u.desired += ConfigSize(v)
	}
	gone := func(n string) {
		if old, ok := r[n]; ok {
			a := old.Instance.AgentName
			if u.agents[a] -= old.Workload.Size(); u.agents[a] <= 0 {
				delete(u.agents, a)
			}
		}
	}
	for _, n := range du.DeleteRendered {
		gone(n)
	}
	for n, rw := range du.PutRendered {
		if !contains(du.DeleteRendered, n) {
			gone(n)
		}
		u.agents[rw.Instance.AgentName] += rw.Workload.Size()
	}
}

func contains(s []string, v string) bool {
	for _, e := range s {
		if e == v {
			return true
		}
	}
	return false
}

// DesiredBytes is the size of the desired state: every workload as
// written and every config item (see Size).
func (s *Store) DesiredBytes() int {
	s.ensureUsage()
	return s.usage.desired
}

// AgentBytes is the size of the rendered workloads assigned to agent.
func (s *Store) AgentBytes(agent string) int {
	s.ensureUsage()
	return s.usage.agents[agent]
}

func (s *Store) ensureUsage() {
	if s.usage == nil {
		s.usage = newUsage(s.Desired, s.Rendered)
	}
}
