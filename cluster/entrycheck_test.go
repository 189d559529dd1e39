package cluster_test

import (
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/hashicorp/raft"

	"github.com/grapnel-io/grapnel/cluster"
	"github.com/grapnel-io/grapnel/cluster/clustertest"
	"github.com/grapnel-io/grapnel/fsm"
	"github.com/grapnel-io/grapnel/internal/testwait"
)

// fakeLeader sends AppendEntries to a replica's Raft port the way any
// process that reaches it can (the Raft port is not authenticated yet).
type fakeLeader struct {
	t     *testing.T
	trans *raft.NetworkTransport
}

func newFakeLeader(t *testing.T) *fakeLeader {
	addr, err := clustertest.FreeAddr()
	if err != nil {
		t.Fatal(err)
	}
	tr, err := raft.NewTCPTransport(addr, nil, 2, 5*time.Second, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { tr.Close() })
	return &fakeLeader{t: t, trans: tr}
}

// send appends one command entry at index (term 1) and marks it
// committed.
func (l *fakeLeader) send(target string, index uint64, data []byte) (*raft.AppendEntriesResponse, error) {
	req := &raft.AppendEntriesRequest{
		RPCHeader:         raft.RPCHeader{ProtocolVersion: raft.ProtocolVersionMax, ID: []byte("intruder"), Addr: []byte(l.trans.LocalAddr())},
		Term:              1,
		PrevLogEntry:      index - 1,
		PrevLogTerm:       map[bool]uint64{true: 0, false: 1}[index == 1],
		Entries:           []*raft.Log{{Index: index, Term: 1, Type: raft.LogCommand, Data: data}},
		LeaderCommitIndex: index,
	}
	var resp raft.AppendEntriesResponse
	err := l.trans.AppendEntries("victim", raft.ServerAddress(target), req, &resp)
	return &resp, err
}

// An entry of a type this version does not know, arriving through the
// transport, is refused before Raft stores it: before the check it
// panicked the FSM and crash-looped the replica on every restart. Entries
// of known types keep being accepted, a known type whose body does not
// decode halts the FSM without a crash, and the replica restarts.
func TestUnknownEntryTypeRefusedAtTheTransport(t *testing.T) {
	dir := t.TempDir()
	addr, err := clustertest.FreeAddr()
	if err != nil {
		t.Fatal(err)
	}
	gossip, err := clustertest.FreeAddr()
	if err != nil {
		t.Fatal(err)
	}
	start := func() (*cluster.Node, *fsm.FSM) {
		f := fsm.New()
		// No bootstrap and no join address that answers: the replica
		// waits for a leader, and takes whoever sends entries as one.
		n, err := cluster.NewNode(cluster.Config{ID: "victim", DataDir: dir, RaftAddress: addr, FSM: f,
			GossipAddress: gossip, Join: []string{"127.0.0.1:1"}, CheckEntry: fsm.CheckType})
		if err != nil {
			t.Fatal(err)
		}
		return n, f
	}
	node, f := start()
	leader := newFakeLeader(t)

	_, err = leader.send(addr, 1, []byte{126, '{', '}'})
	if err == nil || !strings.Contains(err.Error(), "unknown command type") {
		t.Fatalf("an unknown entry type was not refused: %v", err)
	}
	if node.RefusedEntries() != 1 || f.AppliedIndex() != 0 || f.Halted() != nil {
		t.Fatalf("refused %d, applied %d, halted %v", node.RefusedEntries(), f.AppliedIndex(), f.Halted())
	}

	resp, err := leader.send(addr, 1, agentCmd(t, "agent_ok"))
	if err != nil || !resp.Success {
		t.Fatalf("a valid entry after the refusal: %v %+v", err, resp)
	}
	waitApplied(t, f, 1)
	if got := agents(f); len(got) != 1 || got[0] != "agent_ok" {
		t.Fatalf("agents %v", got)
	}

	// A known type whose body does not decode passes the type check; the
	// FSM halts on it instead of panicking, and applies nothing more.
	if _, err := leader.send(addr, 2, []byte{byte(fsm.AgentGoneType), '{'}); err != nil {
		t.Fatal(err)
	}
	testwait.For(t, 10*time.Second, func() bool { return f.Halted() != nil }, "the FSM to halt on an undecodable entry")
	if !errors.Is(f.Halted(), fsm.ErrUndecodable) || len(agents(f)) != 1 {
		t.Fatalf("halt %v, agents %v", f.Halted(), agents(f))
	}
	if err := node.Shutdown(); err != nil {
		t.Fatal(err)
	}

	node, f = start()
	defer node.Shutdown()
	leader = newFakeLeader(t) // the old one's pooled connection is gone
	if resp, err := leader.send(addr, 3, agentCmd(t, "agent_later")); err != nil || !resp.Success {
		t.Fatalf("the restarted replica does not take entries: %v %+v", err, resp)
	}
	// Replaying the log halts again at entry 2: nothing after it applies.
	testwait.For(t, 10*time.Second, func() bool { return f.Halted() != nil }, "the restarted FSM to halt at the same entry")
	if h := f.Halted(); h.Index != 2 || len(agents(f)) != 1 {
		t.Fatalf("restarted: halt %v, agents %v", h, agents(f))
	}
}

func waitApplied(t *testing.T, f *fsm.FSM, index uint64) {
	t.Helper()
	testwait.For(t, 10*time.Second, func() bool { return f.AppliedIndex() >= index },
		"index %d applied (at %v)", index, testwait.Lazy(func() string { return fmt.Sprint(f.AppliedIndex()) }))
}
