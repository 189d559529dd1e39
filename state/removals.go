package state

// RemovedReplica is an operator's removal of one run of a replica while
// gossip saw it alive: the run's incarnation (a number each run draws at
// start and announces in gossip) and the Raft index of the record, which
// precedes the configuration change that removes it. It is replicated so
// that every later leader, not only the one that removed it, keeps that
// run out of the Raft configuration; a later run under the same id is
// added once the removal has committed (cluster/removal.go).
type RemovedReplica struct {
	Incarnation uint64 `json:"i"`
	Index       uint64 `json:"x"`
}

// RecordRemoval records the removal of run incarnation of replica id at
// index, replacing an earlier one of that id: only the newest removal of
// an id says anything about the runs that may come back.
func (s *Store) RecordRemoval(id string, incarnation, index uint64) {
	if s.Removed == nil {
		s.Removed = map[string]RemovedReplica{}
	}
	s.Removed[id] = RemovedReplica{Incarnation: incarnation, Index: index}
}

// ForgetRemoval drops the removal of replica id: an operator added it back
// by hand.
func (s *Store) ForgetRemoval(id string) {
	delete(s.Removed, id)
	if len(s.Removed) == 0 {
		s.Removed = nil
	}
}

// Removal returns the recorded removal of replica id.
func (s *Store) Removal(id string) (RemovedReplica, bool) {
	r, ok := s.Removed[id]
	return r, ok
}
