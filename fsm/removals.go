package fsm

// RemovedRun implements cluster.RemovalLedger: the recorded removal of
// replica id (state.RemovedReplica).
func (f *FSM) RemovedRun(id string) (incarnation, index uint64, ok bool) {
	f.mu.RLock()
	defer f.mu.RUnlock()
	r, ok := f.store.Removal(id)
	return r.Incarnation, r.Index, ok
}

// RemovalEntry implements cluster.RemovalLedger: the ReplicaRemovalType
// entry that records the removal of run incarnation of replica id or,
// with forget, drops its record.
func (f *FSM) RemovalEntry(id string, incarnation uint64, forget bool) ([]byte, error) {
	return Encode(&ReplicaRemovalRequest{ID: id, Incarnation: incarnation, Forget: forget})
}
