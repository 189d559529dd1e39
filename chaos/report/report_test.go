package report

import (
	"encoding/xml"
	"errors"
	"io"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/grapnel-io/grapnel/chaos/check"
)

// synthetic is a 10 s run: r1 leads in term 2, is killed at 3 s, nobody
// leads for 400 ms, then r2 leads in term 3; acks stop meanwhile; agent
// a1 detaches for a second, a2 stays attached. Second 3 has no ack, so
// availability is 9 of 10 buckets.
func synthetic() *Report {
	t0 := time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)
	r := &Report{Seed: 42, Start: t0, End: t0.Add(10 * time.Second)}
	for i := range 100 {
		at := t0.Add(time.Duration(i) * 100 * time.Millisecond)
		s := Sample{At: at, Leader: "r1", Term: 2, Acks: 3, Attached: []string{"a1", "a2"}}
		switch {
		case i >= 30 && i < 34:
			s = Sample{At: at, Attached: []string{"a2"}}
		case i >= 34:
			s.Leader, s.Term = "r2", 3
			if i < 40 {
				s.Attached = []string{"a2"}
			}
		}
		if i >= 30 && i < 45 {
			s.Acks = 0
		}
		r.Samples = append(r.Samples, s)
	}
	r.Faults = []Fault{
		{Kind: "leader-kill", Target: "r1", At: t0.Add(3 * time.Second), Detail: "kill -9 pid 123"},
		{Kind: "partition-minority", Target: "r3", At: t0.Add(6 * time.Second), Healed: t0.Add(8 * time.Second), Detail: "r3 | r1 r2"},
	}
	r.Figures = map[string]Figures{
		"leader-kill": {
			NewLeader:   Measure([]time.Duration{400 * time.Millisecond}),
			NextAck:     Measure([]time.Duration{1500 * time.Millisecond}),
			AllAttached: Measure([]time.Duration{time.Second}),
		},
	}
	r.Comparison = map[string]Figures{"leader-kill": {NewLeader: Measure([]time.Duration{2 * time.Second})}}
	r.Availability = Availability(r.Samples)
	r.Checks = []check.Result{
		{Name: "linearizable", OK: true, Detail: "2000 ops"},
		{Name: "no lost acks", OK: false, Detail: "write c1-7 | lost", Artifact: "history.json"},
	}
	r.Intrusions = []check.AttemptTally{{Channel: "forward", What: "SnapshotSave forwarding operator chaos", Tries: 4, Refused: 4},
		{Channel: "forward", What: "with a revoked key", Tries: 2, Refused: 1, Skipped: 1},
		{Channel: "locks", What: "Locks.Unlock", Tries: 2, Refused: 1, Accepted: 1},
		{Channel: "forward", What: "with a key removed at cluster version 0", Tries: 2, NotExpected: 2, NotExpectedRefused: 1, Why: "revocation waits"}}
	r.Skipped = []string{"upgrade: no previous release"}
	r.Faults = append(r.Faults,
		Fault{Kind: "power-cut", Target: "every host", At: t0.Add(9 * time.Second), Healed: t0.Add(9500 * time.Millisecond),
			Repaired: t0.Add(9800 * time.Millisecond), PowerCut: []MountLoss{
				{Mount: "h1", FilesDropped: 1, BytesDropped: 144, OpsUndone: 2, Torn: "r1/wal/1.wal at 4096: 76 of 144 bytes kept"},
				{Mount: "h2", Problems: []string{"could not undo create x"}}}},
		Fault{Kind: "disk-full", Target: "r2 (leader)", At: t0.Add(9900 * time.Millisecond), Detected: t0.Add(9950 * time.Millisecond)})
	r.FlashModel = "per-directory"
	r.Flash = map[string]FlashFigures{
		"disk-full": {N: 2, Detect: Measure([]time.Duration{200 * time.Millisecond}), Undetected: 1,
			Repair: Measure([]time.Duration{5 * time.Second, 6 * time.Second}), Writes: 200, Acked: 199, MinShare: 0.99,
			LongestGap: Measure([]time.Duration{700 * time.Millisecond}), Checked: 16},
		"power-cut": {N: 1, Repair: Measure([]time.Duration{300 * time.Millisecond}), Unrepaired: 0, Writes: 10, Acked: 5, MinShare: 0.5,
			LongestGap: Measure([]time.Duration{1200 * time.Millisecond}), Checked: 8, Lost: 1},
	}
	return r
}

