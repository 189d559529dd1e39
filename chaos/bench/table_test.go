package bench

import (
	"strings"
	"testing"
	"time"
)

func TestThroughputTable(t *testing.T) {
	g := &Summary{System: "grapnel", Clients: 16, OpsPerSec: 3000, P50: 4 * time.Millisecond, P99: 12500 * time.Microsecond}
	e := &Summary{System: "etcd", Clients: 16, OpsPerSec: 2000, P50: 5 * time.Millisecond, P99: 150 * time.Millisecond, Errors: 2, FirstError: "deadline"}
	out := ThroughputTable([]ThroughputRow{
		{Clients: 16, Grapnel: g, Etcd: e, Elections: 2},
		{Clients: 64, Grapnel: &Summary{System: "grapnel", Clients: 64, OpsPerSec: 10}},
	})
	lines := strings.Split(strings.TrimRight(out, "\n"), "\n")
	if len(lines) != 5 {
		t.Fatalf("want header, two rows and two notes, got:\n%s", out)
	}
	tests := []struct {
		line int
		want []string
	}{
		{0, []string{"clients", "grapnel ops/s", "etcd ops/s", "ratio"}},
		{1, []string{"16", "3000", "4.00ms", "12.5ms", "2000", "5.00ms", "150ms", "1.50"}},
		{2, []string{"64", "10", "-"}},
		{3, []string{"grapnel, 16 clients: the Raft term moved by 2 during the run"}},
		{4, []string{"etcd, 16 clients: 2 failed operations (first: deadline)"}},
	}
	for _, tt := range tests {
		for _, w := range tt.want {
			if !strings.Contains(lines[tt.line], w) {
				t.Fatalf("line %d %q lacks %q; table:\n%s", tt.line, lines[tt.line], w, out)
			}
		}
	}
	if f := strings.Fields(lines[2]); f[len(f)-1] != "-" {
		t.Fatalf("a row without etcd must have no ratio: %q", lines[2])
	}
}

func TestFailoverTable(t *testing.T) {
	kills := FailoverResult{
		Outage:   []time.Duration{300 * time.Millisecond, 100 * time.Millisecond, 200 * time.Millisecond},
		Election: []time.Duration{250 * time.Millisecond, 50 * time.Millisecond, 150 * time.Millisecond},
		Rejoin:   []time.Duration{2 * time.Second, time.Second, 3 * time.Second},
		Acks:     500, Errors: 7,
	}
	freezes := FailoverResult{
		Fault:    Freeze,
		Outage:   []time.Duration{1500 * time.Millisecond, 900 * time.Millisecond},
		Election: []time.Duration{800 * time.Millisecond, 1200 * time.Millisecond},
		Rejoin:   []time.Duration{400 * time.Millisecond, 100 * time.Millisecond},
		Acks:     300, Errors: 2,
	}
	out := FailoverTable(kills, freezes)
	lines := strings.Split(strings.TrimRight(out, "\n"), "\n")
	if len(lines) != 9 {
		t.Fatalf("want header, three rows per result and a writer line per result, got:\n%s", out)
	}
	tests := []struct {
		line int
		want string
	}{
		{1, "kill -> next acknowledged update 3 200ms 300ms 300ms"},
		{2, "kill -> new leader (Status poll) 3 150ms 250ms 250ms"},
		{3, "restart -> healthy and caught up 3 2.00s 3.00s 3.00s"},
		{4, "freeze -> next acknowledged update 2 900ms 1.50s 1.50s"},
		{5, "freeze -> new leader (Status poll) 2 800ms 1.20s 1.20s"},
		{6, "thaw -> healthy and caught up 2 100ms 400ms 400ms"},
		{7, "writer across the kills: 500 updates acknowledged, 7 failed"},
		{8, "writer across the freezes: 300 updates acknowledged, 2 failed"},
	}
	for _, tt := range tests {
		if got := strings.Join(strings.Fields(lines[tt.line]), " "); got != tt.want {
			t.Fatalf("line %d = %q, want %q; table:\n%s", tt.line, got, tt.want, out)
		}
	}
	if kills.Outage[0] != 300*time.Millisecond || freezes.Outage[0] != 1500*time.Millisecond {
		t.Fatal("FailoverTable sorted its input in place")
	}
}

