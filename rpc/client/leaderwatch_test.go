package client

import (
	"context"
	"net"
	"testing"
	"time"
)

// stretchRetry makes every wait of find between two rounds last an hour,
// so that only a replica's Watch can end it, and reports each wait on the
// returned channel.
func stretchRetry(r *Resolver) <-chan struct{} {
	waiting := make(chan struct{}, 16)
	r.retryDelay = func() time.Duration {
		select {
		case waiting <- struct{}{}:
		default:
		}
		return time.Hour
	}
	return waiting
}

type leaderResult struct {
	addr string
	err  error
}

func leaderAsync(r *Resolver) <-chan leaderResult {
	ch := make(chan leaderResult, 1)
	go func() {
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		addr, err := r.Leader(ctx)
		ch <- leaderResult{addr, err}
	}()
	return ch
}

func expectLeader(t *testing.T, ch <-chan leaderResult, want string) {
	t.Helper()
	select {
	case res := <-ch:
		if res.err != nil || res.addr != want {
			t.Fatalf("Leader = %s, %v; want %s", res.addr, res.err, want)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("the resolver waited out its backoff: no watch woke it")
	}
}

func waitFor(t *testing.T, what string, ch <-chan struct{}) {
	t.Helper()
	select {
	case <-ch:
	case <-time.After(10 * time.Second):
		t.Fatalf("no %s", what)
	}
}

// While the replicas elect a leader (at power-on, after a failover), a
// resolver that found none learns the new leader from the replicas'
// Watch as soon as it is elected, not at its next round of asking.
func TestFindLearnsAnElectedLeaderFromTheWatch(t *testing.T) {
	fc := newFakeCluster(t, 3)
	r := newResolver(t, opts(fc.rep("r1").addr))
	waiting := stretchRetry(r)
	got := leaderAsync(r)
	waitFor(t, "round without a leader", waiting)

	fc.setLeader("r2")
	expectLeader(t, got, fc.rep("r2").addr)
	if r.LeaderID() != "r2" {
		t.Fatalf("LeaderID = %q", r.LeaderID())
	}
}

// A replica that is not up yet when the resolver starts looking (agents
// that start before the replicas) is watched from the moment its port
// answers: the resolver learns the leader it names without waiting out
// its backoff.
func TestFindWatchesAReplicaThatComesUpLater(t *testing.T) {
	addr := closedAddr(t)
	r := newResolver(t, opts(addr))
	waiting := stretchRetry(r)
	got := leaderAsync(r)
	waitFor(t, "round with the replica down", waiting)

	lis, err := net.Listen("tcp", addr)
	if err != nil {
		t.Skipf("the port of the replica was taken meanwhile: %v", err)
	}
	fc := newFakeClusterOn(t, lis)
	fc.setLeader("r1")
	expectLeader(t, got, addr)
}

// A replica whose Watch says it leads itself is taken at once, as its
// answer to a poll would be: the resolver does not ask around once more,
// which cost a CLI started with its replica a round trip. A leader that
// another replica names is asked for (TestFindPrefersASelfClaimOverAStaleName),
// so the cluster here is the lone replica a CLI is started with: with
// others, a follower's Watch naming r1 may come first and rightly make
// the resolver ask again.
func TestFindTakesASelfNamedLeaderFromTheWatchWithoutAskingAgain(t *testing.T) {
	fc := newFakeCluster(t, 1)
	r1 := fc.rep("r1")
	r := newResolver(t, opts(r1.addr))
	waiting := stretchRetry(r)
	got := leaderAsync(r)
	waitFor(t, "round without a leader", waiting)
	asked := r1.statusCalls.Load()

	fc.setLeader("r1")
	expectLeader(t, got, r1.addr)
	if r.LeaderID() != "r1" {
		t.Fatalf("LeaderID = %q", r.LeaderID())
	}
	if n := r1.statusCalls.Load() - asked; n != 0 {
		t.Fatalf("the resolver asked r1 %d more times after its Watch said it leads", n)
	}
}

// A replica that named itself and then says it no longer leads is not
// taken; one that names another leader does not unset it.
func TestLeaderWatchForgetsASelfClaimThatEnded(t *testing.T) {
	w := &leaderWatch{}
	w.sawSelf("a:1", "r1", true)
	w.sawSelf("b:1", "r1", false) // a follower naming r1
	if addr, id := w.leader(); addr != "a:1" || id != "r1" {
		t.Fatalf("leader %s (%s), want r1 at a:1", addr, id)
	}
	w.sawSelf("a:1", "", false) // r1 stepped down
	if addr, _ := w.leader(); addr != "" {
		t.Fatalf("leader %s after it stepped down", addr)
	}
}
