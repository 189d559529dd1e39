package server

import (
	"bytes"
	"testing"
	"time"

	"github.com/hashicorp/raft"
	"google.golang.org/protobuf/proto"

	"github.com/grapnel-io/grapnel/fsm"
	"github.com/grapnel-io/grapnel/internal/clock"
	"github.com/grapnel-io/grapnel/internal/testwait"
	"github.com/grapnel-io/grapnel/state"
)

// After an operator restores a snapshot, the leader rebuilds its memory
// from the restored store: the next update builds on it, and the agents,
// whose workloads came from the replaced state, are disconnected and get
// the restored workloads when they come back within the grace.
func TestSnapshotRestoreRebuildsLeaderMemory(t *testing.T) {
	fake := clock.NewFake(time.Unix(1_700_000_000, 0))
	ts := startServerCfg(t, t.TempDir(), mustState(t, nginx), func(c *Config) { c.Clock = fake })
	agent, before := ts.hello("agent_A", 1, nil)
	testwait.For(t, 5e9, func() bool {
		ok := false
		ts.store(func(s *state.Store) { _, ok = s.Agents["agent_A"] })
		return ok
	}, "agent_A stored")
	var snap bytes.Buffer
	var seq uint64
	ts.fsm.Read(func(s *state.Store, applied uint64) {
		seq = s.DesiredSeq
		if err := fsm.WriteSnapshot(&snap, s, applied); err != nil {
			t.Fatal(err)
		}
	})
	cli := ts.cli()
	extra := "apiVersion: v1\nworkloads:\n  extra:\n    runtime: podman\n    agent: agent_A\n    runtimeConfig: extra\n"
	if r := cli.update(manifest(t, extra), "desiredState.workloads.extra"); r.GetUpdateStateSuccess() == nil {
		t.Fatalf("update before the restore: %v", r)
	}
	agent.expect("extra", isUpdateWorkload)

	meta := &raft.SnapshotMeta{Version: raft.SnapshotVersionMax, Size: int64(snap.Len())}
	if err := ts.node.Raft().Restore(meta, bytes.NewReader(snap.Bytes()), 10*time.Second); err != nil {
		t.Fatal(err)
	}
	// The leader drops the agent's stream and waits for it to come back.
	testwait.For(t, 5e9, func() bool { return fake.PendingFor(DefaultAgentReconnectGrace) == 1 }, "grace for agent_A")
	_, after := ts.hello("agent_A", 1, nil)
	if !proto.Equal(before, after) {
		t.Fatalf("ServerHello after the restore:\n%v\nwant\n%v", after, before)
	}
	later := "apiVersion: v1\nworkloads:\n  later:\n    runtime: podman\n    agent: agent_A\n    runtimeConfig: later\n"
	if r := cli.update(manifest(t, later), "desiredState.workloads.later"); r.GetUpdateStateSuccess() == nil {
		t.Fatalf("update after the restore: %v", r)
	}
	ts.store(func(s *state.Store) {
		_, hasExtra := s.Desired.Workloads["extra"]
		_, hasLater := s.Desired.Workloads["later"]
		if hasExtra || !hasLater || s.Desired.Workloads["nginx"] == nil || s.DesiredSeq != seq+1 {
			t.Fatalf("after the restore: workloads %v, seq %d (restored %d)", state.SortedKeys(s.Desired.Workloads), s.DesiredSeq, seq)
		}
	})
}
