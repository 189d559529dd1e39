package cluster_test

import (
	"slices"
	"testing"
	"time"

	"github.com/grapnel-io/grapnel/cluster"
	"github.com/grapnel-io/grapnel/cluster/clustertest"
	"github.com/grapnel-io/grapnel/fsm"
	"github.com/grapnel-io/grapnel/internal/identity"
	"github.com/grapnel-io/grapnel/internal/tlsreload"
	"github.com/grapnel-io/grapnel/rpc"
	"github.com/grapnel-io/grapnel/rpc/rpctest"
)

// intruder starts a node that joins the cluster's gossip with its key and
// announces role=server, with raftTLS on its Raft port (nil: plain).
func intruder(t *testing.T, c *clustertest.Cluster, id string, raftTLS *tlsreload.Store) *cluster.Node {
	t.Helper()
	n, err := cluster.NewNode(cluster.Config{
		ID: id, DataDir: t.TempDir(), RaftAddress: "127.0.0.1:0", GossipAddress: "127.0.0.1:0",
		GossipKey: clustertest.TestGossipKey, Join: []string{c.WaitLeader(waitLong).GossipAddress()},
		FSM: fsm.New(), Timing: clustertest.FastTiming(), Version: "test", RaftTLS: raftTLS,
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { n.Shutdown() })
	go func() {
		for range n.LeaderCh() {
		}
	}()
	return n
}

// Requirement (issue 17, point 2): with TLS on the Raft port a gossip
// member that announces role=server is added to the Raft configuration
// only after it proved a replica certificate naming its id there; one
// that cannot (plain Raft port, an agent's certificate, another
// replica's certificate) is never added, and a real replica is.
func TestAdmissionNeedsAReplicaCertificate(t *testing.T) {
	ca := rpctest.NewCA(t)
	certs := replicaCerts(t, ca)
	c := clustertest.New(t, 3, clustertest.WithRaftTLS(certs))
	c.WaitLeader(waitLong)
	var voters, nonvoters []string
	c.WaitFor("three voters", waitLong, func() bool {
		v, nv, ok := c.LeaderConfiguration()
		voters, nonvoters = v, nv
		return ok && len(v) == 3
	})

	agentStore, err := rpc.NewTLSStore(ca.IssueIdentity(t, "agent-x", identity.Agent, "x1"))
	if err != nil {
		t.Fatal(err)
	}
	intruders := map[string]*cluster.Node{
		"x0": intruder(t, c, "x0", nil),         // plain Raft port
		"x1": intruder(t, c, "x1", agentStore),  // an agent's certificate
		"x2": intruder(t, c, "x2", certs("n1")), // replica n1's certificate, announcing x2
	}
	c.WaitFor("the intruders in the leader's gossip view", waitLong, func() bool {
		l := c.Leader()
		if l == nil {
			return false
		}
		ms, err := l.Members()
		if err != nil {
			return false
		}
		seen := 0
		for _, m := range ms {
			if intruders[m.ID] != nil {
				seen++
			}
		}
		return seen == len(intruders)
	})
	holdsFor(t, 3*time.Second, "the configuration unchanged", func() bool {
		l := c.Leader()
		if l == nil {
			return true // between leaders under load: nothing to compare
		}
		v, nv := c.Configuration(l.ID())
		return slices.Equal(v, voters) && slices.Equal(nv, nonvoters)
	})

	id := c.Add()
	var v, nv []string
	c.WaitFor("the real replica a voter", waitLong, func() bool {
		var ok bool
		v, nv, ok = c.LeaderConfiguration()
		return ok && slices.Contains(v, id)
	})
	for x := range intruders {
		if slices.Contains(v, x) || slices.Contains(nv, x) {
			t.Fatalf("intruder %s is in the configuration: voters %v, non-voters %v", x, v, nv)
		}
	}
}

// Requirement (issue 17, point 2): an operator's approval (grapnel
// cluster add) adds a replica without the gossip probe, but does not
// bypass its certificate: a member at an address that cannot show the
// replica certificate of its id never becomes a voter; adding a member
// already there is a no-op.
func TestOperatorAddStillNeedsTheCertificate(t *testing.T) {
	ca := rpctest.NewCA(t)
	c := clustertest.New(t, 3, clustertest.WithRaftTLS(replicaCerts(t, ca)))
	l := c.WaitLeader(waitLong)
	c.WaitFor("three voters", waitLong, func() bool { v, _ := c.Configuration(l.ID()); return len(v) == 3 })
	x := intruder(t, c, "x0", nil) // plain Raft port
	if err := l.AddReplica("x0", x.RaftAddress(), 5*time.Second); err != nil {
		t.Fatalf("operator add: %v", err)
	}
	_, nv := c.Configuration(l.ID())
	if !slices.Contains(nv, "x0") {
		t.Fatalf("x0 not added as non-voter: %v", nv)
	}
	holdsFor(t, 3*time.Second, "x0 not a voter", func() bool {
		v, _, ok := c.LeaderConfiguration()
		return !ok || !slices.Contains(v, "x0") // between leaders: nothing to compare
	})
	if x.Raft().LastIndex() != 0 {
		t.Fatalf("x0 received %d log entries over a plain port", x.Raft().LastIndex())
	}
	// Leadership may have moved during those seconds on a loaded machine.
	l = c.WaitLeader(waitLong)
	v, _ := c.Configuration(l.ID())
	if err := l.AddReplica("n2", c.Replica("n2").RaftAddress, 5*time.Second); err != nil {
		t.Fatalf("adding a voter again: %v", err)
	}
	if v2, _ := c.Configuration(l.ID()); !slices.Equal(v, v2) {
		t.Fatalf("adding a present voter changed the voters: %v -> %v", v, v2)
	}
}
