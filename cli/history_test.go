package cli

import (
	"context"
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc"

	"github.com/grapnel-io/grapnel/internal/syncbuf"
	"github.com/grapnel-io/grapnel/rpc/grapnelpb"
)

// fakeHistory answers List with pages of one transaction each, so that
// the CLI's paging is exercised too.
type fakeHistory struct {
	grapnelpb.HistoryClient
	txs    []*grapnelpb.Transaction
	events map[string][]*grapnelpb.TimelineEvent
}

func (f *fakeHistory) List(_ context.Context, in *grapnelpb.HistoryListRequest, _ ...grpc.CallOption) (*grapnelpb.HistoryListResponse, error) {
	resp := &grapnelpb.HistoryListResponse{LastSeq: f.txs[len(f.txs)-1].GetSeq()}
	for _, tx := range f.txs {
		if tx.GetSeq() > in.GetSince() {
			resp.Transactions = []*grapnelpb.Transaction{tx}
			break
		}
	}
	return resp, nil
}

func (f *fakeHistory) Timeline(_ context.Context, in *grapnelpb.TimelineRequest, _ ...grpc.CallOption) (*grapnelpb.TimelineResponse, error) {
	return &grapnelpb.TimelineResponse{Events: f.events[in.GetWorkload()]}, nil
}

func (f *fakeHistory) Get(_ context.Context, in *grapnelpb.HistoryGetRequest, _ ...grpc.CallOption) (*grapnelpb.Transaction, error) {
	return f.txs[in.GetSeq()-1], nil
}

// Requirement (issue 15, point 3): the history table sums up each
// transaction, pages through the whole history, and -o yaml keeps the
// table's order of fields.
func TestHistoryOutput(t *testing.T) {
	fake := &fakeHistory{txs: []*grapnelpb.Transaction{
		{Seq: 1, Index: 3, TimeMs: 1_700_000_000_000, Kind: "Update", Requester: "operator-1/cli-conn-1",
			Workloads: []*grapnelpb.TxWorkload{{Name: "web", Op: "Added", Instance: "web.abc.agent_A"},
				{Name: "db", Op: "Updated", Changes: []*grapnelpb.TxFieldChange{{Field: "runtimeConfig", Old: "image: a", New: "image: b"}}}},
			Configs: []*grapnelpb.TxConfig{{Key: "cfg", Op: "Deleted"}}},
		{Seq: 2, Index: 4, TimeMs: 1_700_000_001_000, Kind: "Rejected", Requester: "cli-conn-2", Reason: "bad name", Count: 3},
		{Seq: 3, Index: 5, TimeMs: 1_700_000_002_000, Kind: "Decision", Requester: "server", Reason: "agent agent_A disconnected",
			Workloads: []*grapnelpb.TxWorkload{{Name: "web", Op: "States", Instance: "web.abc.agent_A", States: []string{"AgentDisconnected"}}}},
	}}
	out := &syncbuf.Buffer{}
	h := &History{Client: fake, Out: out, Location: time.UTC}
	if err := h.List(context.Background(), 0, "", "table"); err != nil {
		t.Fatal(err)
	}
	want := []string{
		"2023-11-14T22:13:20.000Z   Update     operator-1/cli-conn-1   +web ~db(runtimeConfig) config -cfg",
		"2023-11-14T22:13:21.000Z   Rejected   cli-conn-2              bad name (×3)",
		"2023-11-14T22:13:22.000Z   Decision   server                  agent agent_A disconnected: web→AgentDisconnected",
	}
	for _, w := range want {
		if !strings.Contains(out.String(), w) {
			t.Fatalf("table lacks %q:\n%s", w, out.String())
		}
	}
	out.Reset()
	if err := h.Show(context.Background(), "1", "yaml"); err != nil {
		t.Fatal(err)
	}
	y := out.String()
	if !strings.HasPrefix(y, "txn: 1\nindex: 3\n") || strings.Index(y, "name: db") > strings.Index(y, "field: runtimeConfig") {
		t.Fatalf("show -o yaml out of order:\n%s", y)
	}
	out.Reset()
	if err := h.Show(context.Background(), "1", "table"); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(out.String(), "  runtimeConfig:\n    - image: a\n    + image: b\n") {
		t.Fatalf("show diff:\n%s", out.String())
	}
	for _, bad := range []func() error{
		func() error { return h.List(context.Background(), 0, "", "xml") },
		func() error { return h.Show(context.Background(), "0", "table") },
		func() error { return h.Timeline(context.Background(), "a.b", "table") },
	} {
		if err := bad(); err == nil || !strings.Contains(err.Error(), "bad argument") {
			t.Fatalf("want a bad-argument error, got %v", err)
		}
	}
}

// Requirement (issue 30, point 8, D14): a reason with no changes after
// it (an AgentMode transaction) ends without a stray colon; one with
// changes introduces them with one.
func TestSummaryReasonWithoutChanges(t *testing.T) {
	mode := &grapnelpb.Transaction{Kind: "AgentMode", Reason: "agent a2: Active → Disabled"}
	if got := summary(mode); got != "agent a2: Active → Disabled" {
		t.Fatalf("AgentMode summary %q", got)
	}
	placed := &grapnelpb.Transaction{Kind: "Placement", Reason: "agent a3 gone",
		Workloads: []*grapnelpb.TxWorkload{{Name: "logger", Op: "Added"}}}
	if got := summary(placed); got != "agent a3 gone: +logger" {
		t.Fatalf("Placement summary %q", got)
	}
}

