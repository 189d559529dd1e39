package state

import "maps"

// Rendered is a workload as agents receive it: templates filled in, with
// the instance name derived from the rendered runtimeConfig.
//
// Snapshot records are the JSON of state types (fsm/snapshot.go), and
// their keys are frozen: every field of a type a record reaches names its
// key in a json tag, the Go field name it was written under before the
// tags, so that renaming a field keeps its key. A new or changed key
// needs a new cluster version (docs/upgrade.md).
type Rendered struct {
	Instance InstanceName `json:"Instance"`
	Workload *Workload    `json:"Workload"`
}

// Store is everything the replicas agree on. The FSM applies commands to
// it; the leader reads it to serve requests. Desired and Rendered are
// copy-on-write: an update builds new maps, so a reader holding the old
// ones sees a consistent state. DeleteGraph, Agents, States and
// ReportMarks change in place; States only through the Store's methods,
// which copy an agent's part first while a planning view shares it
// (ForPlanning).
type Store struct {
	Desired     State
	Rendered    map[string]Rendered
	DeleteGraph DeleteGraph
	Agents      AgentMap
	States      WorkloadStatesMap
	// Revision is the Raft index of the last accepted desired-state update;
	// zero means the desired state was never set, so a startup manifest may
	// seed it.
	Revision uint64
	// DesiredSeq counts the accepted desired-state updates. A pipelined
	// update carries the DesiredSeq it produces, so that it is refused
	// unless it builds on the stored state, as it does not when an update
	// before it failed.
	DesiredSeq uint64
	// ReportMarks is the newest report mark accepted from each agent, so
	// that any leader drops reports older than what the cluster stored.
	ReportMarks map[string]ReportMark
	// History is the transaction history and the execution-state
	// transitions (history.go); nil in a store that keeps none, such as
	// the leader's speculative one.
	History *History
	// Modes holds the agents an operator set to Maintenance or Disabled;
	// an agent not in it is Active (placement.go).
	Modes map[string]AgentMode
	// Placement is the layout of the placed workloads: workload → the
	// agents its instances run on, sorted (placement.go).
	Placement map[string][]string
	// Problems is the open problems of the problems view (problems.go).
	Problems Problems
	// Revs is the modification revision of each workload and config item
	// and of recent deletions (revisions.go).
	Revs *Revisions
	// Locks are the intent locks on workloads and config items (locks.go).
	Locks Locks
	// Removed holds the replica runs operators removed while they ran
	// (removals.go); nil when there are none.
	Removed map[string]RemovedReplica
	// ReplicaCerts are the certificates each replica of the
	// configuration showed on the Raft port, and Revoked those revoked
	// by an operator's removal, by serial (certs.go); nil when empty.
	ReplicaCerts map[string][]ReplicaCert
	Revoked      map[string]RevokedCert
	// ClusterVersion is the replicated formats' version (clusterversion.go).
	ClusterVersion uint32

	// inBatch and owned let the updates of one batch, applied under one
	// hold of the FSM's lock, copy the desired state and the renderings
	// once instead of once per update: the maps the batch's first update
	// copied reach no reader before the batch ends (see BeginBatch).
	inBatch, owned bool
	// usage, once asked for, follows every desired-state update (see
	// DesiredBytes).
	usage *usage
	// statesShared says a planning view shares the per-agent maps of
	// States; statesOwned lists the agents copied since (planview.go).
	statesShared bool
	statesOwned  map[string]bool
}

// BeginBatch starts a run of commands that no reader can observe until
// EndBatch; within it, desired-state updates after the first change the
// maps the first one copied instead of copying again.
func (s *Store) BeginBatch() { s.inBatch, s.owned = true, false }

// EndBatch ends the run: the next update copies again, as readers may now
// hold the maps.
func (s *Store) EndBatch() { s.inBatch, s.owned = false, false }

// InBatch reports whether a run of updates begun by BeginBatch is open.
func (s *Store) InBatch() bool { return s.inBatch }

