package client

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/grapnel-io/grapnel/internal/clock"
	"github.com/grapnel-io/grapnel/internal/errs"
	"github.com/grapnel-io/grapnel/internal/testwait"
	"github.com/grapnel-io/grapnel/rpc/grapnelpb"
	"github.com/grapnel-io/grapnel/rpc/wire"
)

func opts(addrs ...string) Options {
	return Options{Addrs: addrs, Insecure: true, ResponseTimeout: 5 * time.Second}
}

func newResolver(t *testing.T, o Options) *Resolver {
	t.Helper()
	r, err := NewResolver(o)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { r.Close() })
	return r
}

// Given only a follower, the client learns the replica set and the leader
// from its status and opens the CLI stream at the leader, as a
// leader-aware client.
func TestDialFindsTheLeaderThroughAFollower(t *testing.T) {
	fc := newFakeCluster(t, 3)
	fc.setLeader("r2")
	r1, r2 := fc.rep("r1"), fc.rep("r2")

	r := newResolver(t, opts(r1.addr))
	c, err := r.Dial(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if c.Addr() != r2.addr || c.stream.ReplicaID() != "r2" {
		t.Fatalf("connected to %s (%s), want r2 at %s", c.Addr(), c.stream.ReplicaID(), r2.addr)
	}
	a := r2.expectAccepted(t, "cli")
	if got := a.md.Get(wire.LeaderAwareKey); !slices.Equal(got, []string{"1"}) {
		t.Fatalf("%s = %v, want [1]", wire.LeaderAwareKey, got)
	}
	if by := servedBy(t, c); by != "r2" {
		t.Fatalf("served by %s", by)
	}
	want := []string{r1.addr, fc.rep("r2").addr, fc.rep("r3").addr}
	if got := r.Members(); !slices.Equal(got, want) {
		t.Fatalf("Members = %v, want %v", got, want)
	}
	if r.LeaderID() != "r2" {
		t.Fatalf("LeaderID = %q", r.LeaderID())
	}
}

// Right after a leader is cut off, a follower still names it while the old
// leader itself knows no leader: the client must not go to the old leader
// (it would wait there for its deadline) but to the replica that says it
// leads, even when the stale answer comes first.
func TestFindPrefersASelfClaimOverAStaleName(t *testing.T) {
	fc := newFakeCluster(t, 3)
	fc.setLeader("r3")
	r1, r2, r3 := fc.rep("r1"), fc.rep("r2"), fc.rep("r3")
	none, old := "-", "r1"
	r1.names.Store(&none) // the old leader stepped down
	r2.names.Store(&old)  // a follower that has not heard of r3 yet
	r3.statusDelay.Store(int64(100 * time.Millisecond))

	r := newResolver(t, opts(r1.addr, r2.addr, r3.addr))
	addr, err := r.Leader(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if addr != r3.addr || r.LeaderID() != "r3" {
		t.Fatalf("leader %s (%s), want r3 at %s", addr, r.LeaderID(), r3.addr)
	}

	// With nobody claiming yet, the stale name is not taken either.
	r3.names.Store(&none)
	r.Forget(r3.addr)
	ctx, cancel := context.WithTimeout(context.Background(), 300*time.Millisecond)
	defer cancel()
	if addr, err := r.Leader(ctx); err == nil {
		t.Fatalf("took %s while only a stale name pointed at r1, which said it does not lead", addr)
	}
}

// A replica with a stale view names itself leader, but its stream answers
// with a NotLeaderError: the client goes to the leader named there at
// once, without backing off.
func TestOpenFollowsNotLeaderAtOnce(t *testing.T) {
	fc := newFakeCluster(t, 3)
	fc.setLeader("r3")
	stale := fc.rep("r1")
	stale.claimsLead.Store(true)

	r := newResolver(t, opts(stale.addr))
	start := time.Now()
	s, err := r.Open(context.Background(), wire.KindAgent)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	if s.Addr() != fc.rep("r3").addr || s.ReplicaID() != "r3" {
		t.Fatalf("opened at %s (%s), want r3", s.Addr(), s.ReplicaID())
	}
	fc.rep("r3").expectAccepted(t, "agent")
	// A redirect costs one round trip, not a backoff step.
	if n := stale.statusCalls.Load(); n != 1 {
		t.Fatalf("asked the stale replica %d times, want once", n)
	}
	t.Logf("redirected in %v", time.Since(start))
}

// While no replica knows a leader the client retries with backoff until
// the response timeout; once a leader appears it connects.
func TestDialBacksOffWhileNoLeader(t *testing.T) {
	t.Run("leader appears", func(t *testing.T) {
		fc := newFakeCluster(t, 2)
		time.AfterFunc(300*time.Millisecond, func() { fc.setLeader("r2") })
		c, err := Dial(context.Background(), opts(fc.rep("r1").addr))
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		if by := servedBy(t, c); by != "r2" {
			t.Fatalf("served by %s", by)
		}
		if n := fc.rep("r1").statusCalls.Load(); n < 2 {
			t.Fatalf("asked %d times, want retries", n)
		}
	})
	t.Run("no leader at all", func(t *testing.T) {
		fc := newFakeCluster(t, 2)
		const bound = 600 * time.Millisecond
		start := time.Now()
		_, err := Dial(context.Background(), Options{Addrs: []string{fc.rep("r1").addr}, Insecure: true, ResponseTimeout: bound})
		elapsed := time.Since(start)
		if !errors.Is(err, ErrNoServer) || !errors.Is(err, errs.ErrNoLeader) {
			t.Fatalf("err = %v, want ErrNoServer and errs.ErrNoLeader", err)
		}
		for _, r := range fc.reps {
			if !strings.Contains(err.Error(), r.addr) {
				t.Errorf("%v does not name %s (learned from r1)", err, r.addr)
			}
		}
		if elapsed < bound {
			t.Errorf("gave up after %v, before the response timeout %v", elapsed, bound)
		}
		// Backoff, not a busy loop: the delays double from 50 ms, so the
		// round count grows with the logarithm of the bound.
		if n := fc.rep("r1").statusCalls.Load(); n > 10 {
			t.Errorf("asked %d times within %v: no backoff", n, bound)
		}
	})
	t.Run("caller cancels", func(t *testing.T) {
		fc := newFakeCluster(t, 1)
		ctx, cancel := context.WithTimeout(context.Background(), 200*time.Millisecond)
		defer cancel()
		if _, err := Dial(ctx, opts(fc.rep("r1").addr)); !errors.Is(err, context.DeadlineExceeded) {
			t.Fatalf("err = %v, want the caller's deadline", err)
		}
	})
}

// A Watch event naming another leader ends the stream at once with
// ErrLeaderMoved, and the resolver already knows where to go.
func TestLeaderChangeEndsTheStream(t *testing.T) {
	fc := newFakeCluster(t, 3)
	fc.setLeader("r2")
	r := newResolver(t, opts(fc.rep("r1").addr))
	c, err := r.Dial(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	fc.rep("r2").expectAccepted(t, "cli")

	fc.setLeader("r3")
	select {
	case <-c.Done():
	case <-time.After(5 * time.Second):
		t.Fatal("the stream survived the leader change")
	}
	if err := c.Err(); !errors.Is(err, ErrConnectionLost) || !errors.Is(err, ErrLeaderMoved) || !strings.Contains(err.Error(), "r3") {
		t.Fatalf("Err = %v, want ErrConnectionLost and ErrLeaderMoved naming r3", err)
	}
	calls := fc.rep("r1").statusCalls.Load() + fc.rep("r2").statusCalls.Load() + fc.rep("r3").statusCalls.Load()
	addr, err := r.Leader(context.Background())
	if err != nil || addr != fc.rep("r3").addr {
		t.Fatalf("Leader = %s, %v; want r3", addr, err)
	}
	c2, err := r.Dial(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	defer c2.Close()
	if by := servedBy(t, c2); by != "r3" {
		t.Fatalf("reconnected to %s", by)
	}
	if after := fc.rep("r1").statusCalls.Load() + fc.rep("r2").statusCalls.Load() + fc.rep("r3").statusCalls.Load(); after != calls {
		t.Fatalf("reconnecting asked around (%d status calls); the watch had told the leader", after-calls)
	}
}

// A replica that stops answering while its TCP connection stays open is
// declared dead after the heartbeat timeout.
func TestHeartbeatDetectsADeadPeer(t *testing.T) {
	const timeout = 300 * time.Millisecond
	fc := newFakeCluster(t, 1)
	fc.setLeader("r1")
	fz := newFreezer(t, fc.rep("r1").addr)
	o := Options{Addrs: []string{fz.Addr()}, Insecure: true, ResponseTimeout: 5 * time.Second,
		HeartbeatTimeout: timeout, HeartbeatInterval: 50 * time.Millisecond}
	r := newResolver(t, o)
	c, err := r.Dial(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if c.Addr() != fz.Addr() {
		t.Fatalf("connected to %s, want the replica through %s", c.Addr(), fz.Addr())
	}
	// Healthy: several timeouts pass and the stream stays.
	select {
	case <-c.Done():
		t.Fatalf("a healthy stream ended: %v", c.Err())
	case <-time.After(4 * timeout):
	}

	fz.Freeze()
	start := time.Now()
	select {
	case <-c.Done():
	case <-time.After(10 * timeout):
		t.Fatal("the dead peer was not noticed")
	}
	elapsed := time.Since(start)
	if err := c.Err(); !errors.Is(err, ErrConnectionLost) || !errors.Is(err, ErrHeartbeatLost) {
		t.Fatalf("Err = %v, want ErrConnectionLost and ErrHeartbeatLost", err)
	}
	if _, err := c.Request(context.Background(), completeStateReq()); !errors.Is(err, ErrHeartbeatLost) {
		t.Fatalf("request after the death: %v", err)
	}
	if r.LeaderID() != "" {
		t.Fatalf("the resolver still follows %q", r.LeaderID())
	}
	t.Logf("dead peer noticed after %v (timeout %v)", elapsed, timeout)
}

// The heartbeat timeout runs on Options.Timers: with a fake clock, a
// frozen peer is declared dead when the clock passes the timeout, however
// long it has been silent in real time.
func TestHeartbeatRunsOnTheTimersClock(t *testing.T) {
	const timeout = time.Minute
	fc := newFakeCluster(t, 1)
	fc.setLeader("r1")
	fz := newFreezer(t, fc.rep("r1").addr)
	fake := clock.NewFake(time.Unix(1000, 0))
	o := Options{Addrs: []string{fz.Addr()}, Insecure: true, ResponseTimeout: 5 * time.Second,
		HeartbeatTimeout: timeout, HeartbeatInterval: 50 * time.Millisecond, Timers: fake}
	r := newResolver(t, o)
	c, err := r.Dial(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	fz.Freeze()
	ended := func() bool {
		select {
		case <-c.Done():
			return true
		default:
			return false
		}
	}
	// Many heartbeat intervals of real time: the fake clock has not moved.
	testwait.Holds(t, 500*time.Millisecond, func() bool { return !ended() },
		"the stream open before the clock passed the timeout (%v)", testwait.Lazy(func() string { return fmt.Sprint(c.Err()) }))
	fake.Advance(timeout)
	testwait.For(t, 10*time.Second, ended, "the stream to end once the clock passed the heartbeat timeout")
	if err := c.Err(); !errors.Is(err, ErrConnectionLost) || !errors.Is(err, ErrHeartbeatLost) {
		t.Fatalf("Err = %v, want ErrConnectionLost and ErrHeartbeatLost", err)
	}
}

// The heartbeat can be turned off; then only the stream itself tells.
func TestHeartbeatOff(t *testing.T) {
	fc := newFakeCluster(t, 1)
	fc.setLeader("r1")
	fc.rep("r1").silent.Store(true)
	o := opts(fc.rep("r1").addr)
	o.HeartbeatTimeout = -1
	c, err := Dial(context.Background(), o)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	select {
	case <-c.Done():
		t.Fatalf("stream ended without a heartbeat to miss: %v", c.Err())
	case <-time.After(1500 * time.Millisecond):
	}
}

func TestDialCluster(t *testing.T) {
	fc := newFakeCluster(t, 3)
	fc.setLeader("r2")
	cl, addr, closeFn, err := DialCluster(context.Background(), opts(fc.rep("r1").addr))
	if err != nil {
		t.Fatal(err)
	}
	defer closeFn()
	if addr != fc.rep("r2").addr {
		t.Fatalf("DialCluster chose %s, want r2", addr)
	}
	// Leadership moves after the dial: the call meets a NotLeaderError at
	// r2 and goes on to r3.
	fc.setLeader("r3")
	if _, err := cl.RemoveReplica(context.Background(), &grapnelpb.RemoveReplicaRequest{Id: "r1"}); err != nil {
		t.Fatal(err)
	}
	select {
	case id := <-fc.rep("r3").removed:
		if id != "r1" {
			t.Fatalf("removed %q", id)
		}
	default:
		t.Fatal("r3 did not get the call")
	}
	st, err := cl.Status(context.Background(), &grapnelpb.StatusRequest{})
	if err != nil || st.GetReplicaId() != "r3" {
		t.Fatalf("Status from %q, %v; want the leader r3", st.GetReplicaId(), err)
	}
}

func TestDialClusterRefusesAnUpstreamServer(t *testing.T) {
	addr := serve(t, &stub{handle: answerer(1)})
	for name, dial := range map[string]func(context.Context, Options) (grapnelpb.ClusterClient, string, func() error, error){
		"DialCluster": DialCluster, "DialReplica": DialReplica,
	} {
		if _, _, _, err := dial(context.Background(), opts(addr)); !errors.Is(err, ErrRejected) || !strings.Contains(err.Error(), "cluster service") {
			t.Errorf("%s: err = %v, want ErrRejected about the cluster service", name, err)
		}
	}
}

// DialReplica answers without a leader: the operator's view of a cluster
// that lost its quorum.
func TestDialReplicaWithoutLeader(t *testing.T) {
	fc := newFakeCluster(t, 2)
	down := closedAddr(t)
	cl, addr, closeFn, err := DialReplica(context.Background(), opts(down, fc.rep("r2").addr))
	if err != nil {
		t.Fatal(err)
	}
	defer closeFn()
	if addr != fc.rep("r2").addr {
		t.Fatalf("addr = %s", addr)
	}
	st, err := cl.Status(context.Background(), &grapnelpb.StatusRequest{})
	if err != nil || st.GetLeaderId() != "" || len(st.GetMembers()) != 2 {
		t.Fatalf("status = %v, %v", st, err)
	}
	if _, _, _, err := DialReplica(context.Background(), opts(down)); !errors.Is(err, ErrNoServer) || !strings.Contains(err.Error(), down) {
		t.Fatalf("all down: %v", err)
	}
}

// During an election window the wait stays short; after it, it grows.
func TestBackoffDelays(t *testing.T) {
	clk := clock.NewFake(time.Unix(1000, 0))
	b := leaderBackoff{clock: clk}
	next := backoffMin
	for i := range 12 {
		if i == 6 {
			clk.Advance(electionWindow)
		}
		want := next
		if i < 6 {
			want = min(next, electionCap)
		}
		d := b.delay()
		if d < want/2 || d > want {
			t.Fatalf("delay %d = %v, want within [%v, %v]", i, d, want/2, want)
		}
		next = min(2*next, backoffMax)
	}
}