// Requirement (issue 30 point 7): history --since-time/--until-time
// keep the transactions the leader timed within the bounds, both
// included; a bound is an RFC 3339 time or a duration before now; a
// bad value or an empty window is refused with the flag named.
func TestHistoryTimeWindow(t *testing.T) {
	base := int64(1_700_000_000_000)
	fake := &fakeHistory{txs: []*grapnelpb.Transaction{
		{Seq: 1, Kind: "Update", Reason: "untimed"},
		{Seq: 2, TimeMs: base, Kind: "Rejected", Reason: "first"},
		{Seq: 3, TimeMs: base + 60_000, Kind: "Rejected", Reason: "second"},
		{Seq: 4, TimeMs: base + 120_000, Kind: "Rejected", Reason: "third"},
	}}
	now := time.UnixMilli(base + 180_000)
	from, err := ParseTimeBound("since-time", "2m", now)
	if err != nil || !from.Equal(time.UnixMilli(base+60_000)) {
		t.Fatalf("2m before now: %v %v", from, err)
	}
	until, err := ParseTimeBound("until-time", time.UnixMilli(base+60_000).UTC().Format(time.RFC3339), now)
	if err != nil {
		t.Fatal(err)
	}
	out := &syncbuf.Buffer{}
	h := &History{Client: fake, Out: out, Location: time.UTC, SinceTime: from, UntilTime: until}
	if err := h.List(context.Background(), 0, "", "table"); err != nil {
		t.Fatal(err)
	}
	if got := out.String(); !strings.Contains(got, "second") || strings.Contains(got, "first") ||
		strings.Contains(got, "third") || strings.Contains(got, "untimed") {
		t.Fatalf("window [1m, 1m] after base:\n%s", got)
	}
	out.Reset()
	h.UntilTime = time.Time{}
	if err := h.List(context.Background(), 0, "", "table"); err != nil {
		t.Fatal(err)
	}
	if got := out.String(); !strings.Contains(got, "second") || !strings.Contains(got, "third") || strings.Contains(got, "first") {
		t.Fatalf("since 2m ago:\n%s", got)
	}
	for _, v := range []string{"yesterday", "-5m", "2026-13-01T00:00:00Z"} {
		if _, err := ParseTimeBound("since-time", v, now); err == nil || !strings.Contains(err.Error(), "--since-time") {
			t.Fatalf("%q: want a bad-argument error naming the flag, got %v", v, err)
		}
	}
	h.SinceTime, h.UntilTime = time.UnixMilli(base+60_000), time.UnixMilli(base)
	if err := h.List(context.Background(), 0, "", "table"); err == nil || !strings.Contains(err.Error(), "--until-time") {
		t.Fatalf("an empty window: %v", err)
	}
}

// Requirement (issue 30 point 7): history show TXN lists the steps the
// transaction had executed, derived from the states recorded after it:
// each instance started or stopped, how long after the transaction it
// ended, and its error; a step not ended yet says so; states before the
// transaction's entry or of other instances do not count.
func TestHistoryShowSteps(t *testing.T) {
	const ms = 1_700_000_000_000
	web1, web2, db := "web.aaa.a1", "web.bbb.a1", "db.ccc.a2"
	fake := &fakeHistory{
		txs: []*grapnelpb.Transaction{{Seq: 1, Index: 10, TimeMs: ms, Kind: "Update", Workloads: []*grapnelpb.TxWorkload{
			{Name: "db", Op: "Added", Instance: db},
			{Name: "web", Op: "Updated", OldInstance: web1, Instance: web2, Changes: []*grapnelpb.TxFieldChange{{Field: "runtimeConfig"}}},
			{Name: "old", Op: "Deleted", OldInstance: "old.ddd.a2"},
		}}},
		events: map[string][]*grapnelpb.TimelineEvent{
			"db": {
				{Index: 9, TimeMs: ms - 5, Kind: "State", Instance: db, State: "Running(Ok)"},
				{Index: 11, TimeMs: ms + 100, Kind: "State", Instance: db, State: "Pending(Starting)"},
				{Index: 12, TimeMs: ms + 900, Kind: "State", Instance: db, State: "Failed(ExecFailed): 'exit code 3'"},
			},
			"web": {
				{Index: 10, Seq: 1, TimeMs: ms, Kind: "Update", Instance: web2},
				{Index: 11, TimeMs: ms + 200, Kind: "State", Instance: web1, State: "Stopping(WaitingToStop)"},
				{Index: 13, TimeMs: ms + 1500, Kind: "State", Instance: web1, State: "Removed"},
				{Index: 14, TimeMs: ms + 2500, Kind: "State", Instance: web2, State: "Running(Ok)"},
			},
		},
	}
	out := &syncbuf.Buffer{}
	h := &History{Client: fake, Out: out, Location: time.UTC}
	if err := h.Show(context.Background(), "1", "table"); err != nil {
		t.Fatal(err)
	}
	got := out.String()
	for _, want := range []string{
		"start   db         a2      ccc           Failed(ExecFailed): 'exit code 3'   900ms   Failed(ExecFailed): 'exit code 3'",
		"stop    web        a1      aaa           Removed                             1.5s",
		"start   web        a1      bbb           Running(Ok)                         2.5s",
		"stop    old        a2      ddd           (no state reported)",
	} {
		if !strings.Contains(got, want) {
			t.Fatalf("steps lack %q:\n%s", want, got)
		}
	}
	out.Reset()
	if err := h.Show(context.Background(), "1", "json"); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(out.String(), `"durationMs": 2500`) || !strings.Contains(out.String(), `"step": "stop"`) {
		t.Fatalf("show -o json steps:\n%s", out.String())
	}
}
