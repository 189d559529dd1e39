package cluster_test

import (
	"errors"
	"io/fs"
	"slices"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/grapnel-io/grapnel/cluster"
	"github.com/grapnel-io/grapnel/cluster/clustertest"
	"github.com/grapnel-io/grapnel/internal/errs"
)

// storageFaults injects failed storage per replica (Config.StorageFault):
// while a replica's error is set, every write of its storage and every
// probe fails with it.
type storageFaults struct {
	mu   sync.Mutex
	errs map[string]error
	ops  map[string]string // replica → the only op that fails; "" every op
}

func (s *storageFaults) set(id string, err error, op string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.errs == nil {
		s.errs, s.ops = map[string]error{}, map[string]string{}
	}
	s.errs[id], s.ops[id] = err, op
}

func (s *storageFaults) option() clustertest.Option {
	return clustertest.WithConfig(func(cfg *cluster.Config) {
		id := cfg.ID
		cfg.StorageFault = func(op string) error {
			s.mu.Lock()
			defer s.mu.Unlock()
			if only := s.ops[id]; only != "" && op != only && op != "probe" {
				return nil
			}
			return s.errs[id]
		}
	})
}

// member is id as node's Members lists it.
func member(t testing.TB, node *cluster.Node, id string) cluster.Member {
	t.Helper()
	ms, err := node.Members()
	if err != nil {
		t.Fatal(err)
	}
	for _, m := range ms {
		if m.ID == id {
			return m
		}
	}
	t.Fatalf("%s is not a member as %s sees it", id, node.ID())
	return cluster.Member{}
}

// waitHealed waits until node's probe found its storage working again.
func waitHealed(t testing.TB, node *cluster.Node) {
	t.Helper()
	select {
	case <-node.StorageHealed():
	case <-time.After(waitLong):
		t.Fatalf("%s: no probe worked within %v after the storage was healed", node.ID(), waitLong)
	}
}

// Requirement (issue 29 point 3): a follower whose storage fails stores
// no more entries and says why in gossip, where every replica sees it;
// the other two keep committing, and the leader keeps its term (the
// failed replica does not make them vote). Once its storage works, its
// probe says so; started again on its data directory (what
// grapnel-server's re-execution does) it catches up and is a healthy
// voter, and nothing committed meanwhile is missing.
func TestStorageFailedFollowerKeepsOutAndComesBack(t *testing.T) {
	eachLogStore(t, testStorageFailedFollowerKeepsOutAndComesBack)
}

