package cluster

import (
	"errors"
	"fmt"
	"io"
	"syscall"
	"testing"

	"github.com/hashicorp/raft"
)

// The successor is the next voter after the dead leader in id order,
// wrapping around, whatever the order of the configuration; non-voters
// never stand.
func TestSuccessor(t *testing.T) {
	cfg := raft.Configuration{Servers: []raft.Server{
		{ID: "c", Suffrage: raft.Voter}, {ID: "a", Suffrage: raft.Nonvoter},
		{ID: "d", Suffrage: raft.Voter}, {ID: "b", Suffrage: raft.Voter},
	}}
	for leader, want := range map[raft.ServerID]raft.ServerID{"b": "c", "c": "d", "d": "b", "a": "b"} {
		if got := successor(cfg, leader); got != want {
			t.Errorf("leader %s: successor %q, want %q", leader, got, want)
		}
	}
	solo := raft.Configuration{Servers: []raft.Server{{ID: "a", Suffrage: raft.Voter}}}
	if got := successor(solo, "a"); got != "" {
		t.Errorf("no other voter: successor %q", got)
	}
}

// Only the far side's end of a connection counts, not this side's close.
func TestPeerClosed(t *testing.T) {
	for err, want := range map[error]bool{
		io.EOF: true, io.ErrUnexpectedEOF: true, fmt.Errorf("read: %w", syscall.ECONNRESET): true,
		errors.New("use of closed network connection"): false, syscall.ETIMEDOUT: false,
	} {
		if got := peerClosed(err); got != want {
			t.Errorf("peerClosed(%v) = %v, want %v", err, got, want)
		}
	}
}