func TestFailoverSecurityTablePairsTheFaults(t *testing.T) {
	ms := func(n ...int) []time.Duration {
		var d []time.Duration
		for _, v := range n {
			d = append(d, time.Duration(v)*time.Millisecond)
		}
		return d
	}
	plain := []FailoverResult{
		{Fault: Kill, Outage: ms(100), Election: ms(50), Rejoin: ms(400)},
		{Fault: Freeze, Outage: ms(900), Election: ms(800), Rejoin: ms(300)},
	}
	// The secured run lists the freezes first and has one more fault:
	// rows pair by fault, not by position.
	secured := []FailoverResult{
		{Fault: Freeze, Outage: ms(1100), Election: ms(1000), Rejoin: ms(200)},
		{Fault: Kill, Outage: ms(120), Election: ms(60), Rejoin: ms(500)},
	}
	out := FailoverSecurityTable(plain, secured)
	lines := strings.Split(strings.TrimRight(out, "\n"), "\n")
	want := []string{
		"plain p50 p99 max TLS p50 p99 max",
		"kill -> next acknowledged update 100ms 100ms 100ms 120ms 120ms 120ms",
		"kill -> new leader (Status poll) 50.0ms 50.0ms 50.0ms 60.0ms 60.0ms 60.0ms",
		"restart -> healthy and caught up 400ms 400ms 400ms 500ms 500ms 500ms",
		"freeze -> next acknowledged update 900ms 900ms 900ms 1.10s 1.10s 1.10s",
		"freeze -> new leader (Status poll) 800ms 800ms 800ms 1.00s 1.00s 1.00s",
		"thaw -> healthy and caught up 300ms 300ms 300ms 200ms 200ms 200ms",
	}
	if len(lines) != len(want) {
		t.Fatalf("got %d lines, want %d:\n%s", len(lines), len(want), out)
	}
	for i, w := range want {
		if got := strings.Join(strings.Fields(lines[i]), " "); got != w {
			t.Fatalf("line %d = %q, want %q; table:\n%s", i, got, w, out)
		}
	}
	if got := FailoverSecurityTable(plain[:1], secured[:1]); strings.Count(got, "\n") != 1 {
		t.Fatalf("a fault measured in one mode only must have no row:\n%s", got)
	}
}

func TestLogStoreTable(t *testing.T) {
	w := &Summary{Clients: 1, OpsPerSec: 400, P50: 2 * time.Millisecond, P99: 5 * time.Millisecond, DiskPerOp: 10 * 1024}
	o := &Summary{Clients: 1, OpsPerSec: 300, P50: 3 * time.Millisecond, P99: 8 * time.Millisecond, DiskPerOp: 400 * 1024}
	out := LogStoreTable([]LogStoreRow{{Clients: 1, WAL: w, Bolt: o}, {Clients: 16, WAL: w}})
	lines := strings.Split(strings.TrimRight(out, "\n"), "\n")
	if len(lines) != 3 {
		t.Fatalf("want header and two rows, got:\n%s", out)
	}
	for i, want := range [][]string{
		{"clients", "WAL ops/s", "bolt ops/s", "bolt/WAL ops", "bolt/WAL disk"},
		{"1", "400", "2.00ms", "10.0 KiB", "300", "8.00ms", "400.0 KiB", "0.75", "40.0"},
		{"16", "400", "-"},
	} {
		for _, s := range want {
			if !strings.Contains(lines[i], s) {
				t.Fatalf("line %d %q lacks %q; table:\n%s", i, lines[i], s, out)
			}
		}
	}
	if f := strings.Fields(lines[2]); f[len(f)-1] != "-" || f[len(f)-2] != "-" {
		t.Fatalf("a row without bolt must have no ratios: %q", lines[2])
	}
}
