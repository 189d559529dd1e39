package servercmd

import (
	"encoding/json"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil/promlint"

	"github.com/grapnel-io/grapnel/chaos/bench"
	"github.com/grapnel-io/grapnel/internal/testwait"
)

// grapnelFamilies are the metric names /metrics had before the registry
// moved to prometheus/client_golang: dashboards and alerts out there
// query them, so they must stay.
var grapnelFamilies = []string{
	"grapnel_leader_changes_total",
	"grapnel_raft_commit_seconds_bucket", "grapnel_raft_commit_seconds_sum", "grapnel_raft_commit_seconds_count",
	"grapnel_ingest_batch_size_bucket", "grapnel_ingest_batch_size_sum", "grapnel_ingest_batch_size_count",
	"grapnel_raft_is_leader", "grapnel_raft_term", "grapnel_raft_commit_index", "grapnel_raft_applied_index",
	"grapnel_raft_apply_lag", "grapnel_raft_last_contact_seconds", "grapnel_problems", "grapnel_leader",
}

// A running replica's /metrics has Grapnel's own families under their old
// names, the Go and process collectors, Raft's own metrics through the
// go-metrics sink, and OpenMetrics to a scraper that asks for it; every
// metric the Grafana dashboard (deploy/grafana/grapnel.json) queries is
// in it.
func TestMetricsScrapeAndDashboard(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and runs grapnel-server and grapnel")
	}
	bins := e2eBuild(t, "grapnel-server", "grapnel")
	dir := t.TempDir()
	ports, err := bench.FreeAddrs(3)
	if err != nil {
		t.Fatal(err)
	}
	addr, raft, metricsAddr := ports[0], ports[1], ports[2]
	runServer(t, bins["grapnel-server"], nil, "-k", "--name", "n1", "-a", addr, "--raft-address", raft,
		"--data-dir", filepath.Join(dir, "data"), "--metrics-address", metricsAddr)
	url := "http://" + metricsAddr + "/metrics"
	scrape := func(accept string) (string, string) {
		req, _ := http.NewRequest("GET", url, nil)
		if accept != "" {
			req.Header.Set("Accept", accept)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			return "", ""
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return string(b), resp.Header.Get("Content-Type")
	}
	testwait.For(t, 20*time.Second, func() bool {
		body, _ := scrape("")
		return strings.Contains(body, "grapnel_raft_is_leader 1")
	}, "the lone replica leading, seen on /metrics")
	// A commit, so that the histograms have series.
	e2eCLI(t, bins["grapnel"], []string{addr}, "apply", e2eManifest(t, dir, "m.yaml", map[string]string{"web": "nginx"}))

	body, ct := scrape("")
	if !strings.HasPrefix(ct, "text/plain") {
		t.Errorf("plain scrape content type %q", ct)
	}
	names := map[string]bool{}
	for _, line := range strings.Split(body, "\n") {
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		names[strings.FieldsFunc(line, func(r rune) bool { return r == '{' || r == ' ' })[0]] = true
	}
	want := append([]string{"grapnel_agents_connected", "grapnel_workloads", "go_goroutines", "go_memstats_heap_inuse_bytes",
		"process_resident_memory_bytes", "process_cpu_seconds_total",
		"grapnel_raft_fast_failover_total", "grapnel_raft_leader_probes_total"}, grapnelFamilies...)
	for _, n := range want {
		if !names[n] {
			t.Errorf("/metrics lacks %s", n)
		}
	}
	raftSeen := false
	for n := range names {
		raftSeen = raftSeen || strings.HasPrefix(n, "raft_")
	}
	if !raftSeen {
		t.Error("/metrics has no raft_* metric from hashicorp/raft's go-metrics")
	}
	// promtool check metrics, on what the replica serves (promlint's rules).
	problems, err := promlint.New(strings.NewReader(body)).Lint()
	if err != nil {
		t.Fatalf("promlint: %v", err)
	}
	for _, p := range problems {
		t.Errorf("promtool check metrics: %s: %s", p.Metric, p.Text)
	}
	if om, ct := scrape("application/openmetrics-text; version=1.0.0"); !strings.HasPrefix(ct, "application/openmetrics-text") || !strings.HasSuffix(strings.TrimSpace(om), "# EOF") {
		t.Errorf("OpenMetrics scrape: content type %q, ends %q", ct, om[max(0, len(om)-20):])
	}

	// The dashboard: valid JSON, and every metric it queries exists.
	data, err := os.ReadFile("../../../deploy/grafana/grapnel.json")
	if err != nil {
		t.Fatal(err)
	}
	var dash struct {
		Panels []struct {
			Title   string `json:"title"`
			Options struct {
				TextMode string `json:"textMode"`
			} `json:"options"`
			Targets []struct {
				Expr         string `json:"expr"`
				LegendFormat string `json:"legendFormat"`
			} `json:"targets"`
		} `json:"panels"`
	}
	if err := json.Unmarshal(data, &dash); err != nil {
		t.Fatalf("deploy/grafana/grapnel.json: %v", err)
	}
	metricName := regexp.MustCompile(`\b(?:grapnel|raft|memberlist|go|process)_[a-z0-9_]+`)
	queried := 0
	for _, p := range dash.Panels {
		for _, tg := range p.Targets {
			for _, n := range metricName.FindAllString(tg.Expr, -1) {
				queried++
				if !names[n] {
					t.Errorf("panel %q queries %s, which /metrics does not have", p.Title, n)
				}
			}
		}
	}
	// Issue 31 point 7: the Leader panel names the leader (the replica
	// label of grapnel_leader, which this scrape has for n1), not "1".
	if !strings.Contains(body, `grapnel_leader{replica="n1"} 1`) {
		t.Errorf("/metrics does not name n1 as the leader")
	}
	leaderPanel := false
	for _, p := range dash.Panels {
		if p.Title != "Leader" {
			continue
		}
		leaderPanel = true
		if p.Options.TextMode != "name" || len(p.Targets) != 1 || p.Targets[0].LegendFormat != "{{replica}}" ||
			!strings.Contains(p.Targets[0].Expr, "grapnel_leader{") {
			t.Errorf("the Leader panel does not show the leader's id: text mode %q, targets %+v", p.Options.TextMode, p.Targets)
		}
	}
	if !leaderPanel {
		t.Error("the dashboard has no Leader panel")
	}
	if queried < 10 {
		t.Errorf("the dashboard queries only %d metrics", queried)
	}
}
