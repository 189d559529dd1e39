package cluster_test

import (
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"testing"

	"github.com/grapnel-io/grapnel/cluster"
	"github.com/grapnel-io/grapnel/cluster/clustertest"
	"github.com/grapnel-io/grapnel/fsm"
)

// Two of three replicas are lost for good: the survivor alone has no
// quorum; a peers.json naming only it turns it into a one-voter cluster
// that keeps the state and commits again, and the file is applied once.
func TestPeersFile_RecoversLostQuorum(t *testing.T) {
	c := clustertest.New(t, 3)
	c.WaitLeader(waitLong)
	last := applyAgents(t, c, "kept", 5)
	c.WaitApplied(last)
	want := c.Content("n1")
	for _, id := range c.IDs() {
		c.Stop(id)
	}
	r := c.Replica("n1")
	peers := fmt.Sprintf(`[{"id": "n1", "address": %q, "non_voter": false}]`, r.RaftAddress)
	if err := os.WriteFile(filepath.Join(r.DataDir, cluster.PeersFile), []byte(peers), 0o600); err != nil {
		t.Fatal(err)
	}
	c.Restart("n1")
	c.WaitFor("n1 to lead alone", waitLong, func() bool { return c.Node("n1").IsLeader() })
	if voters, _ := c.Configuration("n1"); !slices.Equal(voters, []string{"n1"}) {
		t.Fatalf("configuration after recovery = %v, want [n1]", voters)
	}
	if err := c.Node("n1").Barrier(waitLong); err != nil {
		t.Fatal(err)
	}
	if got := c.Content("n1"); !bytes.Equal(got, want) {
		t.Fatal("the recovered replica lost state")
	}
	if _, _, err := c.Node("n1").Apply(agentCmd(t, "after-recovery"), waitLong); err != nil {
		t.Fatalf("no commit after recovery: %v", err)
	}
	if _, err := os.Stat(filepath.Join(r.DataDir, cluster.PeersFile+".applied")); err != nil {
		t.Fatalf("peers file not marked applied: %v", err)
	}
}

// A peers file that does not name the replica is refused with the reason.
func TestPeersFile_MustNameThisReplica(t *testing.T) {
	c := clustertest.New(t, 3)
	c.WaitLeader(waitLong)
	c.Stop("n1")
	r := c.Replica("n1")
	if err := os.WriteFile(filepath.Join(r.DataDir, cluster.PeersFile), []byte(`[{"id": "n9", "address": "127.0.0.1:1", "non_voter": false}]`), 0o600); err != nil {
		t.Fatal(err)
	}
	_, err := cluster.NewNode(cluster.Config{ID: "n1", DataDir: r.DataDir, RaftAddress: r.RaftAddress, FSM: fsm.New()})
	if err == nil || !bytes.Contains([]byte(err.Error()), []byte("does not list this replica")) {
		t.Fatalf("err = %v", err)
	}
}
