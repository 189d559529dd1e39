package client

import (
	"net"
	"testing"
	"time"
)

// Issue 32 point 4: a CLI or an agent started at the same moment as its
// replica (both find the leader through Resolver) dials before the
// replica listens, and learns the leader within a few milliseconds of the
// replica coming up, not at gRPC's next redial 50 ms after the failed
// dial (rpc.Redial). Only the replica's Watch can end the resolver's wait
// here (stretchRetry). The best of three tries counts: a loaded machine
// delays some; the former redial could not make any within the bound.
func TestFindLearnsTheLeaderWithinMillisecondsOfTheReplicaComingUp(t *testing.T) {
	const bound = 25 * time.Millisecond
	best := time.Hour
	for range 3 {
		best = min(best, leaderAfterListen(t))
	}
	if best > bound {
		t.Fatalf("leader found %v after its replica came up (best of 3), want within %v", best, bound)
	}
}

func leaderAfterListen(t *testing.T) time.Duration {
	t.Helper()
	addr := closedAddr(t)
	r := newResolver(t, opts(addr))
	waiting := stretchRetry(r)
	got := leaderAsync(r)
	waitFor(t, "round with the replica down", waiting)
	lis, err := net.Listen("tcp", addr)
	if err != nil {
		t.Skipf("the port of the replica was taken meanwhile: %v", err)
	}
	up := time.Now()
	fc := newFakeClusterOn(t, lis)
	fc.setLeader("r1")
	expectLeader(t, got, addr)
	return time.Since(up)
}
