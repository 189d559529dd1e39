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

// entriesOf counts every command the FSM applies from now on.
func entriesOf(ts *testServer) func() int64 {
	count := countEntries(ts)
	return func() int64 {
		var n int64
		for typ := range 256 {
			n += count(fsm.MessageType(typ))
		}
		return n
	}
}

// Requirement (issue 15, point 1; issue 30, point 9): rejected requests
// are recorded with the reason, without changing the state and without
// a Raft entry each: equal ones are conflated and ride along in the next
// entry, and each is answered only once an entry holding it committed.
func TestRejectionsRideAlongWithoutEntriesOfTheirOwn(t *testing.T) {
	fake := clock.NewFake(time.Unix(1_700_000_000, 0))
	ts := startServerCfg(t, t.TempDir(), nil, func(c *Config) { c.Clock = fake })
	cli := ts.cli()
	entries := entriesOf(ts)
	// A lone refusal after a quiet spell is written at once.
	if r := cli.update(manifest(t, badAPIVersion), "desiredState"); r.GetError() == nil {
		t.Fatalf("a bad apiVersion was accepted: %v", r)
	}
	if got := entries(); got != 1 {
		t.Fatalf("a lone refusal took %d entries, want 1", got)
	}
	// 50 more within its flush window wait, unanswered, for an entry.
	ids := make([]string, 50)
	for i := range ids {
		ids[i] = cli.updateAsync(manifest(t, badAPIVersion), "desiredState")
	}
	cli.get() // the loop took the 50 before it
	if got := entries(); got != 1 {
		t.Fatalf("50 rejected requests wrote %d commands", got-1)
	}
	if r := cli.answer(ids[0], 0); r != nil {
		t.Fatalf("a refusal was answered before the history held it: %v", r)
	}
	if r := ts.cli().update(manifest(t, nginx), "desiredState.workloads.nginx"); r.GetUpdateStateSuccess() == nil {
		t.Fatalf("update: %v", r)
	}
	for _, id := range ids {
		if r := cli.answer(id, 5*time.Second); !strings.Contains(r.GetError().GetMessage(), "v9") {
			t.Fatalf("the answer to %s: %v", id, r)
		}
	}
	if got := entries(); got != 2 {
		t.Fatalf("the update and the rejections took %d commands, want 1", got-1)
	}
	txs := txsOf(ts)
	if len(txs) != 3 || txs[1].Kind != state.TxRejected || txs[1].Count != 50 || !strings.Contains(txs[1].Reason, "v9") ||
		!strings.HasPrefix(txs[1].Requester, "cli-conn-") || txs[1].TimeMs != fake.Now().UnixMilli() || txs[2].Kind != state.TxUpdate {
		t.Fatalf("history: %s", dumpTxs(txs))
	}
	// No entry follows: the flush writes them, once, when the window
	// since the last flush is over.
	for i := range ids[:3] {
		ids[i] = cli.updateAsync(manifest(t, badAPIVersion), "desiredState")
	}
	cli.get()
	if got := entries(); got != 2 {
		t.Fatal("rejections wrote an entry before the flush window was over")
	}
	fake.Advance(firstFlushWindow)
	for _, id := range ids[:3] {
		if r := cli.answer(id, 5*time.Second); r.GetError() == nil {
			t.Fatalf("the answer to %s: %v", id, r)
		}
	}
	if tx := txsOf(ts)[3]; tx.Kind != state.TxRejected || tx.Count != 3 {
		t.Fatalf("flushed: %+v", tx)
	}
	if entries() != 3 {
		t.Fatalf("the flush took %d commands, want 1", entries()-2)
	}
}