func TestJSONRoundTrip(t *testing.T) {
	r := synthetic()
	path := filepath.Join(t.TempDir(), "report.json")
	if err := r.WriteJSON(path); err != nil {
		t.Fatal(err)
	}
	got, err := Load(path)
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(got, r) {
		t.Fatalf("round trip changed the report:\n got %+v\nwant %+v", got, r)
	}
	bad := filepath.Join(t.TempDir(), "bad.json")
	if err := os.WriteFile(bad, []byte("{"), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := Load(bad); !errors.Is(err, ErrBadReport) || !strings.Contains(err.Error(), bad) {
		t.Fatalf("Load of a broken file = %v, want ErrBadReport naming it", err)
	}
}

func TestMarkdown(t *testing.T) {
	r := synthetic()
	path := filepath.Join(t.TempDir(), "report.md")
	if err := r.WriteMarkdown(path); err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	md := string(b)
	for _, want := range []string{
		"# Chaos run FAILED",
		"seed: 42",
		"| leader-kill | 1 | 400 ms / 400 ms / 400 ms (n=1) | 1500 ms / 1500 ms / 1500 ms (n=1) | 1000 ms / 1000 ms / 1000 ms (n=1) |",
		"## Comparison",
		"2000 ms / 2000 ms / 2000 ms (n=1) | - | - |",
		"- pass linearizable: 2000 ops",
		`- **FAIL** no lost acks: write c1-7 \| lost (see ` + "`history.json`)",
		"| +3s | leader-kill | r1 | - | kill -9 pid 123 |",
		"| +6s | partition-minority | r3 | 2s | r3 \\| r1 r2 |",
		"availability (1 s buckets with an acknowledged write): 90.0%",
		"## Intruder",
		"| forward | SnapshotSave forwarding operator chaos | 4 | 4 refused |",
		"| forward | with a revoked key | 2 | 1 refused, 1 not tried (no such key yet) |",
		"| locks | Locks.Unlock | 2 | 1 refused, **1 ACCEPTED** |",
		"| forward | with a key removed at cluster version 0 | 2 | 2 not expected refused (revocation waits): 1 refused anyway |",
		"- fault kind skipped: upgrade: no previous release\n",
		"- flash: every host's data dirs and run folder on a flashfs mount, per-directory model\n",
		"## Flash faults",
		"| disk-full | 2 | 200 ms / 200 ms / 200 ms (n=1), **1 never** | 5000 ms / 6000 ms / 6000 ms (n=2) | 99.5% of 200 (99.0%) | 700 ms / 700 ms / 700 ms (n=1) | 0 of 16 |",
		"| power-cut | 1 | - | 300 ms / 300 ms / 300 ms (n=1) | 50.0% of 10 (50.0%) | 1200 ms / 1200 ms / 1200 ms (n=1) | **1 of 8** |",
		"## Power cuts",
		"| +9s | h1 | 144 | 1 | 2 | r1/wal/1.wal at 4096: 76 of 144 bytes kept | - |",
		"| +9s | h2 | 0 | 0 | 0 | - | **could not undo create x** |",
	} {
		if !strings.Contains(md, want) {
			t.Errorf("markdown lacks %q:\n%s", want, md)
		}
	}
}

func TestSVGLanes(t *testing.T) {
	r := synthetic()
	path := filepath.Join(t.TempDir(), "timeline.svg")
	if err := r.WriteSVG(path); err != nil {
		t.Fatal(err)
	}
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	groups := map[string]int{} // lane id → elements drawn in it
	var texts []string
	var lane string
	dec := xml.NewDecoder(f)
	root := ""
	for {
		tok, err := dec.Token()
		if err == io.EOF {
			break
		}
		if err != nil {
			t.Fatalf("the SVG is not XML: %v", err)
		}
		switch e := tok.(type) {
		case xml.StartElement:
			if root == "" {
				root = e.Name.Local
			}
			for _, a := range e.Attr {
				if e.Name.Local == "g" && a.Name.Local == "id" {
					lane = a.Value
					groups[lane] = 0
				}
			}
			if lane != "" && (e.Name.Local == "rect" || e.Name.Local == "polyline") {
				groups[lane]++
			}
		case xml.EndElement:
			if e.Name.Local == "g" {
				lane = ""
			}
		case xml.CharData:
			texts = append(texts, string(e))
		}
	}
	if root != "svg" {
		t.Fatalf("root element %q", root)
	}
	// Every lane has its background plus what it draws.
	want := map[string]int{
		"lane-leader":   1 + 96 + 2, // 96 samples with a leader, a legend box per replica
		"lane-acks":     1 + 1,      // one polyline
		"lane-faults":   1 + 4,
		"lane-agent-a1": 1 + 90, // attached except in samples 30..39
		"lane-agent-a2": 1 + 100,
	}
	for id, n := range want {
		if groups[id] != n {
			t.Errorf("lane %s drew %d shapes, want %d (lanes: %v)", id, groups[id], n, groups)
		}
	}
	all := strings.Join(texts, "\n")
	for _, label := range []string{"r1 t2", "r2 t3", "leader-kill", "partition-minority", "agent a1", "peak 30/s"} {
		if !strings.Contains(all, label) {
			t.Errorf("SVG text lacks %q", label)
		}
	}
}

func TestPercentiles(t *testing.T) {
	ms := func(v ...int) []time.Duration {
		var out []time.Duration
		for _, x := range v {
			out = append(out, time.Duration(x)*time.Millisecond)
		}
		return out
	}
	hundred := make([]int, 100)
	for i := range hundred {
		hundred[i] = 100 - i // 100..1, unsorted
	}
	tests := []struct {
		name          string
		in            []time.Duration
		p50, p99, max time.Duration
	}{
		{"none", nil, 0, 0, 0},
		{"one", ms(7), 7 * time.Millisecond, 7 * time.Millisecond, 7 * time.Millisecond},
		{"two", ms(9, 1), time.Millisecond, 9 * time.Millisecond, 9 * time.Millisecond},
		{"hundred", ms(hundred...), 50 * time.Millisecond, 99 * time.Millisecond, 100 * time.Millisecond},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p50, p99, max := Percentiles(tt.in)
			if p50 != tt.p50 || p99 != tt.p99 || max != tt.max {
				t.Fatalf("Percentiles = %v %v %v, want %v %v %v", p50, p99, max, tt.p50, tt.p99, tt.max)
			}
		})
	}
}

func TestAvailability(t *testing.T) {
	t0 := time.Unix(0, 0)
	at := func(ms int, acks int) Sample {
		return Sample{At: t0.Add(time.Duration(ms) * time.Millisecond), Acks: acks}
	}
	tests := []struct {
		name    string
		samples []Sample
		want    float64
	}{
		{"none", nil, 0},
		{"one instant", []Sample{at(0, 5)}, 0},
		{"all acked", []Sample{at(0, 1), at(500, 0), at(1000, 1), at(2000, 1)}, 1},
		{"one bucket of four silent", []Sample{at(0, 1), at(1000, 1), at(2000, 0), at(2500, 0), at(3000, 1), at(4000, 1)}, 0.75},
		{"gap without samples", []Sample{at(0, 1), at(3999, 1)}, 0.5},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := Availability(tt.samples); got != tt.want {
				t.Fatalf("Availability = %v, want %v", got, tt.want)
			}
		})
	}
}
