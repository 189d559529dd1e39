package cli

import (
	"context"
	"strings"
	"sync"
	"testing"
	"time"

	"google.golang.org/grpc"

	"github.com/grapnel-io/grapnel/internal/syncbuf"
	"github.com/grapnel-io/grapnel/rpc/grapnelpb"
)

// resyncFake is a leader whose history grows after a resync request: the
// agent's repairs show one poll after the request, as they would once
// its round reported.
type resyncFake struct {
	grapnelpb.ClusterClient
	mu        sync.Mutex
	txs       []*grapnelpb.Transaction
	later     []*grapnelpb.Transaction
	requested bool
	lists     int
}

func (f *resyncFake) ResyncAgent(context.Context, *grapnelpb.ResyncAgentRequest, ...grpc.CallOption) (*grapnelpb.ResyncAgentResponse, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.requested = true
	return &grapnelpb.ResyncAgentResponse{}, nil
}

type resyncHistory struct {
	grapnelpb.HistoryClient
	f *resyncFake
}

func (h resyncHistory) List(_ context.Context, in *grapnelpb.HistoryListRequest, _ ...grpc.CallOption) (*grapnelpb.HistoryListResponse, error) {
	f := h.f
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.requested {
		f.lists++
		if f.lists == 2 {
			f.txs = append(f.txs, f.later...)
		}
	}
	resp := &grapnelpb.HistoryListResponse{LastSeq: f.txs[len(f.txs)-1].GetSeq()}
	for _, tx := range f.txs {
		if tx.GetSeq() > in.GetSince() {
			resp.Transactions = append(resp.Transactions, tx)
		}
	}
	return resp, nil
}

// Requirement (issue 30 point 7): `agent resync NAME` waits and prints
// what the round repaired: the Repair transactions NAME recorded after
// the request, within the wait; none before it, none of another agent.
func TestResyncPrintsTheRoundsRepairs(t *testing.T) {
	f := &resyncFake{
		txs: []*grapnelpb.Transaction{
			{Seq: 1, Kind: "Update", Requester: "cli"},
			{Seq: 2, TimeMs: 1_700_000_000_000, Kind: "Repair", Requester: "a2", Reason: "old-repair"},
		},
		later: []*grapnelpb.Transaction{
			{Seq: 3, TimeMs: 1_700_000_001_000, Kind: "Repair", Requester: "a2", Reason: "drift: the process exited",
				Workloads: []*grapnelpb.TxWorkload{{Name: "db", Op: "States", States: []string{"Failed(Lost)"}}}},
			{Seq: 4, TimeMs: 1_700_000_001_000, Kind: "Repair", Requester: "a3", Reason: "other-agent"},
		},
	}
	out := &syncbuf.Buffer{}
	c := &Cluster{Client: f, Out: out, Quiet: true}
	if err := c.ResyncAgent(context.Background(), "a2", resyncHistory{f: f}, 600*time.Millisecond); err != nil {
		t.Fatal(err)
	}
	got := out.String()
	if !strings.Contains(got, "agent a2 recorded 1 repair(s)") || !strings.Contains(got, "drift: the process exited: db→Failed(Lost)") ||
		strings.Contains(got, "old-repair") || strings.Contains(got, "other-agent") {
		t.Fatalf("resync output:\n%s", got)
	}

	quiet := &resyncFake{txs: f.txs[:2]}
	out.Reset()
	c = &Cluster{Client: quiet, Out: out, Quiet: true}
	if err := c.ResyncAgent(context.Background(), "a2", resyncHistory{f: quiet}, 300*time.Millisecond); err != nil {
		t.Fatal(err)
	}
	if got := out.String(); !strings.Contains(got, "recorded no repair within 300ms") || !strings.Contains(got, "--since 2") {
		t.Fatalf("a round that repaired nothing:\n%s", got)
	}
	if err := c.ResyncAgent(context.Background(), "a.2", resyncHistory{f: quiet}, time.Second); err == nil || !strings.Contains(err.Error(), "agent name") {
		t.Fatalf("a bad name: %v", err)
	}
}
