package cluster

import (
	"errors"
	"fmt"
	"io"
	"os"
	"strings"
	"time"

	"github.com/hashicorp/raft"

	"github.com/grapnel-io/grapnel/internal/errs"
)

// seemsAlive: this node, a member alive in gossip, or without
// gossip one that answered the leader within an election timeout.
func (n *Node) seemsAlive(id string) bool {
	if id == n.cfg.ID {
		return true
	}
	if n.gossip != nil {
		p, ok := n.peers.get(id)
		return ok && p.GossipStatus == StatusAlive
	}
	c, ok := n.contacts.get(id)
	return ok && n.now().Sub(c.At) <= n.timing.ElectionTimeout
}

// TransferLeadership hands leadership to the replica id, or to the most
// up-to-date voter when id is empty, and waits until it is done.
func (n *Node) TransferLeadership(id string) error {
	if !n.IsLeader() {
		return errs.ErrNotLeader
	}
	if id == "" {
		return n.transfer("", n.raft.LeadershipTransfer)
	}
	_, target, err := n.member(id)
	if err != nil {
		return err
	}
	if target.Suffrage != raft.Voter {
		return fmt.Errorf("%w: replica %q is not a voter and cannot lead", ErrNotVoter, id)
	}
	if id == n.cfg.ID {
		return nil
	}
	return n.transfer(id, func() raft.Future { return n.raft.LeadershipTransferToServer(target.ID, target.Address) })
}

// transfer runs a leadership transfer, up to three times while this node
// still leads: hashicorp/raft gives the target one election timeout to
// win, which a briefly overloaded target can miss. A transfer that timed
// out but moved leadership to the target (or to anyone, for an empty id)
// after all counts as done.
func (n *Node) transfer(id string, start func() raft.Future) error {
	for attempt := 1; ; attempt++ {
		err := FoldRaftError(start().Error())
		if err == nil || !strings.Contains(err.Error(), "leadership transfer timeout") {
			return err
		}
		if !n.IsLeader() {
			if _, leader := n.raft.LeaderWithID(); leader != "" && (id == "" || string(leader) == id) {
				return nil
			}
			return err
		}
		if attempt == 3 {
			return err
		}
		n.logger.Warn("leadership transfer timed out; retrying", "to", id, "attempt", attempt)
	}
}

// SaveSnapshot takes a fresh snapshot and writes it to w in the file
// snapshot store's format: Raft metadata is not included, the FSM's
// snapshot stream is.
func (n *Node) SaveSnapshot(w io.Writer) (uint64, error) {
	f := n.raft.Snapshot()
	if err := f.Error(); err != nil && !errors.Is(err, raft.ErrNothingNewToSnapshot) {
		return 0, FoldRaftError(err)
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
// r on every replica. Only the leader can. Raft needs the exact size up
// front: with size < 0 the snapshot is first spooled to a temporary file
// in the data directory to learn it.
func (n *Node) RestoreSnapshot(r io.Reader, size int64, timeout time.Duration) error {
	if !n.IsLeader() {
		return errs.ErrNotLeader
	}
	if size < 0 {
		f, err := os.CreateTemp(n.cfg.DataDir, "restore-*.snap")
		if err != nil {
			return fmt.Errorf("spool snapshot: %w", err)
		}
		defer os.Remove(f.Name())
		defer f.Close()
		if size, err = io.Copy(f, r); err != nil {
			return fmt.Errorf("spool snapshot: %w", err)
		}
		if _, err := f.Seek(0, io.SeekStart); err != nil {
			return fmt.Errorf("spool snapshot: %w", err)
		}
		r = f
	}
	meta := &raft.SnapshotMeta{Version: raft.SnapshotVersionMax, Size: size}
	return FoldRaftError(n.raft.Restore(meta, r, timeout))
}

func (n *Node) configuration() (raft.Configuration, error) {
	f := n.raft.GetConfiguration()
	if err := f.Error(); err != nil {
		return raft.Configuration{}, err
	}
	return f.Configuration(), nil
}

// member returns the Raft configuration and the server id in it, or
// errs.ErrUnknownReplica.
func (n *Node) member(id string) (raft.Configuration, *raft.Server, error) {
	cfg, err := n.configuration()
	if err != nil {
		return cfg, nil, err
	}
	for i, s := range cfg.Servers {
		if string(s.ID) == id {
			return cfg, &cfg.Servers[i], nil
		}
	}
	return cfg, nil, fmt.Errorf("%w: %q", errs.ErrUnknownReplica, id)
}

// AddReplica is an operator's approval (grapnel cluster add): it adds
// replica id at the Raft address addr as a non-voter, without the
// certificate probe of gossip admission, and autopilot promotes it once
// healthy. Raft's connections still require the replica certificate of
// id at addr (tlsLayer). Adding a member already there at the same address
// does nothing; a voter is never demoted. A replica an operator removed
// may be added back this way. Leader only.
func (n *Node) AddReplica(id, addr string, timeout time.Duration) error {
	if !n.IsLeader() {
		return errs.ErrNotLeader
	}
	cfg, err := n.configuration()
	if err != nil {
		return err
	}
	f := n.raft.AddNonvoter
	for _, s := range cfg.Servers {
		if string(s.ID) != id {
			continue
		}
		if string(s.Address) == addr {
			return nil
		}
		if s.Suffrage == raft.Voter {
			f = n.raft.AddVoter // a move keeps the vote
		}
	}
	if _, _, ok := n.ledger.RemovedRun(id); ok {
		// The operator takes back the removal, whichever run is there.
		if err := n.recordRemoval(id, 0, true, nil, timeout); err != nil {
			return err
		}
	}
	n.logger.Info("operator adds replica", "id", id, "raft", addr)
	err = FoldRaftError(f(raft.ServerID(id), raft.ServerAddress(addr), 0, timeout).Error())
	n.triggerReconcile()
	return err
}