// NewStore returns an empty store: apiVersion v1, no workloads.
func NewStore() *Store {
	return &Store{
		Desired:     State{APIVersion: APIVersion, Workloads: map[string]*Workload{}, Configs: map[string]any{}},
		Rendered:    map[string]Rendered{},
		DeleteGraph: DeleteGraph{},
		Agents:      AgentMap{},
		States:      WorkloadStatesMap{},
		ReportMarks: map[string]ReportMark{},
		History:     NewHistory(),
		Revs:        NewRevisions(),
		Locks:       Locks{},
	}
}

// Clone returns a copy that shares no mutable map with s.
func (s *Store) Clone() *Store {
	c := s.clone()
	c.History = s.History.Clone()
	return c
}

// clone copies all but the history.
func (s *Store) clone() *Store {
	return &Store{
		Desired:        s.Desired.Clone(),
		Rendered:       maps.Clone(s.Rendered),
		DeleteGraph:    s.DeleteGraph.Clone(),
		Agents:         s.Agents.Clone(),
		States:         s.States.Clone(),
		Revision:       s.Revision,
		DesiredSeq:     s.DesiredSeq,
		ReportMarks:    maps.Clone(s.ReportMarks),
		Modes:          maps.Clone(s.Modes),
		Placement:      clonePlacement(s.Placement),
		Problems:       s.Problems.Clone(),
		Revs:           s.Revs.Clone(),
		Locks:          s.Locks.Clone(),
		Removed:        maps.Clone(s.Removed),
		ReplicaCerts:   cloneReplicaCerts(s.ReplicaCerts),
		Revoked:        maps.Clone(s.Revoked),
		ClusterVersion: s.ClusterVersion,
		usage:          s.usage.clone(),
	}
}

// CloneWithoutHistory is Clone without the history, for a store that
// predicts the desired state and need not keep one.
func (s *Store) CloneWithoutHistory() *Store {
	c := s.clone()
	c.History = nil
	return c
}

// DesiredUpdate is one accepted UpdateState as the leader decided it: the
// changed parts of the desired state, the new renderings and the states the
// server sets itself. Applying it needs no rendering, so every replica ends
// with byte-identical rendered workloads whatever binary it runs.
type DesiredUpdate struct {
	APIVersion      string
	PutWorkloads    map[string]*Workload
	DeleteWorkloads []string
	PutConfigs      map[string]any
	DeleteConfigs   []string
	PutRendered     map[string]Rendered
	DeleteRendered  []string
	// SetStates are the initial states of added instances: Pending(Initial)
	// or NotScheduled (swdd~server-sets-state-of-new-workloads-to-pending~1).
	SetStates []WorkloadState
	// DeleteStates are instances the server removed itself because no agent
	// could (swdd~server-handles-not-started-deleted-workloads~1).
	DeleteStates []InstanceName
	// AgentTags replaces the tags of connected agents.
	AgentTags map[string]map[string]string
}

// ApplyDesired applies an accepted update committed at index and counts
// it in DesiredSeq.
func (s *Store) ApplyDesired(u *DesiredUpdate, index uint64) {
	s.Revision = index
	s.DesiredSeq++
	if s.Revs == nil {
		s.Revs = NewRevisions()
	}
	s.Revs.record(u, s.DesiredSeq)
	if s.usage != nil {
		s.usage.account(s.Desired, s.Rendered, u)
	}
	if s.inBatch && s.owned {
		applyDesiredInPlace(&s.Desired, s.Rendered, u)
	} else {
		s.Desired, s.Rendered = ApplyDesiredUpdate(s.Desired, s.Rendered, u)
		s.owned = s.inBatch
	}
	for n, rw := range u.PutRendered {
		s.DeleteGraph.RemoveDependent(n)
		s.DeleteGraph.Insert(n, rw.Workload)
		if rw.Instance.AgentName != "" {
			delete(s.Placement, n) // pinned now: the update deleted its placed instances
		}
	}
	for _, n := range u.DeleteWorkloads {
		delete(s.Placement, n) // the update deleted its placed instances
	}
	for _, st := range u.SetStates {
		s.setState(st.Instance, st.State)
	}
	for _, in := range u.DeleteStates {
		s.deleteState(in)
		s.removeFromGraphIfGone(in.WorkloadName)
	}
	for agent, tags := range u.AgentTags {
		if a, ok := s.Agents[agent]; ok {
			a.Tags = cloneMap(tags)
		}
	}
}