// Requirement (issue 30, point 9): a flood of refusals costs at most one
// entry per flush window, the window doubling while they keep coming
// (its answers wait for it), while a lone refusal after a quiet spell is
// answered without waiting on the clock at all.
func TestRefusalFloodCostsOneEntryPerWindow(t *testing.T) {
	fake := clock.NewFake(time.Unix(1_700_000_000, 0))
	ts := startServerCfg(t, t.TempDir(), nil, func(c *Config) { c.Clock = fake })
	cli := ts.cli()
	count := countEntries(ts)
	notes := func() int64 { return count(fsm.HistoryNotesType) }
	lone := func(what string) {
		t.Helper()
		before := notes()
		if r := cli.update(manifest(t, badAPIVersion), "desiredState"); r.GetError() == nil {
			t.Fatalf("%s: a bad apiVersion was accepted: %v", what, r)
		}
		if got := notes() - before; got != 1 {
			t.Fatalf("%s: a lone refusal took %d entries, want 1", what, got)
		}
	}
	lone("the first refusal")
	window := firstFlushWindow
	for round := range 9 {
		last := fake.Now()
		before := notes()
		ids := make([]string, 40)
		for i := range ids {
			ids[i] = cli.updateAsync(manifest(t, badAPIVersion), "desiredState")
		}
		cli.get() // the loop took the 40 before it
		if at, ok := fake.Next(); !ok || !at.Equal(last.Add(window)) {
			t.Fatalf("round %d: the flush is due at %v (%v), want the window %v after the last one", round, at.Sub(last), ok, window)
		}
		if r := cli.answer(ids[0], 0); r != nil || notes() != before {
			t.Fatalf("round %d: a refusal was answered, or written, within the window: %v", round, r)
		}
		fake.Advance(window)
		for _, id := range ids {
			if r := cli.answer(id, 5*time.Second); r.GetError() == nil {
				t.Fatalf("round %d: the answer to %s: %v", round, id, r)
			}
		}
		if got := notes() - before; got != 1 {
			t.Fatalf("round %d: 40 refusals within one window took %d entries, want 1", round, got)
		}
		txs := txsOf(ts)
		if tx := txs[len(txs)-1]; tx.Kind != state.TxRejected || tx.Count != 40 {
			t.Fatalf("round %d: the flushed record: %+v", round, tx)
		}
		window = min(2*window, rejectionFlushDelay)
	}
	if window != rejectionFlushDelay {
		t.Fatalf("the window grew to %v only", window)
	}
	// Quiet for rejectionFlushDelay: a lone refusal is written at once.
	fake.Advance(rejectionFlushDelay)
	lone("after a quiet spell")
}

// The answers waiting for a flush are bounded: beyond
// maxWaitingRefusals a refusal is answered busy at once, not told as a
// refusal (it is counted in the history all the same).
func TestRefusalsWaitingAreBounded(t *testing.T) {
	fake := clock.NewFake(time.Unix(1_700_000_000, 0))
	ts := startServerCfg(t, t.TempDir(), nil, func(c *Config) { c.Clock = fake })
	cli := ts.cli()
	cli.update(manifest(t, badAPIVersion), "desiredState") // written at once; the window starts
	ids := make([]string, maxWaitingRefusals+3)
	for i := range ids {
		ids[i] = cli.updateAsync(manifest(t, badAPIVersion), "desiredState")
	}
	for _, id := range ids[maxWaitingRefusals:] {
		if r := cli.answer(id, 5*time.Second); !strings.Contains(r.GetError().GetMessage(), "busy") {
			t.Fatalf("a refusal beyond the bound: %v", r)
		}
	}
	if r := cli.answer(ids[0], 0); r != nil {
		t.Fatalf("a refusal within the bound was answered before the flush: %v", r)
	}
	fake.Advance(firstFlushWindow)
	for _, id := range ids[:maxWaitingRefusals] {
		if r := cli.answer(id, 5*time.Second); !strings.Contains(r.GetError().GetMessage(), "v9") {
			t.Fatalf("the answer to %s: %v", id, r)
		}
	}
	txs := txsOf(ts)
	if tx := txs[len(txs)-1]; tx.Kind != state.TxRejected || int(tx.Count) != len(ids) {
		t.Fatalf("the flushed record: %+v", tx)
	}
}

// More distinct rejections than the leader keeps between two entries are
// counted in one record, so a flood costs bounded memory and bytes.
func TestRejectionsBeyondTheBoundAreCounted(t *testing.T) {
	fake := clock.NewFake(time.Unix(1_700_000_000, 0))
	ts := startServerCfg(t, t.TempDir(), nil, func(c *Config) { c.Clock = fake })
	// The first refusal is written at once; the others wait for the
	// window after it.
	ts.cli().update(manifest(t, badAPIVersion), "desiredState")
	type sent struct {
		c  *testConn
		id string
	}
	var all []sent
	for range maxPendingRejections + 5 {
		// Every CLI connection is a requester of its own.
		c := ts.cli()
		all = append(all, sent{c, c.updateAsync(manifest(t, badAPIVersion), "desiredState")})
		c.get() // collected
	}
	fake.Advance(firstFlushWindow)
	for _, s := range all {
		if r := s.c.answer(s.id, 5*time.Second); r.GetError() == nil {
			t.Fatalf("the answer: %v", r)
		}
	}
	txs := txsOf(ts)
	if len(txs) != maxPendingRejections+2 {
		t.Fatalf("history: %s", dumpTxs(txs))
	}
	last := txs[maxPendingRejections+1]
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
	var ids []string
	for _, prefix := range []string{"v", "vx"} {
		y := "apiVersion: " + prefix + strings.Repeat("é", 400) + "\nworkloads: {}\n"
		ids = append(ids, cli.updateAsync(manifest(t, y), "desiredState"))
	}
	if r := cli.update(manifest(t, nginx), "desiredState.workloads.nginx"); r.GetUpdateStateSuccess() == nil {
		t.Fatalf("the update the rejections rode along with: %v", r)
	}
	for _, id := range ids {
		if r := cli.answer(id, 5*time.Second); r.GetError() == nil {
			t.Fatalf("accepted: %v", r)
		}
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
