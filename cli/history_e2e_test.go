package cli

import (
	"context"
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/grapnel-io/grapnel/internal/syncbuf"
	"github.com/grapnel-io/grapnel/internal/testwait"
	"github.com/grapnel-io/grapnel/rpc/client"
)

// Requirement (issue 15, point 3): `history`, `history show TXN` and
// `get timeline NAME` against a real server: the transactions of a run
// and a delete, the diff of one, and the workload's changes merged with
// its execution-state transitions.
func TestHistoryVerbsEndToEnd(t *testing.T) {
	addr := startServer(t)
	s, _ := e2eSession(t, addr)
	ctx := context.Background()
	startAgentConnected(t, s, addr, "agent_A")
	s.NoWait = true
	if err := s.RunWorkload(ctx, RunSpec{Name: "web", Agent: "agent_A", Runtime: "podman", RuntimeConfig: "image: nginx"}); err != nil {
		t.Fatal(err)
	}
	hc, _, closeFn, err := client.DialHistory(ctx, client.Options{Addrs: []string{addr}, Insecure: true})
	if err != nil {
		t.Fatal(err)
	}
	defer closeFn()
	h := &History{Client: hc, Location: time.UTC}
	capture := func(f func() error) string {
		t.Helper()
		out := &syncbuf.Buffer{}
		h.Out = out
		if err := f(); err != nil {
			t.Fatal(err)
		}
		return out.String()
	}
	// The agent reports Pending(Starting) and Running(Ok); wait for them
	// in the timeline.
	testwait.For(t, 10*time.Second, func() bool {
		return strings.Contains(capture(func() error { return h.Timeline(ctx, "web", "table") }), "Running(Ok)")
	}, "the transitions of web in its timeline")
	if err := s.DeleteWorkloads(ctx, []string{"web"}); err != nil {
		t.Fatal(err)
	}

	table := capture(func() error { return h.List(ctx, 0, "", "table") })
	lines := strings.Split(strings.TrimSpace(table), "\n")
	if len(lines) != 3 || !strings.HasPrefix(lines[0], "TXN") || !strings.Contains(lines[1], "+web") || !strings.Contains(lines[2], "-web") ||
		!strings.Contains(lines[1], "Update") || !strings.Contains(lines[1], "cli-conn-") {
		t.Fatalf("history table:\n%s", table)
	}
	var list struct {
		Transactions []struct {
			Seq       uint64 `json:"txn"`
			Kind      string `json:"kind"`
			Workloads []struct {
				Name, Op, Instance string
			} `json:"workloads"`
		} `json:"transactions"`
	}
	js := capture(func() error { return h.List(ctx, 1, "web", "json") })
	if err := json.Unmarshal([]byte(js), &list); err != nil || len(list.Transactions) != 1 || list.Transactions[0].Seq != 2 ||
		list.Transactions[0].Workloads[0].Op != "Deleted" {
		t.Fatalf("history --since 1 --workload web -o json (%v):\n%s", err, js)
	}
	show := capture(func() error { return h.Show(ctx, "1", "table") })
	for _, want := range []string{"transaction 1 (Update)", "requester:   cli-conn-", "workload web: Added", "+ instance web.", "runtimeConfig:", "+ image: nginx"} {
		if !strings.Contains(show, want) {
			t.Fatalf("history show 1 lacks %q:\n%s", want, show)
		}
	}
	if y := capture(func() error { return h.Show(ctx, "1", "yaml") }); !strings.Contains(y, "kind: Update") || !strings.Contains(y, "field: runtimeConfig") {
		t.Fatalf("history show 1 -o yaml:\n%s", y)
	}
	if err := h.Show(ctx, "99", "table"); err == nil || !strings.Contains(err.Error(), "no such transaction") {
		t.Fatalf("show 99: %v", err)
	}
	if err := h.Show(ctx, "x", "table"); err == nil || !strings.Contains(err.Error(), "TXN") {
		t.Fatalf("show x: %v", err)
	}
	tl := capture(func() error { return h.Timeline(ctx, "web", "table") })
	order := []string{"Added", "Pending(Starting)", "Running(Ok)", "Deleted"}
	at := 0
	for _, line := range strings.Split(tl, "\n") {
		if at < len(order) && strings.Contains(line, order[at]) {
			at++
		}
	}
	if at != len(order) || !strings.Contains(tl, "agent_A") {
		t.Fatalf("timeline of web, want %v in order:\n%s", order, tl)
	}
}
