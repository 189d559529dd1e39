package server

import (
	"fmt"
	"strings"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/grapnel-io/grapnel/fsm"
	"github.com/grapnel-io/grapnel/internal/clock"
	"github.com/grapnel-io/grapnel/internal/testwait"
	"github.com/grapnel-io/grapnel/state"
)

const badAPIVersion = `
apiVersion: v9
workloads: {}
`

func txsOf(ts *testServer) []*state.Tx {
	var out []*state.Tx
	ts.store(func(s *state.Store) { out = append(out, s.History.Txs...) })
	return out
}

// Requirement (issue 15, point 1): rejected requests are recorded with
// the reason, without changing the state and without a Raft entry each:
// equal ones are conflated and ride along in the next entry; with no
// entry coming, one entry per flush delay takes them.
func TestRejectionsRideAlongWithoutEntriesOfTheirOwn(t *testing.T) {
	fake := clock.NewFake(time.Unix(1_700_000_000, 0))
	ts := startServerCfg(t, t.TempDir(), nil, func(c *Config) { c.Clock = fake })
	cli := ts.cli()
	count := countEntries(ts)
	entries := func() int64 {
		var n int64
		for typ := range 256 {
			n += count(fsm.MessageType(typ))
		}
		return n
	}
	for range 50 {
		if r := cli.update(manifest(t, badAPIVersion), "desiredState"); r.GetError() == nil {
			t.Fatalf("a bad apiVersion was accepted: %v", r)
		}
	}
	if got := entries(); got != 0 {
		t.Fatalf("50 rejected requests wrote %d commands", got)
	}
	if r := cli.update(manifest(t, nginx), "desiredState.workloads.nginx"); r.GetUpdateStateSuccess() == nil {
		t.Fatalf("update: %v", r)
	}
	if got := entries(); got != 1 {
		t.Fatalf("the update and the rejections took %d commands, want 1", got)
	}
	txs := txsOf(ts)
	if len(txs) != 2 || txs[0].Kind != state.TxRejected || txs[0].Count != 50 || !strings.Contains(txs[0].Reason, "v9") ||
		!strings.HasPrefix(txs[0].Requester, "cli-conn-") || txs[0].TimeMs != fake.Now().UnixMilli() || txs[1].Kind != state.TxUpdate {
		t.Fatalf("history: %+v %+v", txs[0], txs[len(txs)-1])
	}
	// No entry follows: the flush timer writes them, once.
	for range 3 {
		cli.update(manifest(t, badAPIVersion), "desiredState")
	}
	if got := entries(); got != 1 {
		t.Fatal("rejections wrote an entry before the flush delay")
	}
	fake.Advance(rejectionFlushDelay)
	testwait.For(t, 10*time.Second, func() bool { return len(txsOf(ts)) == 3 }, "the flushed rejections")
	if tx := txsOf(ts)[2]; tx.Kind != state.TxRejected || tx.Count != 3 {
		t.Fatalf("flushed: %+v", tx)
	}
	if got := count(fsm.HistoryNotesType); got != 1 || entries() != 2 {
		t.Fatalf("the flush took %d commands, want 1", entries()-1)
	}
	if fake.PendingFor(rejectionFlushDelay) != 0 {
		t.Fatal("a flush timer is left with nothing to flush")
	}
}

// More distinct rejections than the leader keeps between two entries are
// counted in one record, so a flood costs bounded memory and bytes.
func TestRejectionsBeyondTheBoundAreCounted(t *testing.T) {
	fake := clock.NewFake(time.Unix(1_700_000_000, 0))
	ts := startServerCfg(t, t.TempDir(), nil, func(c *Config) { c.Clock = fake })
	for range maxPendingRejections + 5 {
		// Every CLI connection is a requester of its own.
		c := ts.cli()
		c.update(manifest(t, badAPIVersion), "desiredState")
		c.close()
	}
	fake.Advance(rejectionFlushDelay)
	testwait.For(t, 10*time.Second, func() bool { return len(txsOf(ts)) == maxPendingRejections+1 }, "the flushed rejections")
	last := txsOf(ts)[maxPendingRejections]
	if last.Count != 5 || !strings.Contains(last.Reason, "not itemised") {
		t.Fatalf("the overflow record: %+v", last)
	}
}

// Requirement (issue 15, point 1): the history's bounds are settable and
// replicated: a leader whose limits differ from the stored ones writes
// them at the start of its term, and the FSM prunes by them.
func TestHistoryLimitsFromTheLeadersFlags(t *testing.T) {
	ts := startServerCfg(t, t.TempDir(), nil, func(c *Config) { c.HistoryLimits = state.HistoryLimits{MaxEntries: 5} })
	testwait.For(t, 10*time.Second, func() bool {
		var l state.HistoryLimits
		ts.store(func(s *state.Store) { l = s.History.Limits })
		return l.MaxEntries == 5 && l.MaxBytes == state.DefaultHistoryMaxBytes
	}, "the leader's limits in the FSM")
	cli := ts.cli()
	for i := range 12 {
		y := fmt.Sprintf("apiVersion: v1\nworkloads:\n  w%d:\n    runtime: podman\n    agent: agent_A\n    runtimeConfig: \"image: x\"\n", i)
		if r := cli.update(manifest(t, y), fmt.Sprintf("desiredState.workloads.w%d", i)); r.GetUpdateStateSuccess() == nil {
			t.Fatalf("update %d: %v", i, r)
		}
	}
	txs := txsOf(ts)
	if len(txs) != 5 || txs[0].Seq != 8 || txs[4].Seq != 12 || txs[4].Workloads[0].Name != "w11" {
		t.Fatalf("kept %d transactions, %d..%d", len(txs), txs[0].Seq, txs[len(txs)-1].Seq)
	}
}

// A long reason is cut where it splits no character: the entry it rides
// along in must still encode.
func TestRejectionReasonCutStaysUTF8(t *testing.T) {
	fake := clock.NewFake(time.Unix(1_700_000_000, 0))
	ts := startServerCfg(t, t.TempDir(), nil, func(c *Config) { c.Clock = fake })
	cli := ts.cli()
	// An unknown apiVersion is quoted in the reason; "é" is two bytes,
	// so with one of the two prefixes the cut lands inside one.
	for _, prefix := range []string{"v", "vx"} {
		y := "apiVersion: " + prefix + strings.Repeat("é", 400) + "\nworkloads: {}\n"
		if r := cli.update(manifest(t, y), "desiredState"); r.GetError() == nil {
			t.Fatalf("accepted: %v", r)
		}
	}
	if r := cli.update(manifest(t, nginx), "desiredState.workloads.nginx"); r.GetUpdateStateSuccess() == nil {
		t.Fatalf("the update the rejections rode along with: %v", r)
	}
	txs := txsOf(ts)
	if len(txs) != 3 || txs[2].Kind != state.TxUpdate {
		t.Fatalf("history: %+v", txs)
	}
	for _, tx := range txs[:2] {
		if tx.Kind != state.TxRejected || !utf8.ValidString(tx.Reason) || !strings.HasSuffix(tx.Reason, "…") {
			t.Fatalf("rejection: %+v", tx)
		}
	}
}
