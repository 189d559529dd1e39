package cluster

import (
	"errors"

	"github.com/hashicorp/raft"
)

// StopSnapshotMin is how many entries applied past the newest snapshot
// make a replica that stops take a snapshot first (SnapshotBeforeStop).
// A start applies every entry after the newest snapshot again, and its
// checks read each of them before that: on a 2-core machine a single
// replica with 2,095 such entries answered its first request after
// about 140 ms instead of 20 (docs/operations.md, "A start on a grown
// log"). A vehicle writes a few entries per drive, fewer than the
// threshold (DefaultSnapshotThreshold), so without this it would replay
// up to that many at every ignition. A snapshot of a vehicle's state is
// tens to hundreds of kilobytes, written once per stop; below this many
// entries the replay costs less than the write.
const StopSnapshotMin = 64

// SnapshotBeforeStop takes a snapshot when at least StopSnapshotMin
// entries were applied since the newest one, so that the next start
// restores it instead of applying them again. It returns the index of
// the snapshot taken, 0 when none was needed. A replica whose storage
// failed, or that found corrupt data, takes none: it writes nothing until
// it starts again. Call it once the replica no longer serves, before
// Shutdown; a follower takes it as a leader does (it is local).
func (n *Node) SnapshotBeforeStop() (uint64, error) {
	if n.storage.Fault() != nil || n.Corruption() != nil {
		return 0, nil
	}
	if n.raft.AppliedIndex() < n.integrity.snapIndex()+StopSnapshotMin {
		return 0, nil
	}
	if err := n.raft.Snapshot().Error(); err != nil {
		if errors.Is(err, raft.ErrNothingNewToSnapshot) {
			return 0, nil
		}
		return 0, FoldRaftError(err)
	}
	return n.integrity.snapIndex(), nil
}
