package cluster_test

import (
	"strings"
	"testing"

	"github.com/hashicorp/raft"

	"github.com/grapnel-io/grapnel/cluster/clustertest"
	"github.com/grapnel-io/grapnel/internal/syncbuf"
	"github.com/grapnel-io/grapnel/internal/testwait"
)

// While a follower is off, the leader's heartbeat to it fails again and
// again (about every 0.4 s at the default timing); the log says so once,
// in slog's format with component=raft, until the window of
// internal/logbridge ends (30 s), not once per try.
func TestFailedHeartbeatsLoggedOnce(t *testing.T) {
	var buf syncbuf.Buffer
	c := clustertest.New(t, 3, clustertest.WithLog(&buf, "warn"))
	leader := c.WaitLeader(waitLong)
	failed := make(chan raft.Observation, 64)
	obs := raft.NewObserver(failed, false, func(o *raft.Observation) bool {
		_, ok := o.Data.(raft.FailedHeartbeatObservation)
		return ok
	})
	leader.Raft().RegisterObserver(obs)
	defer leader.Raft().DeregisterObserver(obs)
	var off string
	for _, f := range c.Followers() {
		off = f.ID()
	}
	offAddr := c.Node(off).RaftAddress()
	c.Stop(off)
	tries := 0
	testwait.For(t, waitLong, func() bool {
		for {
			select {
			case <-failed:
				tries++
			default:
				return tries >= 8
			}
		}
	}, "eight failed heartbeats to the stopped follower")
	var lines []string
	for _, l := range strings.Split(buf.String(), "\n") {
		if strings.Contains(l, `msg="failed to heartbeat to"`) && strings.Contains(l, offAddr) {
			lines = append(lines, l)
		}
	}
	if len(lines) != 1 {
		t.Fatalf("%d failed heartbeats to %s logged %d times, want once:\n%s", tries, off, len(lines), strings.Join(lines, "\n"))
	}
	if !strings.Contains(lines[0], "level=ERROR") || !strings.Contains(lines[0], "component=raft") || !strings.Contains(lines[0], "replica="+leader.ID()) {
		t.Fatalf("not in slog's format with component and replica: %s", lines[0])
	}
}