// ApplyDesiredUpdate is the copy-on-write part of ApplyDesired: it returns
// the desired state and renderings after u and leaves d and r as they
// were, so a reader holding them keeps a consistent view.
func ApplyDesiredUpdate(d State, r map[string]Rendered, u *DesiredUpdate) (State, map[string]Rendered) {
	d = d.Clone()
	r = maps.Clone(r)
	if r == nil {
		r = map[string]Rendered{}
	}
	applyDesiredInPlace(&d, r, u)
	return d, r
}

// applyDesiredInPlace changes d's maps and r to what they are after u.
func applyDesiredInPlace(d *State, r map[string]Rendered, u *DesiredUpdate) {
	if u.APIVersion != "" {
		d.APIVersion = u.APIVersion
	}
	for _, n := range u.DeleteWorkloads {
		delete(d.Workloads, n)
	}
	for n, w := range u.PutWorkloads {
		d.Workloads[n] = w
	}
	for _, k := range u.DeleteConfigs {
		delete(d.Configs, k)
	}
	for k, v := range u.PutConfigs {
		d.Configs[k] = v
	}
	for _, n := range u.DeleteRendered {
		delete(r, n)
	}
	for n, rw := range u.PutRendered {
		r[n] = rw
	}
}

// AgentConnected stores a newly connected agent with its tags and no load
// report yet (swdd~server-stores-newly-connected-agent~2).
func (s *Store) AgentConnected(name string, tags map[string]string) {
	if tags == nil {
		tags = map[string]string{}
	}
	s.Agents[name] = &AgentAttributes{Tags: cloneMap(tags)}
}

// AgentGone removes an agent and marks its workloads AgentDisconnected.
// It returns the states it changed.
//
// swdd~server-set-workload-state-on-disconnect~1
// swdd~server-removes-disconnected-agents-from-state~2
func (s *Store) AgentGone(name string) []WorkloadState {
	delete(s.Agents, name)
	changed := s.States.OfAgent(name)
	for i := range changed {
		changed[i].State = AgentDisconnected
		s.setState(changed[i].Instance, AgentDisconnected)
	}
	return changed
}

// AgentLoad stores a load report of a connected agent; reports of unknown
// agents are ignored (swdd~server-receives-resource-availability~2).
func (s *Store) AgentLoad(name string, cpu uint32, free uint64) bool {
	a, ok := s.Agents[name]
	if !ok {
		return false
	}
	a.Status = AgentStatus{CPUUsage: &cpu, FreeMemory: &free}
	return true
}

// ApplyStates stores reported workload states. A Removed state deletes the
// entry and, once no instance of the workload is left, its delete-graph
// entries.
//
// swdd~server-stores-workload-state~1
// swdd~server-cleans-up-state~1
func (s *Store) ApplyStates(states []WorkloadState) {
	for _, st := range states {
		if st.State.IsRemoved() {
			s.deleteState(st.Instance)
			s.removeFromGraphIfGone(st.Instance.WorkloadName)
			continue
		}
		s.setState(st.Instance, st.State)
	}
}

// removeFromGraphIfGone drops a workload's delete-graph entries when it is
// neither desired nor has an instance left.
//
// swdd~server-removes-obsolete-delete-graph-entires~1
func (s *Store) removeFromGraphIfGone(name string) {
	if _, desired := s.Desired.Workloads[name]; desired {
		return
	}
	for _, wls := range s.States {
		if len(wls[name]) > 0 {
			return
		}
	}
	s.DeleteGraph.RemoveWorkload(name)
}

// CompleteState assembles the CompleteState view. The result shares the
// copy-on-write desired state and deep-copies the rest.
func (s *Store) CompleteState() *CompleteState {
	return &CompleteState{DesiredState: s.Desired, WorkloadStates: s.States.Clone(), Agents: s.Agents.Clone()}
}
