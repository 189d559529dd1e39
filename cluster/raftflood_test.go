package cluster_test

import (
	"net"
	"strconv"
	"testing"
	"time"

	"github.com/grapnel-io/grapnel/cluster"
	"github.com/grapnel-io/grapnel/cluster/clustertest"
	"github.com/grapnel-io/grapnel/internal/connlimit"
	"github.com/grapnel-io/grapnel/internal/testwait"
	"github.com/grapnel-io/grapnel/rpc/rpctest"
)

// floodFrom opens n idle TCP connections to addr from the loopback
// address src and returns a channel that gets one value per connection
// the other side closes.
func floodFrom(t *testing.T, src, addr string, n int) <-chan struct{} {
	t.Helper()
	ended := make(chan struct{}, n)
	d := net.Dialer{LocalAddr: &net.TCPAddr{IP: net.ParseIP(src)}, Timeout: 5 * time.Second}
	for range n {
		c, err := d.Dial("tcp", addr)
		if err != nil {
			t.Fatalf("flood from %s: %v", src, err)
		}
		t.Cleanup(func() { c.Close() })
		go func() {
			_, _ = c.Read(make([]byte, 1))
			ended <- struct{}{}
		}()
	}
	return ended
}

// awaitEnds waits for n values of ended within bound.
func awaitEnds(t *testing.T, ended <-chan struct{}, n int, bound time.Duration, what string) {
	t.Helper()
	deadline := time.After(bound)
	for i := range n {
		select {
		case <-ended:
		case <-deadline:
			t.Fatalf("%s: %d of %d closed within %v", what, i, n, bound)
		}
	}
}

// Requirement (issue 27, hole 4): a follower's Raft port flooded with
// idle TCP connections that never start TLS holds at most its per-source
// cap of them, closes the others at once (well before the 5 s handshake
// deadline), closes the held ones at that deadline, and the leader keeps
// replicating to it through the flood.
func TestRaftPortFloodIsCapped(t *testing.T) {
	ca := rpctest.NewCA(t)
	lim := connlimit.Limits{PerSource: 6, Total: 24}
	c := clustertest.New(t, 3, clustertest.WithRaftTLS(replicaCerts(t, ca)),
		clustertest.WithConfig(func(cfg *cluster.Config) { cfg.RaftConnLimits = lim }))
	c.WaitLeader(waitLong)
	f := c.Followers()[0]
	ln := f.RaftListener()

	const flood = 150
	ended := floodFrom(t, "127.0.0.2", f.RaftAddress(), flood)
	// The connections over the cap are closed as they are accepted: all
	// of them well within the handshake deadline, which alone would
	// close them on the old code.
	awaitEnds(t, ended, flood-lim.PerSource, 3*time.Second, "connections over the per-source cap")
	if got := ln.Refused(connlimit.OverSource); got != uint64(flood-lim.PerSource) {
		t.Fatalf("refused over the per-source cap: %d, want %d", got, flood-lim.PerSource)
	}
	if open := ln.OpenFrom("127.0.0.2"); open != lim.PerSource {
		t.Fatalf("the flooded port holds %d connections of the flood, want the cap %d", open, lim.PerSource)
	}
	// Raft goes on: an entry commits and reaches the flooded follower.
	c.WaitApplied(applyAgents(t, c, "flood", 2))
	requireAgents(t, c, f.ID(), names("flood", 2)...)
	// The held ones end at the handshake deadline.
	awaitEnds(t, ended, lim.PerSource, 15*time.Second, "held connections that never started TLS")
	// The replica uncounts a connection just after closing it.
	testwait.For(t, 5*time.Second, func() bool { return ln.OpenFrom("127.0.0.2") == 0 },
		"the flood's connections uncounted once closed (%s still counted)", testwait.Lazy(func() string { return strconv.Itoa(ln.OpenFrom("127.0.0.2")) }))
	c.WaitApplied(applyAgents(t, c, "after", 1))
	requireAgents(t, c, f.ID(), names("after", 1)...)
}
