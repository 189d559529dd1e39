package metrics

import (
	"strings"
	"testing"
	"time"

	gometrics "github.com/armon/go-metrics"
	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/prometheus/client_golang/prometheus/testutil/promlint"

	"github.com/grapnel-io/grapnel/cluster/clustertest"
	"github.com/grapnel-io/grapnel/internal/testwait"
)

// bridged lints the raft_* and memberlist_* families of r as promtool
// check metrics does (promlint's rules) and returns the problems and the
// families' names.
func bridged(t *testing.T, r *Registry) ([]promlint.Problem, []string) {
	t.Helper()
	problems, err := testutil.GatherAndLint(r)
	if err != nil {
		t.Fatal(err)
	}
	var ours []promlint.Problem
	for _, p := range problems {
		if strings.HasPrefix(p.Metric, "raft_") || strings.HasPrefix(p.Metric, "memberlist_") {
			ours = append(ours, p)
		}
	}
	mfs, err := r.Gather()
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, mf := range mfs {
		if n := mf.GetName(); strings.HasPrefix(n, "raft_") || strings.HasPrefix(n, "memberlist_") {
			names = append(names, n)
		}
	}
	return ours, names
}

// The keys hashicorp/raft and memberlist report, as they report them, come
// out with Prometheus' names: snake_case, counters with _total, the peer
// in a label and never in the name.
func TestGoMetricsNames(t *testing.T) {
	r := New()
	if err := ExportGoMetrics(r); err != nil {
		t.Fatal(err)
	}
	peer := []gometrics.Label{{Name: "peer_id", Value: "n2"}}
	start := time.Unix(0, 0) // a long time: the value does not matter
	gometrics.MeasureSinceWithLabels([]string{"raft", "replication", "appendEntries", "rpc"}, start, peer)
	gometrics.MeasureSince([]string{"raft", "replication", "appendEntries", "rpc", "n2"}, start) // legacy
	gometrics.IncrCounterWithLabels([]string{"raft", "replication", "appendEntries", "logs"}, 3, peer)
	gometrics.IncrCounter([]string{"raft", "replication", "appendEntries", "logs", "n2"}, 3) // legacy
	gometrics.MeasureSince([]string{"raft", "replication", "heartbeat", "n2"}, start)        // legacy
	gometrics.AddSample([]string{"raft", "leader", "lastContact"}, 12)
	gometrics.IncrCounter([]string{"raft", "apply"}, 1)
	gometrics.MeasureSinceWithLabels([]string{"raft", "net", "rpcDecode"}, start, []gometrics.Label{{Name: "rpcType", Value: "AppendEntries"}})
	gometrics.MeasureSince([]string{"raft", "net", "getRPCType"}, start)
	gometrics.SetGauge([]string{"raft", "fsm", "lastRestoreDuration"}, 1)
	gometrics.IncrCounterWithLabels([]string{"memberlist", "msg", "alive"}, 1, nil)
	gometrics.MeasureSinceWithLabels([]string{"memberlist", "pushPullNode"}, start, nil)

	problems, names := bridged(t, r)
	for _, p := range problems {
		t.Errorf("promlint: %s: %s", p.Metric, p.Text)
	}
	want := []string{"memberlist_msg_alive_total", "memberlist_push_pull_node", "raft_apply_total", "raft_fsm_last_restore_duration",
		"raft_leader_last_contact", "raft_net_get_rpc_type", "raft_net_rpc_decode", "raft_replication_append_entries_logs_total",
		"raft_replication_append_entries_rpc"}
	if strings.Join(names, " ") != strings.Join(want, " ") {
		t.Errorf("families\n%v\nwant\n%v", names, want)
	}
	out := new(strings.Builder)
	if _, err := r.WriteTo(out); err != nil {
		t.Fatal(err)
	}
	// A sample is a histogram: raft_leader_last_contact's 12 ms falls in
	// the 25 ms bucket and not in the 10 ms one.
	for _, s := range []string{`raft_replication_append_entries_logs_total{peer_id="n2"} 3` + "\n", `raft_net_rpc_decode_count{rpc_type="AppendEntries"} 1` + "\n",
		`raft_leader_last_contact_bucket{le="10"} 0` + "\n", `raft_leader_last_contact_bucket{le="25"} 1` + "\n", `raft_leader_last_contact_sum 12` + "\n"} {
		if !strings.Contains(out.String(), s) {
			t.Errorf("exposition lacks %q", s)
		}
	}
}

func TestSnakeCase(t *testing.T) {
	for in, want := range map[string]string{
		"appendEntries": "append_entries", "getRPCType": "get_rpc_type", "lastContact": "last_contact",
		"heartbeat_timeout": "heartbeat_timeout", "RPC": "rpc", "applyBatchNum": "apply_batch_num", "v2Beta": "v2_beta",
	} {
		if got := snakeCase(in); got != want {
			t.Errorf("snakeCase(%q) = %q, want %q", in, got, want)
		}
	}
}

// What a real three-replica cluster reports while it elects and
// replicates passes promtool's rules, no family is named after a replica,
// and memberlist's series name their pool.
func TestGoMetricsOfAClusterLint(t *testing.T) {
	r := New()
	if err := ExportGoMetrics(r); err != nil {
		t.Fatal(err)
	}
	c := clustertest.New(t, 3)
	c.WaitLeader(10 * time.Second)
	var names []string
	testwait.For(t, 10*time.Second, func() bool {
		_, names = bridged(t, r)
		has := func(prefix string) bool {
			for _, x := range names {
				if strings.HasPrefix(x, prefix) {
					return true
				}
			}
			return false
		}
		return has("raft_replication_heartbeat") && has("raft_replication_append") && has("memberlist_gossip")
	}, "replication and gossip metrics")
	problems, names := bridged(t, r)
	for _, p := range problems {
		t.Errorf("promlint: %s: %s", p.Metric, p.Text)
	}
	// The replicas' pool is told from the agents' by a label.
	out := new(strings.Builder)
	if _, err := r.WriteTo(out); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(out.String(), `memberlist_gossip_count{pool="replicas"}`) {
		t.Errorf("memberlist_gossip has no pool label:\n%s", out)
	}
	for _, n := range names {
		for _, id := range c.IDs() {
			if strings.Contains(n, id) {
				t.Errorf("family %s is named after replica %s", n, id)
			}
		}
	}
}
