package problems

import (
	"slices"
	"strings"

	"github.com/grapnel-io/grapnel/state"
)

// Kind names a check; it is the kind of the problems it finds and the
// label of the grapnel_problems gauge.
type Kind string

// The kinds of problems.
const (
	// MissingDependency: a workload's dependencies name a workload that
	// is not in the desired state; it waits for it forever.
	MissingDependency Kind = "MissingDependency"
	// AgentGone: an agent with workloads assigned was connected once and
	// has been away longer than its reconnect grace.
	AgentGone Kind = "AgentGone"
	// AgentNeverConnected: an agent with workloads assigned has never
	// connected, and did not within the grace either.
	AgentNeverConnected Kind = "AgentNeverConnected"
	// FailingRepeatedly: an instance failed FailThreshold times within
	// FailWindowMs (see failing.go).
	FailingRepeatedly Kind = "FailingRepeatedly"
	// SpreadImpossible: the allocator could not spread a placed workload's
	// instances over the risk groups it asks for (a Shortfall).
	SpreadImpossible Kind = "SpreadImpossible"
	// CapacityExceeded: the agents' capacities hold fewer instances than
	// a placed workload wants (a Shortfall).
	CapacityExceeded Kind = "CapacityExceeded"
	// StorageFailed: a replica's storage failed a write; it stores no
	// entries and casts no votes until it restarted on working storage
	// (Facts.StorageFailed).
	StorageFailed Kind = "StorageFailed"
	// VoteHeld: a replica lost Raft entries (a corrupt entry cut out of
	// its log, or new flash) and holds its vote until it has caught up
	// from the leader (Facts.VoteHeld).
	VoteHeld Kind = "VoteHeld"
	// AgentStorageFailed: an agent's run folder failed a write (full,
	// read-only, an I/O error); its workloads run on, but it starts,
	// replaces and deletes none until the run folder works again
	// (Facts.AgentStorageFailed).
	AgentStorageFailed Kind = "AgentStorageFailed"
	// NoEligibleAgent: fewer agents take new instances (Active and
	// present; not in Maintenance, not Disabled) than a placed workload
	// wants (a Shortfall).
	NoEligibleAgent Kind = "NoEligibleAgent"
	// ReplicaDown: a voter of the Raft configuration does not answer the
	// leader (Facts.ReplicasDown).
	ReplicaDown Kind = "ReplicaDown"
	// QuorumAtRisk: the voters the leader reaches are exactly a quorum,
	// after a failure (Facts.Quorum).
	QuorumAtRisk Kind = "QuorumAtRisk"
	// DeleteWaiting: a deleted workload's instance has waited StuckMs or
	// longer in Stopping(WaitingToStop) for its dependents (stuck.go).
	DeleteWaiting Kind = "DeleteWaiting"
	// WorkloadLost: a desired instance has sat StuckMs or longer in
	// Failed(Lost) (stuck.go).
	WorkloadLost Kind = "WorkloadLost"
)

// Kinds lists every kind, for the gauge (a kind with no problem shows 0).
var Kinds = []Kind{MissingDependency, AgentGone, AgentNeverConnected, FailingRepeatedly, SpreadImpossible, CapacityExceeded, StorageFailed, VoteHeld, AgentStorageFailed,
	NoEligibleAgent, ReplicaDown, QuorumAtRisk, DeleteWaiting, WorkloadLost}

// Object kinds of state.ProblemObject.
const (
	ObjWorkload = "workload"
	ObjAgent    = "agent"
	ObjInstance = "instance"
	ObjReplica  = "replica"
)

// Finding is one problem found: what the leader records when it opens.
type Finding struct {
	Kind Kind
	// Key identifies the condition (kind/objects); equal keys are the
	// same problem.
	Key     string
	Objects []state.ProblemObject
	Summary string
	Detail  string
}

// Facts is what the detector needs besides the replicated store: what
// only the leader knows now. Every field may be empty.
type Facts struct {
	// NowMs is the leader's clock, Unix milliseconds.
	NowMs int64
	// Connected names the agents with a live stream to the leader (their
	// AgentConnected entry may still be in flight).
	Connected map[string]bool
	// InGrace names the agents whose reconnect grace runs (after a
	// failover or a broken stream), and the agents never seen whose grace
	// runs since this leader noticed them: their fate is not decided, so
	// they keep the agent problem they have and get no new one.
	InGrace map[string]bool
	// Maintenance names the agents in Maintenance mode: they raise no
	// agent problem however long they are away. Filled by the agent-mode
	// part of placement (docs/problems.md, "Extension points").
	Maintenance map[string]bool
	// Disabled names the agents in Disabled mode: they are not monitored
	// (MAMID: a Disabled host is not), so they raise no agent problem
	// either; their placed instances moved away.
	Disabled map[string]bool
	// ReplicasDown names the voters the leader does not reach, past a
	// short grace, with why in a few words (cluster.Member: health).
	ReplicasDown map[string]string
	// Quorum is the voters of the Raft configuration and how many of them
	// the leader reaches (itself included); zero when unknown.
	Quorum Quorum
	// Shortfalls are the placed workloads the allocator could not place
	// fully. Filled by the placement allocator.
	Shortfalls []Shortfall
	// StorageFailed names the replicas whose storage failed, with the
	// fault in a few words, as their gossip metadata announces it
	// (cluster.Node.StorageFaults).
	StorageFailed map[string]string
	// VoteHeld names the replicas that hold their votes, with why, as
	// their gossip metadata announces it (cluster.Node.VoteHolds).
	VoteHeld map[string]string
	// AgentStorageFailed names the agents with a stream to the leader
	// whose run folder failed, with the fault in a few words, as their
	// hello and load reports say it (leader memory only).
	AgentStorageFailed map[string]string
}

