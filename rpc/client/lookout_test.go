package client

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/grapnel-io/grapnel/internal/testwait"
)

// A leader that froze (power lost, its TCP connections silent) is left
// for the next one as soon as a follower names it, long before the
// heartbeat timeout: the lookout watches a follower.
func TestLookoutFollowsTheNextLeaderOfAFrozenOne(t *testing.T) {
	const heartbeatTimeout = 30 * time.Second
	fc := newFakeCluster(t, 3)
	fc.setLeader("r1")
	fz := newFreezer(t, fc.rep("r1").addr)
	o := Options{Addrs: []string{fz.Addr(), fc.rep("r2").addr, fc.rep("r3").addr}, Insecure: true,
		ResponseTimeout: 5 * time.Second, Lookout: true, HeartbeatTimeout: heartbeatTimeout}
	r := newResolver(t, o)
	c, err := r.Dial(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if c.Addr() != fz.Addr() {
		t.Fatalf("connected to %s, want r1 through %s", c.Addr(), fz.Addr())
	}

	// Followers repeating what they said before end nothing.
	fc.touch()
	select {
	case <-c.Done():
		t.Fatalf("the stream ended on a repeat: %v", c.Err())
	case <-time.After(500 * time.Millisecond):
	}

	fz.Freeze()
	start := time.Now()
	fc.setLeader("r2")
	select {
	case <-c.Done():
	case <-time.After(heartbeatTimeout / 3):
		t.Fatal("the stream stayed at the frozen leader")
	}
	if err := c.Err(); !errors.Is(err, ErrConnectionLost) || !errors.Is(err, ErrLeaderMoved) || !strings.Contains(err.Error(), "r2") {
		t.Fatalf("Err = %v, want ErrLeaderMoved naming r2", err)
	}
	if addr, err := r.Leader(context.Background()); err != nil || addr != fc.rep("r2").addr {
		t.Fatalf("Leader = %s, %v; want r2 at %s", addr, err, fc.rep("r2").addr)
	}
	t.Logf("left the frozen leader %v after the election", time.Since(start))
}

// A single replica known under two addresses (a configured name beside
// the address it announces) is found to be the stream's own replica once;
// the lookout then has nobody to watch and stays quiet, instead of
// watching the leader again every 100 ms.
func TestLookoutSkipsTheLeaderUnderAnotherAddress(t *testing.T) {
	fc := newFakeCluster(t, 1)
	fc.setLeader("r1")
	rep := fc.rep("r1")
	alias := newFreezer(t, rep.addr)
	o := Options{Addrs: []string{rep.addr, alias.Addr()}, Insecure: true, ResponseTimeout: 5 * time.Second, Lookout: true}
	r := newResolver(t, o)
	c, err := r.Dial(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	// The stream's heartbeat watch and the lookout's one watch.
	testwait.For(t, 10*time.Second, func() bool { return rep.watchCalls.Load() >= 2 },
		"the lookout to watch the alias (%v watches)", testwait.Lazy(func() string { return fmt.Sprint(rep.watchCalls.Load()) }))
	// Looping, the lookout would open one every 100 ms; hold 1.5 s.
	at := rep.watchCalls.Load()
	testwait.Holds(t, 1500*time.Millisecond, func() bool { return rep.watchCalls.Load() == at }, "no more watches at the leader")
	if c.Err() != nil {
		t.Fatalf("the stream ended: %v", c.Err())
	}
}

// Without a lookout a stream keeps the old heartbeat; with one, the
// leader is asked for a slower one, and the probe timeout stays short.
func TestLookoutHeartbeatDefaults(t *testing.T) {
	plain, look := Options{}, Options{Lookout: true}
	if plain.heartbeatInterval() != DefaultHeartbeatInterval || plain.heartbeatTimeout() != DefaultHeartbeatTimeout {
		t.Fatalf("plain: %v/%v", plain.heartbeatInterval(), plain.heartbeatTimeout())
	}
	if look.heartbeatInterval() != LookoutHeartbeatInterval || look.heartbeatTimeout() != LookoutHeartbeatTimeout {
		t.Fatalf("lookout: %v/%v", look.heartbeatInterval(), look.heartbeatTimeout())
	}
	if look.probeTimeout() != plain.probeTimeout() {
		t.Fatalf("the lookout stretched the probe timeout: %v vs %v", look.probeTimeout(), plain.probeTimeout())
	}
	explicit := Options{Lookout: true, HeartbeatInterval: time.Second / 2, HeartbeatTimeout: 2 * time.Second}
	if explicit.heartbeatInterval() != time.Second/2 || explicit.heartbeatTimeout() != 2*time.Second {
		t.Fatalf("explicit: %v/%v", explicit.heartbeatInterval(), explicit.heartbeatTimeout())
	}
}
