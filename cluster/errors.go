package cluster

import (
	"errors"
	"fmt"

	"github.com/hashicorp/raft"

	"github.com/grapnel-io/grapnel/internal/errs"
)

// The cluster's own sentinels. Those it shares with the rest of Grapnel
// (errs.ErrNotLeader, errs.ErrQuorum, errs.ErrUnknownReplica) are in
// internal/errs.
var (
	// ErrConfig wraps every configuration error of NewNode.
	ErrConfig = errors.New("invalid cluster configuration")
	// ErrNotVoter refuses to hand leadership to a non-voter.
	ErrNotVoter = errors.New("the replica is not a voter")
	// ErrLeaveTimeout: the replica announced its leave but was still in
	// the Raft configuration when the timeout ran out.
	ErrLeaveTimeout = errors.New("still in the Raft configuration after leaving")
)

// FoldRaftError folds Raft's leadership errors into errs.ErrNotLeader, so
// that callers (the operator actions here, the server's proposals) know
// one sentinel: the replica does not lead, or stopped leading before the
// operation was done, and the work belongs to the leader. A write the
// leader's failed storage did not take folds into errs.ErrOutcomeUnknown.
// Raft's text is kept after the sentinel's; other errors pass unchanged.
func FoldRaftError(err error) error {
	if errors.Is(err, raft.ErrNotLeader) || errors.Is(err, raft.ErrLeadershipLost) ||
		errors.Is(err, raft.ErrLeadershipTransferInProgress) {
		return fmt.Errorf("%w: %v", errs.ErrNotLeader, err)
	}
	if errors.Is(err, ErrStorageFailed) {
		// A leader whose storage failed steps down; what it failed to
		// store was not replicated, but a restart may find it on its
		// disk, and a replica that then leads before any other commits
		// it (storage.go).
		return fmt.Errorf("%w: the leader's storage failed and it stepped down: %w", errs.ErrOutcomeUnknown, err)
	}
	return err
}
