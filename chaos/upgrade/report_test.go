package upgrade

import (
	"path/filepath"
	"strings"
	"testing"
	"time"
)

func sampleReport() *Report {
	r := &Report{Mode: "short", Start: t0, End: t0.Add(3 * time.Minute), Secure: true, Podman: "on",
		Old:     BuildInfo{Commit: "old1", SnapshotTypes: []int{1, 2}, EntryTypes: []int{1, 144}},
		New:     BuildInfo{Commit: "new1", SnapshotTypes: []int{1, 2, 19, 20}, EntryTypes: []int{1, 144, 145}},
		Skipped: []Skip{{What: "phase finalize", Reason: "no cluster upgrade finalize"}}}
	steps := Plan(PlanConfig{Replicas: 3, Agents: 1})
	ok := StepReport{Step: steps[0], Healthy: 3 * time.Second, NextAck: -1, Checks: []Check{{Name: "healthy", OK: true, Detail: "fine"}}}
	proxy := StepReport{Step: steps[2], Healthy: 120 * time.Millisecond, NextAck: 40 * time.Millisecond, LongestGap: 300 * time.Millisecond,
		Probes: []Probe{{Kind: ProbeProxied, Via: "ankaios client on r3 (old)", Detail: "127.0.0.1:4100: answer: permission denied: replica 'r3' may not forward operator/chaos"}},
		Checks: []Check{{Name: "routes-serve", Detail: "via r3: 1 ok, 20 failed, 0 unknown once healthy; first error: permission denied"}}}
	proxy2 := StepReport{Step: steps[3], Healthy: 90 * time.Millisecond, NextAck: 30 * time.Millisecond,
		Probes: []Probe{{Kind: ProbeProxied, Via: "ankaios client on r3 (old)", Detail: "127.0.0.1:4177: answer: permission denied: replica 'r3' may not forward operator/chaos"}}}
	rollback := StepReport{Step: steps[5], Healthy: -1, NextAck: 20 * time.Millisecond}
	rollback.fail("r1 on old healthy in the cluster (from new)", "r1 on old exited: exit status 1", "r1: [ERROR] failed to restore snapshot: record 58 (type 19)")
	r.Steps = []StepReport{ok, proxy, proxy2, rollback}
	return r
}

// One incompatibility seen at several steps is one finding that lists
// them; addresses and numbers in its detail do not split it.
func TestFindingsGroupBySignature(t *testing.T) {
	fs := sampleReport().Findings()
	if len(fs) != 3 {
		t.Fatalf("%d findings: %+v", len(fs), fs)
	}
	if fs[0].What != "probe proxied-state ankaios client on r3 (old)" || joinInts(fs[0].Steps) != "3, 4" {
		t.Errorf("first finding %+v", fs[0])
	}
	if fs[1].What != "check routes-serve" || joinInts(fs[1].Steps) != "3" {
		t.Errorf("second finding %+v", fs[1])
	}
	if fs[2].What != "r1 on old healthy in the cluster (from new)" || len(fs[2].Logs) != 1 {
		t.Errorf("third finding %+v", fs[2])
	}
}

// The summary says the verdict, what only the new build knows, every
// step in a row with its figures, and every finding with its steps and
// log lines.
func TestMarkdown(t *testing.T) {
	r := sampleReport()
	if r.Passed() {
		t.Fatal("a report with failures passed")
	}
	md := r.Markdown()
	for _, want := range []string{
		"# Upgrade test (short): FAILED",
		"snapshot record types only the new build knows: [19 20]",
		"command types only the new build knows: [145]",
		"skipped phase finalize: no cluster upgrade finalize",
		"| 1 | start | start every replica and agent on old |",
		"| 3 | upgrade | replica r2 -> new, then it leads |  |  |  | 120 ms | 40 ms | 300 ms | **FAILED** (2) |",
		"| 6 | rollback | replica r1 -> old, then r2 leads |  |  |  | never | 20 ms | - | **FAILED** (1) |",
		"## Incompatibilities and failures (3)",
		"1. **probe proxied-state ankaios client on r3 (old)** at steps 3, 4:",
		"r1: [ERROR] failed to restore snapshot: record 58 (type 19)",
	} {
		if !strings.Contains(md, want) {
			t.Errorf("markdown lacks %q:\n%s", want, md)
		}
	}
}

// The JSON report reads back as written.
func TestReportJSONRoundTrip(t *testing.T) {
	r := sampleReport()
	path := filepath.Join(t.TempDir(), "report.json")
	if err := r.WriteJSON(path); err != nil {
		t.Fatal(err)
	}
	back, err := LoadReport(path)
	if err != nil {
		t.Fatal(err)
	}
	if back.Markdown() != r.Markdown() {
		t.Fatalf("round trip changed the report:\n%s\n---\n%s", back.Markdown(), r.Markdown())
	}
	pass := &Report{Mode: "full", Steps: []StepReport{{Step: Step{N: 1, Kind: Start}, Checks: []Check{{Name: "healthy", OK: true}}}}}
	if !pass.Passed() {
		t.Fatal("a report without failures failed")
	}
	pass.Aborted = "interrupted"
	if pass.Passed() {
		t.Fatal("an aborted report passed")
	}
}
