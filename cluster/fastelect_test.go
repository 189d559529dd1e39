package cluster_test

import (
	"testing"
	"time"

	"github.com/grapnel-io/grapnel/cluster"
	"github.com/grapnel-io/grapnel/cluster/clustertest"
	"github.com/grapnel-io/grapnel/fsm"
)

// A replica that is the only voter elects itself at once, on a fresh data
// directory and on one with state: with a 30 s heartbeat timeout it could
// not lead within the bound otherwise. The configured timing is back in
// place afterwards.
func TestSingleVoterElectsAtOnce(t *testing.T) {
	dir := t.TempDir()
	addr, err := clustertest.FreeAddr()
	if err != nil {
		t.Fatal(err)
	}
	timing := cluster.Timing{HeartbeatTimeout: 30 * time.Second, ElectionTimeout: 30 * time.Second,
		LeaderLeaseTimeout: 50 * time.Millisecond, CommitTimeout: 5 * time.Millisecond}
	for _, run := range []string{"empty data dir", "existing data"} {
		n, err := cluster.NewNode(cluster.Config{ID: "solo", DataDir: dir, RaftAddress: addr, FSM: fsm.New(),
			BootstrapSelf: true, Timing: timing})
		if err != nil {
			t.Fatal(err)
		}
		deadline := time.Now().Add(10 * time.Second)
		for !n.IsLeader() {
			if time.Now().After(deadline) {
				n.Shutdown()
				t.Fatalf("%s: no leader within 10 s although the replica is the only voter", run)
			}
			time.Sleep(2 * time.Millisecond)
		}
		if got := n.Stats()["heartbeat_timeout"]; got != "" && got != timing.HeartbeatTimeout.String() {
			t.Errorf("%s: heartbeat timeout %s after the early election", run, got)
		}
		if err := n.Shutdown(); err != nil {
			t.Fatal(err)
		}
	}
}
