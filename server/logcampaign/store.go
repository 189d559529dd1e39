package logcampaign

import (
	"slices"
	"sort"

	"github.com/grapnel-io/grapnel/state"
)

// campaign is one logs request: its collector and the requested instances,
// grouped by the agent that provides them.
type campaign struct {
	collector collector
	providers map[string][]state.InstanceName
}

// Store holds the metadata of all running log campaigns. Besides the
// campaigns themselves it keeps one index per way a participant can
// disappear, so that each lookup touches only the affected campaigns.
type Store struct {
	campaigns map[string]*campaign
	// byConnection: client connection -> campaigns it collects.
	byConnection map[string]idSet
	// byCollectorAgent: agent -> campaigns collected by its workloads.
	byCollectorAgent map[string]idSet
	// byCollectorWorkload: workload -> campaigns it collects.
	byCollectorWorkload map[workloadKey]idSet
	// byProviderAgent: agent -> campaigns requesting logs of its workloads.
	byProviderAgent map[string]idSet
}

// NewStore returns an empty store.
func NewStore() *Store {
	return &Store{
		campaigns:           map[string]*campaign{},
		byConnection:        map[string]idSet{},
		byCollectorAgent:    map[string]idSet{},
		byCollectorWorkload: map[workloadKey]idSet{},
		byProviderAgent:     map[string]idSet{},
	}
}

// Insert records a logs request. requestID is the full id as prefixed by the
// gRPC layer; the collector is derived from it. providers are the instances
// whose logs were requested. Inserting an id again replaces the campaign.
func (s *Store) Insert(requestID string, providers []state.InstanceName) {
	s.Remove(requestID)
	c := &campaign{collector: parseCollector(requestID), providers: groupByAgent(providers)}
	s.campaigns[requestID] = c
	if c.collector.isWorkload {
		indexAdd(s.byCollectorAgent, c.collector.workload.agent, requestID)
		indexAdd(s.byCollectorWorkload, c.collector.workload, requestID)
	} else {
		indexAdd(s.byConnection, c.collector.connection, requestID)
	}
	for agent := range c.providers {
		indexAdd(s.byProviderAgent, agent, requestID)
	}
}

// Remove forgets one campaign, as on a LogsCancelRequest, and reports
// whether it existed.
func (s *Store) Remove(requestID string) bool {
	c, ok := s.campaigns[requestID]
	if !ok {
		return false
	}
	delete(s.campaigns, requestID)
	if c.collector.isWorkload {
		indexDel(s.byCollectorAgent, c.collector.workload.agent, requestID)
		indexDel(s.byCollectorWorkload, c.collector.workload, requestID)
	} else {
		indexDel(s.byConnection, c.collector.connection, requestID)
	}
	for agent := range c.providers {
		indexDel(s.byProviderAgent, agent, requestID)
	}
	return true
}

// Provides reports whether the live campaign requestID asked agent for
// the logs of inst: only then may the agent send entries or a stop for
// it, since the collector trusts what arrives under its id.
func (s *Store) Provides(requestID, agent string, inst state.InstanceName) bool {
	c, ok := s.campaigns[requestID]
	if !ok {
		return false
	}
	for _, p := range c.providers[agent] {
		if p == inst {
			return true
		}
	}
	return false
}

// HasProvider reports whether the live campaign requestID asked agent for
// the logs of any instance.
func (s *Store) HasProvider(requestID, agent string) bool {
	c, ok := s.campaigns[requestID]
	return ok && len(c.providers[agent]) > 0
}

// Stopped records that agent sent the LogsStopResponse of inst for the
// campaign: the instance provides nothing more. A campaign whose every
// instance stopped is over and removed; Stopped reports whether that
// happened, so that finished campaigns neither pile up for a long-lived
// collector nor count against its cap.
func (s *Store) Stopped(requestID, agent string, inst state.InstanceName) bool {
	c, ok := s.campaigns[requestID]
	if !ok {
		return false
	}
	list := c.providers[agent]
	i := slices.Index(list, inst)
	if i < 0 {
		return false
	}
	if list = slices.Delete(list, i, i+1); len(list) > 0 {
		c.providers[agent] = list
		return false
	}
	delete(c.providers, agent)
	indexDel(s.byProviderAgent, agent, requestID)
	if len(c.providers) > 0 {
		return false
	}
	return s.Remove(requestID)
}

// Live counts the campaigns of requestID's collector (a client connection,
// or a workload on an agent) other than requestID itself.
func (s *Store) Live(requestID string) int {
	c := parseCollector(requestID)
	var ids idSet
	if c.isWorkload {
		ids = s.byCollectorWorkload[c.workload]
	} else {
		ids = s.byConnection[c.connection]
	}
	n := len(ids)
	if _, ok := ids[requestID]; ok {
		n--
	}
	return n
}

// RemoveByAgent handles the loss of an agent. Campaigns collected by
// workloads on that agent have nobody left to deliver to: they are removed
// and their ids returned in collectorIDs, to be cancelled on the providing
// agents. Every other campaign that requested logs of workloads on that
// agent loses those providers; stopped maps its id to the lost instances,
// each of which the collector is told about with a LogsStopResponse. Such a
// campaign stays while it has providers on other agents, until its
// collector cancels it or goes away; one left without providers is over
// and removed, as by Stopped.
func (s *Store) RemoveByAgent(agent string) (collectorIDs []string, stopped map[string][]state.InstanceName) {
	collectorIDs = s.removeAll(s.byCollectorAgent[agent])
	stopped = map[string][]state.InstanceName{}
	for _, id := range s.byProviderAgent[agent].sorted() {
		c := s.campaigns[id]
		stopped[id] = c.providers[agent]
		delete(c.providers, agent)
		if len(c.providers) == 0 {
			s.Remove(id)
		}
	}
	delete(s.byProviderAgent, agent)
	return collectorIDs, stopped
}

// RemoveByConnection handles the Goodbye of a client connection: its
// campaigns are removed and their ids returned, to be cancelled.
func (s *Store) RemoveByConnection(conn string) []string {
	return s.removeAll(s.byConnection[conn])
}

// RemoveByWorkload handles the deletion of a collector workload: the
// campaigns it requested are removed and their ids returned, to be
// cancelled.
func (s *Store) RemoveByWorkload(agent, workload string) []string {
	return s.removeAll(s.byCollectorWorkload[workloadKey{agent: agent, workload: workload}])
}

// Campaigns lists the ids of all campaigns in order.
func (s *Store) Campaigns() []string {
	return state.SortedKeys(s.campaigns)
}

// removeAll removes the campaigns in ids and returns them sorted. It sorts
// first because removing mutates the index set being iterated.
func (s *Store) removeAll(ids idSet) []string {
	out := ids.sorted()
	for _, id := range out {
		s.Remove(id)
	}
	return out
}

// groupByAgent groups instances by their agent, sorted and without
// duplicates, so stop responses go out in a stable order.
func groupByAgent(providers []state.InstanceName) map[string][]state.InstanceName {
	out := map[string][]state.InstanceName{}
	seen := map[state.InstanceName]bool{}
	for _, p := range providers {
		if seen[p] {
			continue
		}
		seen[p] = true
		out[p.AgentName] = append(out[p.AgentName], p)
	}
	for _, list := range out {
		sort.Slice(list, func(i, j int) bool {
			if list[i].WorkloadName != list[j].WorkloadName {
				return list[i].WorkloadName < list[j].WorkloadName
			}
			return list[i].ID < list[j].ID
		})
	}
	return out
}
