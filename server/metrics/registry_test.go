package metrics

import (
	"net/http/httptest"
	"strings"
	"testing"
	"time"
)

func TestExposition(t *testing.T) {
	r := New()
	c := r.NewCounter("grapnel_leader_changes_total", "Times this replica gained or lost leadership.")
	c.Inc()
	c.Inc()
	g := r.NewGauge("grapnel_raft_apply_lag", "Committed but not applied entries.")
	r.OnCollect(func() { g.Set(3) })
	h := r.NewHistogram("grapnel_raft_commit_seconds", "Proposal to commit.", []float64{0.01, 0.001}, "type")
	h.Observe(0.0005, "UpdateDesiredState")
	h.Observe(0.005, "UpdateDesiredState")
	h.Observe(2, "UpdateDesiredState")

	rec := httptest.NewRecorder()
	r.Handler().ServeHTTP(rec, httptest.NewRequest("GET", "/metrics", nil))
	out := rec.Body.String()
	for _, want := range []string{
		"# TYPE grapnel_leader_changes_total counter\ngrapnel_leader_changes_total 2\n",
		"grapnel_raft_apply_lag 3\n",
		`grapnel_raft_commit_seconds_bucket{type="UpdateDesiredState",le="0.001"} 1` + "\n",
		`grapnel_raft_commit_seconds_bucket{type="UpdateDesiredState",le="0.01"} 2` + "\n",
		`grapnel_raft_commit_seconds_bucket{type="UpdateDesiredState",le="+Inf"} 3` + "\n",
		`grapnel_raft_commit_seconds_count{type="UpdateDesiredState"} 3` + "\n",
		`grapnel_raft_commit_seconds_sum{type="UpdateDesiredState"} 2.0055` + "\n",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("exposition lacks %q:\n%s", want, out)
		}
	}
	if ct := rec.Header().Get("Content-Type"); !strings.HasPrefix(ct, "text/plain; version=0.0.4") {
		t.Errorf("content type %q", ct)
	}
}

func TestLabelEscaping(t *testing.T) {
	r := New()
	r.NewGauge("g", "help", "name").Set(1, "a\"b\\c\nd")
	var b strings.Builder
	if _, err := r.WriteTo(&b); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(b.String(), `g{name="a\"b\\c\nd"} 1`) {
		t.Errorf("bad escaping:\n%s", b.String())
	}
}

func TestCollectRaft(t *testing.T) {
	s := NewSet()
	s.CollectRaft(func() map[string]string {
		return map[string]string{"state": "Leader", "term": "7", "commit_index": "120", "applied_index": "117", "last_contact": "0"}
	})
	s.LeaderChanged()
	var b strings.Builder
	if _, err := s.Registry.WriteTo(&b); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"grapnel_raft_apply_lag 3\n", "grapnel_raft_term 7\n", "grapnel_raft_is_leader 1\n", "grapnel_leader_changes_total 1\n"} {
		if !strings.Contains(b.String(), want) {
			t.Errorf("lacks %q:\n%s", want, b.String())
		}
	}
}

// The Raft channel's refusals are read from their owner at each scrape.
func TestCollectRefusals(t *testing.T) {
	s := NewSet()
	var accepted uint64 = 3
	s.CollectRefusals(func() (uint64, uint64) { return accepted, 1 }, func() uint64 { return 2 })
	scrape := func() string {
		var b strings.Builder
		if _, err := s.Registry.WriteTo(&b); err != nil {
			t.Fatal(err)
		}
		return b.String()
	}
	for _, want := range []string{`grapnel_raft_handshakes_refused_total{side="accepted"} 3` + "\n",
		`grapnel_raft_handshakes_refused_total{side="dialled"} 1` + "\n", "grapnel_raft_entries_refused_total 2\n"} {
		if got := scrape(); !strings.Contains(got, want) {
			t.Errorf("lacks %q:\n%s", want, got)
		}
	}
	accepted = 5
	if got := scrape(); !strings.Contains(got, `grapnel_raft_handshakes_refused_total{side="accepted"} 5`) {
		t.Errorf("the next scrape did not read the count again:\n%s", got)
	}
}

// An OpenMetrics scraper sees the commit latency's exemplar (the Raft
// index); a plain one gets the 0.0.4 text format without it.
func TestCommitExemplarInOpenMetrics(t *testing.T) {
	s := NewSet()
	s.ObserveCommitAt("UpdateDesiredState", 3*time.Millisecond, 42)
	rec := httptest.NewRecorder()
	req := httptest.NewRequest("GET", "/metrics", nil)
	req.Header.Set("Accept", "application/openmetrics-text; version=1.0.0")
	s.Registry.Handler().ServeHTTP(rec, req)
	out := rec.Body.String()
	if !strings.HasPrefix(rec.Header().Get("Content-Type"), "application/openmetrics-text") {
		t.Errorf("content type %q", rec.Header().Get("Content-Type"))
	}
	if !strings.Contains(out, `grapnel_raft_commit_seconds_bucket{type="UpdateDesiredState",le="0.005"} 1 # {raft_index="42"} 0.003`) {
		t.Errorf("no exemplar:\n%s", out)
	}
	var plain strings.Builder
	if _, err := s.Registry.WriteTo(&plain); err != nil {
		t.Fatal(err)
	}
	if strings.Contains(plain.String(), "raft_index") {
		t.Error("exemplar in the 0.0.4 text format")
	}
}