// Quorum counts the voters and the reachable ones.
type Quorum struct {
	Voters, Reachable int
}

// ShortfallReason says why the allocator placed fewer instances than
// wanted.
type ShortfallReason string

// Shortfall reasons; each raises the problem kind of the same name.
const (
	ShortSpread   ShortfallReason = ShortfallReason(SpreadImpossible)
	ShortCapacity ShortfallReason = ShortfallReason(CapacityExceeded)
	ShortEligible ShortfallReason = ShortfallReason(NoEligibleAgent)
)

// Shortfall is one placed workload the allocator could not place as
// asked: it wanted Wanted instances and placed Placed.
type Shortfall struct {
	Workload string
	Wanted   int
	Placed   int
	Reason   ShortfallReason
	// Detail is the allocator's own explanation (which risk groups or
	// agents were short); optional.
	Detail string
}

// Result is what one detection found.
type Result struct {
	// Findings are sorted by key.
	Findings []Finding
	// WakeAtMs, when not zero, is the earliest time at which the findings
	// may change with no change of the store or the facts (a failure
	// leaving its window): the leader detects again then. Zero: nothing
	// changes until something else does.
	WakeAtMs int64
}

// source is one check. It may read the store's open problems, for a
// check that keeps a problem open on weaker evidence than it took to
// open it, and the cache, for what depends on the desired state only.
type source func(st *state.Store, f *Facts, c *Cache, r *Result)

// sources are the checks, in no particular order. A new kind of problem
// is a function here and a constant above.
var sources = []source{missingDependencies, agentProblems, failingRepeatedly, shortfalls, storageFailures, voteHolds, agentStorageFailures,
	stuckInstances, replicaProblems}

// Detect runs every check on the store and the facts. It reads st and
// changes nothing.
func Detect(st *state.Store, f Facts) Result { return DetectCached(st, f, nil, 0) }

// Cache keeps what the checks derive from the desired state alone (the
// missing dependencies, the workloads assigned to each agent) for as long
// as the desired state stays the same, so that the detection after a
// commit of state reports only, the most frequent commit, does not walk
// every workload again. The zero Cache is empty; a nil one caches
// nothing.
type Cache struct {
	epoch, seq, revision uint64
	valid                bool
	deps                 []Finding
	assigned             map[string][]string
}

// refresh empties the cache unless it was filled from the desired state
// st holds now. epoch tells stores apart that may share a sequence
// number and revision (the leader passes the FSM's restore count).
func (c *Cache) refresh(st *state.Store, epoch uint64) {
	if c.valid && c.epoch == epoch && c.seq == st.DesiredSeq && c.revision == st.Revision {
		return
	}
	*c = Cache{epoch: epoch, seq: st.DesiredSeq, revision: st.Revision, valid: true}
	c.deps = findMissingDependencies(st)
	c.assigned = Assigned(st)
}

// Assigned is Assigned(st) from the cache, refreshed first.
func (c *Cache) Assigned(st *state.Store, epoch uint64) map[string][]string {
	c.refresh(st, epoch)
	return c.assigned
}

// DetectCached is Detect with a cache (nil: none); its result is the
// same as Detect's. epoch is as in Cache.
func DetectCached(st *state.Store, f Facts, c *Cache, epoch uint64) Result {
	if c != nil {
		c.refresh(st, epoch)
	}
	var r Result
	for _, src := range sources {
		src(st, &f, c, &r)
	}
	slices.SortFunc(r.Findings, func(a, b Finding) int { return strings.Compare(a.Key, b.Key) })
	return r
}

// wakeAt keeps the earliest wake-up time.
func (r *Result) wakeAt(ms int64) {
	if ms > 0 && (r.WakeAtMs == 0 || ms < r.WakeAtMs) {
		r.WakeAtMs = ms
	}
}

// key joins a kind and the names that identify its condition.
func key(k Kind, names ...string) string {
	return string(k) + "/" + strings.Join(names, "/")
}

// Changed lists the findings whose key is open with other objects or
// descriptions than the finding's: the condition changed under the same
// key (one more workload on a gone agent, fewer instances placed). From
// state.ClusterVersionProblemUpdates on the leader records them, which
// dates the problem's lastUpdated; before, a problem keeps what it
// opened with.
func Changed(open state.Problems, findings []Finding) []Finding {
	var out []Finding
	for _, f := range findings {
		p, ok := open.Open[f.Key]
		if ok && (p.Summary != f.Summary || p.Detail != f.Detail || !slices.Equal(p.Objects, f.Objects)) {
			out = append(out, f)
		}
	}
	return out
}

// Diff compares findings with the open problems: the findings whose key
// is not open are to open, the open problems no finding names are to
// close (by id, oldest first). What changed under an open key is
// Changed's.
func Diff(open state.Problems, findings []Finding) (opened []Finding, closed []uint64) {
	found := make(map[string]bool, len(findings))
	for _, f := range findings {
		if found[f.Key] {
			continue
		}
		found[f.Key] = true
		if _, ok := open.Open[f.Key]; !ok {
			opened = append(opened, f)
		}
	}
	for _, p := range open.List() {
		if !found[p.Key] {
			closed = append(closed, p.ID)
		}
	}
	return opened, closed
}
