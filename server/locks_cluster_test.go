package server_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"

	"github.com/grapnel-io/grapnel/cluster/clustertest"
	"github.com/grapnel-io/grapnel/internal/clock"
	"github.com/grapnel-io/grapnel/internal/errs"
	"github.com/grapnel-io/grapnel/internal/testwait"
	"github.com/grapnel-io/grapnel/rpc"
	"github.com/grapnel-io/grapnel/rpc/ankbase"
	"github.com/grapnel-io/grapnel/rpc/grapnelpb"
	"github.com/grapnel-io/grapnel/rpc/wire"
	"github.com/grapnel-io/grapnel/server/testcluster"
	"github.com/grapnel-io/grapnel/state"
)

func clusterCtx(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	t.Cleanup(cancel)
	return ctx
}

func asOwner(t *testing.T, owner string) context.Context {
	return wire.WithOwner(clusterCtx(t), owner)
}

func dialPlain(t *testing.T, addr string) *grpc.ClientConn {
	t.Helper()
	cc, err := grpc.NewClient(addr, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cc.Close() })
	return cc
}

// Requirement (issue 16, point 5): a lock taken through a follower is
// the declared owner's, and is replicated with the leader's expiry: after the leader is killed, the new leader shows the
// same owner and expiry, refuses another owner, and lets the update
// through once its clock passes the expiry (no loss, no extension).
func TestLocksSurviveFailover(t *testing.T) {
	fake := clock.NewFake(time.Unix(1_700_000_000, 0))
	c := testcluster.NewWithClock(t, 3, fake, clustertest.InMemory())
	leader := c.WaitServing(20 * time.Second)
	// The lock is taken through a follower, which forwards the call with
	// the owner the client declared.
	follower := ""
	for _, id := range c.IDs() {
		if id != leader {
			follower = id
			break
		}
	}
	lc := grapnelpb.NewLocksClient(dialPlain(t, c.Addr(follower)))
	if _, err := lc.Lock(asOwner(t, "alice"), &grapnelpb.LockRequest{Objects: []string{"workload/web", "config/cfg"}, TtlMs: 3_600_000, Reason: "maintenance"}); err != nil {
		t.Fatal(err)
	}
	before, err := lc.List(clusterCtx(t), &grapnelpb.ListLocksRequest{})
	if err != nil || len(before.GetLocks()) != 2 {
		t.Fatalf("locks %v %v", before, err)
	}
	// Every replica holds the locks before the leader goes.
	for _, id := range c.IDs() {
		testwait.For(t, 10*time.Second, func() bool {
			n := 0
			c.Replica(id).FSM.Read(func(s *state.Store, _ uint64) { n = len(s.Locks) })
			return n == 2
		}, "locks replicated to %s", id)
	}
	c.Stop(leader)
	next := c.WaitServing(30*time.Second, leader)
	lc2 := grapnelpb.NewLocksClient(dialPlain(t, c.Addr(next)))
	after, err := lc2.List(clusterCtx(t), &grapnelpb.ListLocksRequest{})
	if err != nil {
		t.Fatal(err)
	}
	for i, l := range after.GetLocks() {
		b := before.GetLocks()[i]
		if l.GetObject() != b.GetObject() || l.GetOwner() != "alice" || l.GetExpiresMs() != b.GetExpiresMs() || l.GetReason() != "maintenance" {
			t.Fatalf("after the failover %v, before %v", after.GetLocks(), before.GetLocks())
		}
	}
	pc := grapnelpb.NewPlanClient(dialPlain(t, c.Addr(next)))
	cs, err := rpc.CompleteStateFromTree(state.Tree{"desiredState": map[string]any{"configs": map[string]any{"cfg": "v2"}}})
	if err != nil {
		t.Fatal(err)
	}
	update := &ankbase.UpdateStateRequest{NewState: cs, UpdateMask: []string{"desiredState.configs.cfg"}}
	bobApplies := func() error {
		rev, err := pc.Revision(clusterCtx(t), &grapnelpb.RevisionRequest{})
		if err != nil {
			return err
		}
		r := rev.GetRevision()
		_, err = pc.Apply(asOwner(t, "bob"), &grapnelpb.ApplyRequest{Update: update, ExpectedRevision: &r})
		return err
	}
	if err := bobApplies(); !errors.Is(rpc.FromStatus(err), errs.ErrLocked) || !strings.Contains(err.Error(), "config/cfg is locked by alice") {
		t.Fatalf("bob on the new leader: %v", err)
	}
	fake.Advance(time.Hour)
	if err := bobApplies(); err != nil {
		t.Fatalf("bob after the expiry: %v", err)
	}
}