func testStorageFailedFollowerKeepsOutAndComesBack(t *testing.T, store clustertest.Option) {
	var faults storageFaults
	c := clustertest.New(t, 3, faults.option(), store)
	leader := c.WaitLeader(waitLong)
	applyAgents(t, c, "before", 10)
	var failed string
	for _, id := range c.Running() {
		if id != leader.ID() {
			failed = id
			break
		}
	}
	node := c.Node(failed)
	heldBefore := agents(c.FSM(failed))
	term := leader.Raft().CurrentTerm()

	faults.set(failed, &fs.PathError{Op: "write", Path: node.DataDir() + "/wal/segment.wal", Err: syscall.ENOSPC}, "")
	last := applyAgents(t, c, "during", 20)
	select {
	case <-node.StorageFailed():
	case <-time.After(waitLong):
		t.Fatal("the follower's storage never failed although its writes did")
	}
	f := node.StorageFault()
	if f.Op != "append log entries" || f.Path != "wal/segment.wal" || f.Cause() != "no space left on device" {
		// Seen once in CI: the first write that failed was a vote, so
		// some replica stood for election after the cluster had formed.
		for _, id := range c.Running() {
			t.Logf("%s: term %d, state %v, fast failover %+v", id, c.Node(id).Raft().CurrentTerm(), c.Node(id).Raft().State(), c.Node(id).FastFailover())
		}
		t.Fatalf("fault %+v, want the append of the segment with ENOSPC", f)
	}
	for _, id := range c.Running() {
		if id == failed {
			continue
		}
		c.WaitFor(id+" sees the fault in gossip", waitLong, func() bool {
			return strings.Contains(c.Node(id).StorageFaults()[failed], "no space left on device")
		})
		f := c.FSM(id)
		c.WaitFor(id+" applied the entries", waitLong, func() bool { return f.AppliedIndex() >= last })
		requireAgents(t, c, id, names("during", 20)...)
	}
	if m := member(t, leader, failed); m.Healthy || !strings.Contains(m.StorageFailed, "no space left on device") {
		t.Fatalf("the leader sees %s as %+v, want it unhealthy with the fault", failed, m)
	}
	if got := agents(c.FSM(failed)); slices.Contains(got, "during-19") {
		t.Fatalf("the failed replica applied an entry it could not store (it has %d agents, had %d)", len(got), len(heldBefore))
	}
	holdsFor(t, 1500*time.Millisecond, "the leader and its term", func() bool {
		return leader.IsLeader() && leader.Raft().CurrentTerm() == term && !node.IsLeader()
	})

	faults.set(failed, nil, "")
	waitHealed(t, node)
	c.Stop(failed)
	c.Restart(failed)
	node = c.Node(failed)
	if node.StorageFault() != nil {
		t.Fatalf("the restarted replica starts with a fault: %+v", node.StorageFault())
	}
	after := applyAgents(t, c, "after", 5)
	c.WaitApplied(after)
	c.WaitConverged()
	requireAgents(t, c, failed, append(append(names("before", 10), names("during", 20)...), names("after", 5)...)...)
	c.WaitFor(failed+" a healthy voter without a fault", waitLong, func() bool {
		m := member(t, c.Leader(), failed)
		return m.Healthy && m.Voter && m.StorageFailed == "" && len(c.Leader().StorageFaults()) == 0
	})
}

// Requirement (issue 29 point 3): a leader whose storage fails steps
// down; a new leader is elected in a higher term, every acknowledged
// write is there, and the write the failed leader could not store is
// answered with an unknown outcome and is on no other replica. The old
// leader comes back as a follower once its storage works.
func TestStorageFailedLeaderStepsDown(t *testing.T) {
	eachLogStore(t, testStorageFailedLeaderStepsDown)
}

func testStorageFailedLeaderStepsDown(t *testing.T, store clustertest.Option) {
	var faults storageFaults
	c := clustertest.New(t, 3, faults.option(), store)
	old := c.WaitLeader(waitLong)
	applyAgents(t, c, "before", 10)
	oldID, oldTerm := old.ID(), old.Raft().CurrentTerm()

	faults.set(oldID, syscall.EIO, "")
	_, _, err := old.Apply(agentCmd(t, "unstored"), 2*time.Second)
	if !errors.Is(err, errs.ErrOutcomeUnknown) || !errors.Is(err, cluster.ErrStorageFailed) {
		t.Fatalf("apply on the leader whose storage fails: %v, want ErrOutcomeUnknown and ErrStorageFailed", err)
	}
	var leader *cluster.Node
	c.WaitFor("a new leader", waitLong, func() bool {
		leader = c.Leader()
		return leader != nil && leader.ID() != oldID && !old.IsLeader()
	})
	if leader.Raft().CurrentTerm() <= oldTerm {
		t.Fatalf("new leader's term %d is not above %d", leader.Raft().CurrentTerm(), oldTerm)
	}
	last := applyAgents(t, c, "after", 5)
	for _, id := range c.Running() {
		if id == oldID {
			continue
		}
		f := c.FSM(id)
		c.WaitFor(id+" applied", waitLong, func() bool { return f.AppliedIndex() >= last })
		requireAgents(t, c, id, append(names("before", 10), names("after", 5)...)...)
		if slices.Contains(agents(f), "unstored") {
			t.Fatalf("%s holds the entry the failed leader could not store", id)
		}
	}
	c.WaitFor("the new leader sees the old one's fault", waitLong, func() bool {
		return strings.Contains(leader.StorageFaults()[oldID], "input/output error")
	})

	faults.set(oldID, nil, "")
	waitHealed(t, old)
	c.Stop(oldID)
	c.Restart(oldID)
	c.WaitApplied(last)
	c.WaitConverged()
	requireAgents(t, c, oldID, names("after", 5)...)
}