// Requirement (issue 28, point 1): /metrics shows this replica's release
// and commit, every replica's release as gossip announces it and every
// agent's as the leader heard it; a replica or agent that is gone, or
// changed its release, leaves no stale series.
func TestReleases(t *testing.T) {
	s := NewSet()
	s.CollectBuild("0.4.0-dev", "0123456789ab")
	replicas := map[string]string{"r1": "0.4.0-dev", "r2": "0.3.0"}
	agents := map[string]string{"agent_A": "0.4.0-dev", "agent_B": "ankaios"}
	s.CollectReleases(func() map[string]string { return replicas }, func() map[string]string { return agents })
	expose := func() string {
		var b strings.Builder
		if _, err := s.Registry.WriteTo(&b); err != nil {
			t.Fatal(err)
		}
		return b.String()
	}
	out := expose()
	for _, want := range []string{
		`grapnel_build_info{commit="0123456789ab",version="0.4.0-dev"} 1`,
		`grapnel_replica_release{release="0.4.0-dev",replica="r1"} 1`,
		`grapnel_replica_release{release="0.3.0",replica="r2"} 1`,
		`grapnel_agent_release{agent="agent_A",release="0.4.0-dev"} 1`,
		`grapnel_agent_release{agent="agent_B",release="ankaios"} 1`,
	} {
		if !strings.Contains(out, want+"\n") {
			t.Errorf("exposition lacks %s:\n%s", want, out)
		}
	}
	// r2 upgraded, agent_B left; a follower (nil agents) has no agent series.
	replicas = map[string]string{"r1": "0.4.0-dev", "r2": "0.4.0-dev"}
	agents = nil
	out = expose()
	if strings.Contains(out, `release="0.3.0"`) || strings.Contains(out, "grapnel_agent_release{") {
		t.Errorf("stale series:\n%s", out)
	}
	if !strings.Contains(out, `grapnel_replica_release{release="0.4.0-dev",replica="r2"} 1`) {
		t.Errorf("r2's new release missing:\n%s", out)
	}
}

// Requirement (issue 29 point 3): /metrics shows which replicas' storage
// failed, every member present, and counts this replica's storage
// errors; a replica back on working storage reads 0.
func TestStorage(t *testing.T) {
	s := NewSet()
	failed := map[string]bool{"r1": false, "r2": true}
	var errs uint64 = 3
	s.CollectStorage(func() map[string]bool { return failed }, func() uint64 { return errs })
	expose := func() string {
		var b strings.Builder
		if _, err := s.Registry.WriteTo(&b); err != nil {
			t.Fatal(err)
		}
		return b.String()
	}
	out := expose()
	for _, want := range []string{`grapnel_storage_failed{replica="r1"} 0`, `grapnel_storage_failed{replica="r2"} 1`, `grapnel_storage_errors_total 3`} {
		if !strings.Contains(out, want+"\n") {
			t.Errorf("exposition lacks %s:\n%s", want, out)
		}
	}
	failed["r2"] = false
	if out := expose(); !strings.Contains(out, `grapnel_storage_failed{replica="r2"} 0`+"\n") {
		t.Errorf("r2 back on working storage:\n%s", out)
	}
}

// grapnel_leader names the leader this replica knows, by id, and has no
// series while it knows none (issue 31 point 7: Grafana's Leader panel
// shows the label).
func TestCollectLeader(t *testing.T) {
	s := NewSet()
	leader := "s2"
	s.CollectLeader(func() string { return leader })
	scrape := func() string {
		var b strings.Builder
		if _, err := s.Registry.WriteTo(&b); err != nil {
			t.Fatal(err)
		}
		return b.String()
	}
	if got := scrape(); !strings.Contains(got, "grapnel_leader{replica=\"s2\"} 1\n") {
		t.Fatalf("leader s2:\n%s", got)
	}
	leader = ""
	if got := scrape(); strings.Contains(got, "grapnel_leader{") {
		t.Fatalf("no leader known, yet a series:\n%s", got)
	}
	leader = "s1"
	if got := scrape(); !strings.Contains(got, "grapnel_leader{replica=\"s1\"} 1\n") || strings.Contains(got, "s2") {
		t.Fatalf("leader s1 after s2:\n%s", got)
	}
}
