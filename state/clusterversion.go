package state

// The cluster version numbers the replicated formats every replica of a
// cluster agrees to write (docs/upgrade.md). It is replicated
// (SetClusterVersion) and never goes down. While replicas of an older
// release may run, the leader writes only what that release reads, so a
// replica can go back to the older release on the same data; once every
// voter runs a release that supports a version and the upgrade is
// finalized, the leader raises it, and the formats of that version may
// be written from then on.
const (
	// ClusterVersionBaseline is the formats of release 0.3 (commit
	// 50f62c3), which knows no cluster version: a store that never saw
	// a SetClusterVersion entry is at it.
	ClusterVersionBaseline uint32 = 0
	// ClusterVersionRevocation adds what issue 27 replicates: lock
	// owners and the history's requesters as role/name keys (Store.
	// KeyedOwners), the members' certificates (ReplicaCertificate, type 145; snapshot
	// record 19), the certificates an operator's removal revokes
	// (ReplicaRemoval's certs and time_ms; snapshot record 20), and the
	// cluster version itself (SetClusterVersion, type 18; snapshot
	// record 21). Also from it on (issue 30, Store.RepairsOnce): the
	// FSM records every drift repair, once.
	ClusterVersionRevocation uint32 = 1
	// ClusterVersionProblemUpdates adds the problems' updates: the
	// ProblemsChanged entry's updated problems (field 4), which rewrite
	// an open problem's objects and descriptions and date them, and the
	// problem's "u" key in snapshot record 16 (Problem.UpdatedMs).
	ClusterVersionProblemUpdates uint32 = 2
)

// MaxClusterVersion is the newest cluster version this build reads and
// writes. A store at a higher version was written by a newer release:
// this build refuses it rather than misread it.
const MaxClusterVersion = ClusterVersionProblemUpdates

// Feature is what one cluster version adds, for the operators' view
// (grapnel cluster upgrade status) and the refusals of a feature that
// waits for it.
type Feature struct {
	Version uint32
	Name    string
	// Waiting says what the cluster does until the version is raised.
	Waiting string
	// Agents is set when the feature changes what agents are sent:
	// then every connected agent must support the version too.
	Agents bool
}

// Features lists, in version order, what each cluster version adds.
var Features = []Feature{
	{Version: ClusterVersionRevocation, Name: "certificate revocation",
		Waiting: "an operator's removal does not revoke the removed replica's certificates on every replica; " +
			"the removed replica is kept out by the membership checks alone, and a follower of the previous release proxies without the client's certificate"},
	{Version: ClusterVersionRevocation, Name: "lock owners and requesters by role and name",
		Waiting: "locks and the history name their owner and requester by the certificate's name alone, as the previous release does: " +
			"a commander and an operator of the same name share locks; from then on a lock taken under the bare name stays its holder's"},
	{Version: ClusterVersionRevocation, Name: "every drift repair recorded once",
		Waiting: "the history records no drift repair that removed an unknown instance, and records again a repair an agent reports anew after a replica or agent restart, as the previous release does"},
	{Version: ClusterVersionProblemUpdates, Name: "problem updates (lastUpdated)",
		Waiting: "an open problem keeps the objects and descriptions it opened with, and its lastUpdated is the time it opened"},
}

// RepairsOnce reports whether the FSM records every drift repair once
// (docs/history.md): the removal of an unknown instance too, and not
// again a repair an agent reports anew after a state the server set
// (History.LastReported). From ClusterVersionRevocation on; before, it
// records them as the previous release does, so that every replica
// holds the same history with the same transaction numbers.
func (s *Store) RepairsOnce() bool { return s.ClusterVersion >= ClusterVersionRevocation }

// ProblemUpdates reports whether open problems are updated when their
// condition changes under the same key: from ClusterVersionProblemUpdates
// on. Before, a replica of the previous release would not apply the
// updates and its problems would differ.
func (s *Store) ProblemUpdates() bool { return s.ClusterVersion >= ClusterVersionProblemUpdates }

// KeyedOwners reports whether lock owners and the history's requesters
// are role/name keys (identity.Key): from ClusterVersionRevocation on.
// Before, the previous release's form holds, the certificate's name alone,
// so that a lock a leader of either release took is its owner's under
// both (state.SameOwner).
func (s *Store) KeyedOwners() bool { return s.ClusterVersion >= ClusterVersionRevocation }

// SetClusterVersion raises the cluster version to v; a lower or equal v
// changes nothing (it never goes down).
func (s *Store) SetClusterVersion(v uint32) {
	if v > s.ClusterVersion {
		s.ClusterVersion = v
	}
}
