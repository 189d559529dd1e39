package server_test

import (
	"context"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"

	"github.com/grapnel-io/grapnel/cluster"
	"github.com/grapnel-io/grapnel/cluster/clustertest"
	"github.com/grapnel-io/grapnel/rpc/grapnelpb"
	"github.com/grapnel-io/grapnel/server/testcluster"
)

// Requirement (issue 29 point 3): `get problems` (Problems/List, asked of
// any replica) shows a StorageFailed problem naming the replica whose
// storage failed and the error; once that replica restarted on working
// storage the problem closes. The problem is the leader's finding from
// gossip, recorded through the replicated problems view.
func TestGetProblemsShowsStorageFailed(t *testing.T) {
	var (
		mu     sync.Mutex
		failed string
	)
	c := testcluster.New(t, 3, clustertest.WithConfig(func(cfg *cluster.Config) {
		id := cfg.ID
		cfg.StorageFault = func(string) error {
			mu.Lock()
			defer mu.Unlock()
			if id == failed {
				return syscall.ENOSPC
			}
			return nil
		}
	}))
	leader := c.WaitServing(20 * time.Second)
	var victim string
	for _, id := range c.IDs() {
		if id != leader {
			victim = id
			break
		}
	}
	mu.Lock()
	failed = victim
	mu.Unlock()
	conn := dial(t, c.Addrs()...)
	if _, err := conn.Request(context.Background(), putWorkload("app", "agent_A")); err != nil {
		t.Fatal(err)
	}

	cc, err := grpc.NewClient(c.Addr(victim), grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	defer cc.Close()
	// list is the StorageFailed problems, nil when List fails.
	list := func() []*grapnelpb.Problem {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		resp, err := grapnelpb.NewProblemsClient(cc).List(ctx, &grapnelpb.ProblemsListRequest{})
		if err != nil {
			t.Logf("List: %v", err)
			return nil
		}
		out := []*grapnelpb.Problem{}
		for _, p := range resp.GetProblems() {
			if p.GetKind() == "StorageFailed" {
				out = append(out, p)
			}
		}
		return out
	}
	var got []*grapnelpb.Problem
	c.WaitFor("a StorageFailed problem in get problems", 20*time.Second, func() bool {
		got = list()
		return len(got) == 1
	})
	p := got[0]
	if objs := p.GetObjects(); len(objs) != 1 || objs[0].GetKind() != "replica" || objs[0].GetName() != victim ||
		!strings.Contains(p.GetSummary(), "Replica "+victim) || !strings.Contains(p.GetSummary(), "no space left on device") ||
		!strings.Contains(p.GetDetail(), "no space left on device") || p.GetKey() != "StorageFailed/"+victim {
		t.Fatalf("problem %v, want one naming replica %s and ENOSPC", p, victim)
	}

	mu.Lock()
	failed = ""
	mu.Unlock()
	select {
	case <-c.Node(victim).StorageHealed():
	case <-time.After(20 * time.Second):
		t.Fatal("the probe never found the storage working again")
	}
	c.Stop(victim)
	c.Restart(victim)
	c.WaitFor("the StorageFailed problem closed", 20*time.Second, func() bool {
		got := list()
		return got != nil && len(got) == 0
	})
}
