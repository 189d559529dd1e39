package server_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/grapnel-io/grapnel/cluster/clustertest"
	"github.com/grapnel-io/grapnel/fsm"
	"github.com/grapnel-io/grapnel/rpc/client"
	"github.com/grapnel-io/grapnel/rpc/grapnelpb"
	"github.com/grapnel-io/grapnel/server/testcluster"
	"github.com/grapnel-io/grapnel/state"
)

// updatesOf is the Seq and first workload of every Update transaction a
// replica's FSM holds.
func updatesOf(f *fsm.FSM) []string {
	var out []string
	f.Read(func(st *state.Store, _ uint64) {
		for _, tx := range st.History.Txs {
			if tx.Kind == state.TxUpdate && len(tx.Workloads) > 0 {
				out = append(out, fmt.Sprintf("%d:%s:%s", tx.Seq, tx.Workloads[0].Name, tx.Workloads[0].Op))
			}
		}
	})
	return out
}

// Requirement (issue 15, points 1 and 6): the transaction history is
// replicated: it survives the loss of the leader and a restart of the
// whole cluster (from a snapshot plus the log after it), the same on
// every replica.
func TestHistorySurvivesFailoverAndClusterRestart(t *testing.T) {
	c := testcluster.New(t, 3)
	old := c.WaitServing(20 * time.Second)
	conn := dial(t, c.Addrs()...)
	for i := range 5 {
		if _, err := conn.Request(context.Background(), addWorkload(fmt.Sprintf("h%d", i))); err != nil {
			t.Fatalf("update %d: %v", i, err)
		}
	}
	before := updatesOf(c.FSM(old))
	if len(before) != 5 || before[0] != "1:h0:Added" || before[4] != "5:h4:Added" {
		t.Fatalf("history on the leader: %v", before)
	}
	var requester string
	c.FSM(old).Read(func(st *state.Store, _ uint64) { requester = st.History.Txs[0].Requester })
	if requester == "" {
		t.Fatal("the transaction names no requester")
	}

	c.Stop(old)
	next := c.WaitServing(20*time.Second, old)
	if got := updatesOf(c.FSM(next)); fmt.Sprint(got) != fmt.Sprint(before) {
		t.Fatalf("history on the new leader %s: %v, want %v", next, got, before)
	}
	conn2 := dial(t, c.Addrs()...)
	if _, err := conn2.Request(context.Background(), addWorkload("after")); err != nil {
		t.Fatalf("update after the failover: %v", err)
	}
	// The timeline served by the new leader holds the change the old
	// leader committed.
	hc, _, closeFn, err := client.DialHistory(context.Background(), client.Options{Addrs: c.Addrs(), Insecure: true})
	if err != nil {
		t.Fatal(err)
	}
	tl, err := hc.Timeline(context.Background(), &grapnelpb.TimelineRequest{Workload: "h0"})
	closeFn()
	if err != nil || len(tl.GetEvents()) != 1 || tl.GetEvents()[0].GetOp() != "Added" || tl.GetEvents()[0].GetAgent() != "agent_A" || tl.GetReplicaId() != next {
		t.Fatalf("timeline of h0 from %s after the failover: %v %v", next, tl, err)
	}
	want := fmt.Sprint(append(before, "6:after:Added"))
	if got := fmt.Sprint(updatesOf(c.FSM(next))); got != want {
		t.Fatalf("after the failover: %v, want %v", got, want)
	}

	// Whole-cluster restart: the survivors snapshot (compacting the
	// log), everyone stops, everyone starts again on the same dirs.
	c.Restart(old)
	c.WaitFor("the old leader to catch up", 20*time.Second, func() bool { return fmt.Sprint(updatesOf(c.FSM(old))) == want })
	for _, id := range c.IDs() {
		if err := c.Node(id).Raft().Snapshot().Error(); err != nil {
			t.Fatalf("snapshot on %s: %v", id, err)
		}
	}
	ids := c.IDs()
	for _, id := range ids {
		c.Stop(id)
	}
	c.RestartAll(ids...)
	leader := c.WaitServing(30 * time.Second)
	for _, id := range ids {
		c.WaitFor("the history on "+id, 20*time.Second, func() bool { return fmt.Sprint(updatesOf(c.FSM(id))) == want })
	}
	conn3 := dial(t, c.Addrs()...)
	if _, err := conn3.Request(context.Background(), addWorkload("restarted")); err != nil {
		t.Fatalf("update after the restart: %v", err)
	}
	if got := updatesOf(c.FSM(leader)); len(got) != 7 || got[6] != "7:restarted:Added" {
		t.Fatalf("numbering after the restart: %v", got)
	}
}

// Without a quorum there is no leader, but the history is still there to
// read: the CLI's History connection falls back to a surviving replica.
func TestHistoryReadableWithoutLeader(t *testing.T) {
	c := testcluster.New(t, 3, clustertest.InMemory())
	leader := c.WaitServing(20 * time.Second)
	conn := dial(t, c.Addrs()...)
	if _, err := conn.Request(context.Background(), addWorkload("before-outage")); err != nil {
		t.Fatal(err)
	}
	// A commit needs only a majority: wait until every replica has it.
	for _, id := range c.IDs() {
		c.WaitFor("the update on "+id, 20*time.Second, func() bool { return len(updatesOf(c.FSM(id))) == 1 })
	}
	var survivor string
	for _, id := range c.IDs() {
		if id != leader && survivor == "" {
			survivor = id
			continue
		}
		c.Stop(id)
	}
	hc, addr, closeFn, err := client.DialHistory(context.Background(), client.Options{Addrs: c.Addrs(), Insecure: true, ResponseTimeout: 3 * time.Second})
	if err != nil {
		t.Fatalf("no history without a leader: %v", err)
	}
	defer closeFn()
	resp, err := hc.List(context.Background(), &grapnelpb.HistoryListRequest{})
	if err != nil || addr != c.Addr(survivor) || resp.GetReplicaId() != survivor || len(resp.GetTransactions()) != 1 ||
		resp.GetTransactions()[0].GetWorkloads()[0].GetName() != "before-outage" {
		t.Fatalf("history from %s: %v %v", addr, resp, err)
	}
}
