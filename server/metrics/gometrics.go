package metrics

import (
	"slices"
	"strings"
	"sync"
	"unicode"

	gometrics "github.com/armon/go-metrics"
	gmprom "github.com/armon/go-metrics/prometheus"
	"github.com/prometheus/client_golang/prometheus"
)

// ExportGoMetrics makes hashicorp/raft's and memberlist's own metrics
// (raft_*, memberlist_*) part of r. Both report through
// hashicorp/go-metrics/compat, which without the hashicorpmetrics build
// tag forwards to armon/go-metrics' global: so that global gets a
// Prometheus sink on r, behind promNames, which gives the series
// Prometheus' names. It adds no goroutine and no timer: runtime
// metrics are off (the Go collector has them, and go-metrics would poll
// them every second), there is no in-memory sink (its interval ticker),
// and sampled series are kept (no expiration) rather than swept. Samples
// (timings) become histograms (see histograms). The global is per
// process: call it once, from main.
func ExportGoMetrics(r *Registry) error {
	sink, err := gmprom.NewPrometheusSinkFrom(gmprom.PrometheusOpts{Registerer: r.reg, Name: "grapnel_gometrics_sink"})
	if err != nil {
		return err
	}
	samples := &histograms{byKey: map[string]prometheus.Histogram{}}
	if err := r.reg.Register(samples); err != nil {
		return err
	}
	cfg := gometrics.DefaultConfig("")
	cfg.EnableHostname = false
	cfg.HostName = ""
	cfg.EnableRuntimeMetrics = false
	_, err = gometrics.NewGlobal(cfg, promNames{next: sink, samples: samples})
	return err
}

// sampleBuckets are the bounds of the histograms of the libraries'
// samples: their timings, in milliseconds, from a decode (microseconds)
// to an election (hundreds of milliseconds) and a slow disk (seconds).
var sampleBuckets = []float64{0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 25, 50, 100, 250, 500, 1000, 2500, 10000}

// histograms keeps the libraries' samples (AddSample, MeasureSince) as
// histograms, one per name and label set. The go-metrics sink would keep
// each as a summary with three quantiles over a 10 s window of five age
// buckets: about 65 KiB of quantile streams per series, and a replica
// reports about seventy, so 4.7 MiB of a leader's heap went to them
// (issue 32); a histogram of these buckets holds about 300 bytes, and
// the quantiles are computed where they are queried.
type histograms struct {
	mu    sync.Mutex
	byKey map[string]prometheus.Histogram
}

var forbiddenChars = strings.NewReplacer(" ", "_", ".", "_", "=", "_", "-", "_", "/", "_", ":", "_")

func (h *histograms) observe(key []string, labels []gometrics.Label, v float64) {
	// Called for every sample (each Raft RPC under load): one string
	// for the series' identity, built once.
	name := forbiddenChars.Replace(strings.Join(key, "_"))
	var id strings.Builder
	id.WriteString(name)
	for _, l := range labels {
		id.WriteByte(';')
		id.WriteString(l.Name)
		id.WriteByte('=')
		id.WriteString(l.Value)
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	hist, ok := h.byKey[id.String()]
	if !ok {
		constLabels := prometheus.Labels{}
		for _, l := range labels {
			constLabels[l.Name] = l.Value
		}
		hist = prometheus.NewHistogram(prometheus.HistogramOpts{Name: name, Help: name, ConstLabels: constLabels, Buckets: sampleBuckets})
		h.byKey[id.String()] = hist
	}
	hist.Observe(v)
}

// Describe describes nothing: the series come as the libraries report
// them (an unchecked collector).
func (h *histograms) Describe(chan<- *prometheus.Desc) {}

func (h *histograms) Collect(ch chan<- prometheus.Metric) {
	h.mu.Lock()
	defer h.mu.Unlock()
	for _, hist := range h.byKey {
		ch <- hist
	}
}

// promNames renames the libraries' keys to Prometheus' conventions (what
// promtool check metrics asks) before the Prometheus sink sees them:
// snake_case names and label names (raft says appendEntries, lastContact,
// rpcType), and counters ending in _total. The values are the libraries':
// their timings are in milliseconds.
type promNames struct {
	next    gometrics.MetricSink
	samples *histograms
}

// perPeer are the keys hashicorp/raft also reports with the peer's id
// appended, its legacy telemetry (one family per peer): the same
// measurement comes with the label peer_id, so the legacy key is dropped.
// cluster sets raft's NoLegacyTelemetry, so they should not come at all.
var perPeer = [][]string{
	{"raft", "replication", "appendEntries", "rpc"},
	{"raft", "replication", "appendEntries", "logs"},
	{"raft", "replication", "heartbeat"},
	{"raft", "replication", "installSnapshot"},
}

// promKey is key renamed, or false when the key is to be dropped.
func promKey(key []string) ([]string, bool) {
	for _, p := range perPeer {
		if len(key) == len(p)+1 && slices.Equal(key[:len(p)], p) {
			return nil, false
		}
	}
	out := make([]string, len(key))
	for i, k := range key {
		out[i] = snakeCase(k)
	}
	return out, true
}

func promLabels(labels []gometrics.Label) []gometrics.Label {
	if len(labels) == 0 {
		return labels
	}
	out := make([]gometrics.Label, len(labels))
	for i, l := range labels {
		out[i] = gometrics.Label{Name: snakeCase(l.Name), Value: l.Value}
	}
	return out
}

// snakeCase writes camelCase as snake_case: appendEntries is
// append_entries, getRPCType get_rpc_type.
func snakeCase(s string) string {
	r := []rune(s)
	var b strings.Builder
	for i, c := range r {
		if unicode.IsUpper(c) {
			if i > 0 && (unicode.IsLower(r[i-1]) || unicode.IsDigit(r[i-1]) ||
				unicode.IsUpper(r[i-1]) && i+1 < len(r) && unicode.IsLower(r[i+1])) {
				b.WriteByte('_')
			}
			c = unicode.ToLower(c)
		}
		b.WriteRune(c)
	}
	return b.String()
}

func (s promNames) SetGauge(key []string, val float32) { s.SetGaugeWithLabels(key, val, nil) }

func (s promNames) SetGaugeWithLabels(key []string, val float32, labels []gometrics.Label) {
	if k, ok := promKey(key); ok {
		s.next.SetGaugeWithLabels(k, val, promLabels(labels))
	}
}

// EmitKey is a one-off key/value pair, which Prometheus has no place for.
func (s promNames) EmitKey([]string, float32) {}

func (s promNames) IncrCounter(key []string, val float32) { s.IncrCounterWithLabels(key, val, nil) }

func (s promNames) IncrCounterWithLabels(key []string, val float32, labels []gometrics.Label) {
	if k, ok := promKey(key); ok {
		if k[len(k)-1] != "total" {
			k = append(k, "total")
		}
		s.next.IncrCounterWithLabels(k, val, promLabels(labels))
	}
}

func (s promNames) AddSample(key []string, val float32) { s.AddSampleWithLabels(key, val, nil) }

func (s promNames) AddSampleWithLabels(key []string, val float32, labels []gometrics.Label) {
	if k, ok := promKey(key); ok {
		s.samples.observe(k, promLabels(labels), float64(val))
	}
}
