package cluster

import (
	"errors"
	"fmt"
	"io"
	"strings"
	"testing"

	"github.com/hashicorp/raft"

	"github.com/grapnel-io/grapnel/internal/errs"
)

// Raft's leadership errors become errs.ErrNotLeader, keeping Raft's text;
// others pass unchanged.
func TestFoldRaftError(t *testing.T) {
	for _, err := range []error{raft.ErrNotLeader, raft.ErrLeadershipLost, raft.ErrLeadershipTransferInProgress,
		fmt.Errorf("apply: %w", raft.ErrLeadershipLost)} {
		got := FoldRaftError(err)
		if !errors.Is(got, errs.ErrNotLeader) || !strings.Contains(got.Error(), err.Error()) {
			t.Errorf("FoldRaftError(%v) = %v", err, got)
		}
	}
	for _, err := range []error{nil, io.EOF, raft.ErrRaftShutdown} {
		if got := FoldRaftError(err); got != err {
			t.Errorf("FoldRaftError(%v) = %v, want it unchanged", err, got)
		}
	}
}
