package cluster

import (
	"errors"
	"fmt"
	"io"
	"time"

	"github.com/hashicorp/raft"
)

// Sentinel errors of the operator actions.
var (
	// ErrUnknownMember names a replica that is not in the configuration.
	ErrUnknownMember = errors.New("no such replica in the cluster")
	// ErrQuorum refuses an action that would leave too few voters.
	ErrQuorum = errors.New("the action would lose the quorum")
)

// RemoveReplica takes a replica out of the Raft configuration. Only the
// leader can; it refuses to remove itself (transfer leadership first, or
// let the replica leave).
func (n *Node) RemoveReplica(id string, timeout time.Duration) error {
	if !n.IsLeader() {
		return ErrNotLeader
	}
	if id == n.cfg.ID {
		return fmt.Errorf("%w: the leader cannot remove itself; transfer leadership first", ErrQuorum)
	}
	cfg, err := n.configuration()
	if err != nil {
		return err
	}
	found := false
	for _, s := range cfg.Servers {
		if string(s.ID) == id {
			found = true
		}
	}
	if !found {
		return fmt.Errorf("%w: %q", ErrUnknownMember, id)
	}
	return wrapRaftErr(n.raft.RemoveServer(raft.ServerID(id), 0, timeout).Error())
}

// TransferLeadership hands leadership to the replica id, or to the most
// up-to-date voter when id is empty, and waits until it is done.
func (n *Node) TransferLeadership(id string) error {
	if !n.IsLeader() {
		return ErrNotLeader
	}
	var f raft.Future
	if id == "" {
		f = n.raft.LeadershipTransfer()
	} else {
		cfg, err := n.configuration()
		if err != nil {
			return err
		}
		var target *raft.Server
		for i, s := range cfg.Servers {
			if string(s.ID) == id {
				target = &cfg.Servers[i]
			}
		}
		if target == nil {
			return fmt.Errorf("%w: %q", ErrUnknownMember, id)
		}
		if target.Suffrage != raft.Voter {
			return fmt.Errorf("replica %q is not a voter and cannot lead", id)
		}
		if id == n.cfg.ID {
			return nil
		}
		f = n.raft.LeadershipTransferToServer(target.ID, target.Address)
	}
	return wrapRaftErr(f.Error())
}

// SaveSnapshot takes a fresh snapshot and writes it to w in the file
// snapshot store's format: Raft metadata is not included, the FSM's
// snapshot stream is.
func (n *Node) SaveSnapshot(w io.Writer) (uint64, error) {
	f := n.raft.Snapshot()
	if err := f.Error(); err != nil && !errors.Is(err, raft.ErrNothingNewToSnapshot) {
		return 0, wrapRaftErr(err)
	}
	if f.Error() != nil {
		// Nothing new since the last snapshot: use the latest one.
		return n.copyLatestSnapshot(w)
	}
	meta, rc, err := f.Open()
	if err != nil {
		return 0, err
	}
	defer rc.Close()
	if _, err := io.Copy(w, rc); err != nil {
		return 0, err
	}
	return meta.Index, nil
}

func (n *Node) copyLatestSnapshot(w io.Writer) (uint64, error) {
	list, err := n.snaps.List()
	if err != nil {
		return 0, err
	}
	if len(list) == 0 {
		return 0, errors.New("no snapshot available")
	}
	meta, rc, err := n.snaps.Open(list[0].ID)
	if err != nil {
		return 0, err
	}
	defer rc.Close()
	if _, err := io.Copy(w, rc); err != nil {
		return 0, err
	}
	return meta.Index, nil
}

// RestoreSnapshot replaces the replicated state with the snapshot read from
// r on every replica. Only the leader can.
func (n *Node) RestoreSnapshot(r io.Reader, size int64, timeout time.Duration) error {
	if !n.IsLeader() {
		return ErrNotLeader
	}
	meta := &raft.SnapshotMeta{Version: raft.SnapshotVersionMax, Size: size}
	return wrapRaftErr(n.raft.Restore(meta, r, timeout))
}

func (n *Node) configuration() (raft.Configuration, error) {
	f := n.raft.GetConfiguration()
	if err := f.Error(); err != nil {
		return raft.Configuration{}, err
	}
	return f.Configuration(), nil
}

// wrapRaftErr maps Raft's leadership errors onto ErrNotLeader so callers
// need to know only one sentinel.
func wrapRaftErr(err error) error {
	if err == nil {
		return nil
	}
	if errors.Is(err, raft.ErrNotLeader) || errors.Is(err, raft.ErrLeadershipLost) {
		return fmt.Errorf("%w: %v", ErrNotLeader, err)
	}
	return err
}
