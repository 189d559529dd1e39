package server

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/grapnel-io/grapnel/internal/clock"
	"github.com/grapnel-io/grapnel/rpc/grapnelpb"
	"github.com/grapnel-io/grapnel/rpc/wire"
	"github.com/grapnel-io/grapnel/state"
)

// Requirement (issue 30, point 2, D2): an update made through the Plan
// service (--expect-seq, --expect-revision) is a transaction like one
// made through the stream, with the leader's time, the requester and
// the update mask; the first one of a fresh cluster is kept (with no
// time it was older than --history-max-age and pruned by the next
// record); and the refusals on that path are recorded.
func TestPlanServiceUpdatesReachTheHistory(t *testing.T) {
	fake := clock.NewFake(time.Unix(1_700_000_000, 0))
	ts := startServerCfg(t, t.TempDir(), nil, func(c *Config) { c.Clock = fake })
	pc := planClient(t, ts.addr)
	ctx := wire.WithOwner(callCtx(t), "alice@vm")

	if _, err := pc.Apply(ctx, &grapnelpb.ApplyRequest{Update: oneWorkload(t, "cache", "redis"), ExpectedSeq: 0}); err != nil {
		t.Fatal(err)
	}
	fake.Advance(time.Second)
	if _, err := pc.Apply(ctx, &grapnelpb.ApplyRequest{Update: oneWorkload(t, "web", "nginx"), ExpectedRevision: ptr(uint64(1))}); err != nil {
		t.Fatal(err)
	}
	txs := txsOf(ts)
	if len(txs) != 2 {
		t.Fatalf("history after two applied updates: %d transactions: %+v", len(txs), txs)
	}
	start := time.Unix(1_700_000_000, 0).UnixMilli()
	for i, want := range []struct {
		name   string
		timeMs int64
	}{{"cache", start}, {"web", start + 1000}} {
		tx := txs[i]
		if tx.Kind != state.TxUpdate || tx.TimeMs != want.timeMs || tx.Requester != "alice@vm/"+planCallName ||
			len(tx.UpdateMask) != 1 || tx.UpdateMask[0] != "desiredState.workloads."+want.name ||
			len(tx.Workloads) != 1 || tx.Workloads[0].Name != want.name || tx.Workloads[0].Op != state.OpAdded {
			t.Fatalf("transaction %d: %+v", i+1, tx)
		}
	}

	// A later record with the leader's time does not prune the first as
	// older than --history-max-age (it had no time, so it was).
	fake.Advance(time.Second)
	if r := ts.cli().update(manifest(t, nginx), "desiredState.workloads.nginx"); r.GetUpdateStateSuccess() == nil {
		t.Fatalf("update: %v", r)
	}
	if txs := txsOf(ts); len(txs) != 3 || txs[0].Seq != 1 {
		t.Fatalf("history after a stream update: %s", dumpTxs(txs))
	}

	// Refused: a stale --plan-revision, a revision conflict.
	if _, err := pc.Apply(ctx, &grapnelpb.ApplyRequest{Update: oneWorkload(t, "cache", "redis:2"), ExpectedSeq: 0}); err == nil {
		t.Fatal("an apply at a stale seq was accepted")
	}
	// After a quiet spell, so that this refusal too is written at once
	// (rejections.go).
	fake.Advance(rejectionFlushDelay)
	if _, err := pc.Apply(ctx, &grapnelpb.ApplyRequest{Update: oneWorkload(t, "web", "nginx:2"), ExpectedRevision: ptr(uint64(1))}); err == nil {
		t.Fatal("an apply past a revision conflict was accepted")
	}
	// Each was answered once the history held it.
	if len(txsOf(ts)) != 5 {
		t.Fatalf("the two refusals are not in the history: %s", dumpTxs(txsOf(ts)))
	}
	for i, reason := range []string{"the desired state is at", "web"} {
		tx := txsOf(ts)[3+i]
		if tx.Kind != state.TxRejected || tx.Requester != "alice@vm/"+planCallName || !strings.Contains(tx.Reason, reason) ||
			len(tx.UpdateMask) != 1 || tx.TimeMs == 0 {
			t.Fatalf("refusal %d: %+v", i+1, tx)
		}
	}
}

// Without a declared owner or a certificate the requester is the Plan
// service alone; a certificate's identity is tested with the locks
// (lockOwner), which planRequester takes as it is.
func TestPlanRequester(t *testing.T) {
	for owner, want := range map[string]string{
		"":               planCallName,
		"operator/alice": "operator/alice/" + planCallName,
		"bad\xffutf8":    "bad\uFFFDutf8/" + planCallName,
	} {
		if got := planRequester(owner); got != want {
			t.Errorf("planRequester(%q) = %q, want %q", owner, got, want)
		}
	}
	if got := planRequester(strings.Repeat("x", 1000)); len(got) > maxLockOwnerBytes+len("…/"+planCallName) {
		t.Errorf("a long owner is not cut: %d bytes", len(got))
	}
}

func dumpTxs(txs []*state.Tx) string {
	var b strings.Builder
	for _, tx := range txs {
		fmt.Fprintf(&b, "%+v\n", *tx)
	}
	return b.String()
}