// Requirement (issue 29 point 3): a leader whose storage fails while it
// has nothing to store (here a snapshot it cannot write) hands
// leadership on by itself.
func TestStorageFailedIdleLeaderHandsOn(t *testing.T) {
	eachLogStore(t, testStorageFailedIdleLeaderHandsOn)
}

func testStorageFailedIdleLeaderHandsOn(t *testing.T, store clustertest.Option) {
	var faults storageFaults
	c := clustertest.New(t, 3, faults.option(), store)
	old := c.WaitLeader(waitLong)
	applyAgents(t, c, "before", 5)
	faults.set(old.ID(), syscall.EROFS, "create snapshot")
	// hashicorp/raft returns the error as text.
	if err := old.Raft().Snapshot().Error(); err == nil || !strings.Contains(err.Error(), "read-only file system") {
		t.Fatalf("snapshot on the failing leader: %v, want EROFS", err)
	}
	if f := old.StorageFault(); f == nil || f.Op != "create snapshot" {
		t.Fatalf("fault %+v, want the snapshot", f)
	}
	c.WaitFor("another leader", waitLong, func() bool {
		l := c.Leader()
		return l != nil && l.ID() != old.ID() && !old.IsLeader()
	})
	last := applyAgents(t, c, "after", 3)
	for _, id := range c.Running() {
		if id != old.ID() {
			f := c.FSM(id)
			c.WaitFor(id+" applied", waitLong, func() bool { return f.AppliedIndex() >= last })
		}
	}
}

// Requirement (issue 29 point 3): a replica whose storage failed stands
// for no election: a lone replica that stepped down would otherwise
// pre-vote for itself, take a new term (kept in memory only) and fail to
// store its vote, once every election timeout, for as long as the
// storage stays failed. Its term stays put instead. Once restarted on
// working storage it leads again with every acknowledged write.
func TestStorageFailedReplicaStandsForNoElection(t *testing.T) {
	eachLogStore(t, testStorageFailedReplicaStandsForNoElection)
}

func testStorageFailedReplicaStandsForNoElection(t *testing.T, store clustertest.Option) {
	var faults storageFaults
	c := clustertest.New(t, 1, faults.option(), store)
	node := c.WaitLeader(waitLong)
	applyAgents(t, c, "before", 5)
	faults.set(node.ID(), syscall.ENOSPC, "")
	if _, _, err := node.Apply(agentCmd(t, "unstored"), 2*time.Second); !errors.Is(err, cluster.ErrStorageFailed) {
		t.Fatalf("apply: %v, want ErrStorageFailed", err)
	}
	c.WaitFor("the replica stepped down", waitLong, func() bool { return !node.IsLeader() })
	term := node.Raft().CurrentTerm()
	holdsFor(t, 1500*time.Millisecond, "the term of the failed replica", func() bool {
		return node.Raft().CurrentTerm() == term && !node.IsLeader()
	})

	faults.set(node.ID(), nil, "")
	waitHealed(t, node)
	c.Stop(node.ID())
	c.Restart(node.ID())
	c.WaitLeader(waitLong)
	// A leader applies its log once its first entry of the term commits.
	c.WaitFor("the restarted replica applied its log", waitLong, func() bool { return len(agents(c.FSM(node.ID()))) >= 5 })
	requireAgents(t, c, node.ID(), names("before", 5)...)
	c.MustApply(agentCmd(t, "after"))
}
