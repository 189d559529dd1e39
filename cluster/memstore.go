package cluster

import "github.com/hashicorp/raft"

// MemoryStore keeps a replica's Raft log, stable store and snapshots in
// memory (Config.MemoryStore): hashicorp/raft's InmemStore and
// InmemSnapshotStore, with no fsync. It is for tests of leadership,
// membership and reconciliation that do not test storage
// (clustertest.InMemory); nothing survives the process, and the startup
// checks and repairs of the log and snapshots on disk (integrity.go,
// segcheck.go) do not run. Given again to a restarted node, it restarts
// with what the earlier run stored, as after a clean shutdown.
type MemoryStore struct {
	log   *raft.InmemStore
	snaps *raft.InmemSnapshotStore
}

// NewMemoryStore returns an empty store.
func NewMemoryStore() *MemoryStore {
	return &MemoryStore{log: raft.NewInmemStore(), snaps: raft.NewInmemSnapshotStore()}
}

// memLog is the in-memory log as a rawStore: closing it keeps its
// content for the next run.
type memLog struct{ *raft.InmemStore }

func (memLog) Close() error { return nil }
