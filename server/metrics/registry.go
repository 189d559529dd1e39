package metrics

import (
	"fmt"
	"io"
	"math"
	"net/http"
	"sort"
	"strconv"
	"strings"
	"sync"
)

// Registry holds metric families by name. The zero value is not usable;
// call New.
type Registry struct {
	mu       sync.Mutex
	families map[string]*family
	// collectors run before every write to refresh gauges that are read
	// from elsewhere (Raft statistics).
	collectors []func()
}

type kind string

const (
	kindCounter   kind = "counter"
	kindGauge     kind = "gauge"
	kindHistogram kind = "histogram"
)

type family struct {
	name, help string
	kind       kind
	labelNames []string
	buckets    []float64
	series     map[string]*series
}

type series struct {
	labels  []string
	value   float64 // counter and gauge
	counts  []uint64
	sum     float64
	samples uint64
}

// New returns an empty registry.
func New() *Registry { return &Registry{families: map[string]*family{}} }

// OnCollect registers fn to run before each exposition.
func (r *Registry) OnCollect(fn func()) {
	r.mu.Lock()
	r.collectors = append(r.collectors, fn)
	r.mu.Unlock()
}

func (r *Registry) family(name, help string, k kind, labels []string, buckets []float64) *family {
	r.mu.Lock()
	defer r.mu.Unlock()
	if f, ok := r.families[name]; ok {
		if f.kind != k {
			panic(fmt.Sprintf("metrics: %s registered as %s and %s", name, f.kind, k))
		}
		return f
	}
	f := &family{name: name, help: help, kind: k, labelNames: labels, buckets: buckets, series: map[string]*series{}}
	r.families[name] = f
	return f
}

func (r *Registry) series(f *family, labels []string) *series {
	if len(labels) != len(f.labelNames) {
		panic(fmt.Sprintf("metrics: %s wants %d labels, got %d", f.name, len(f.labelNames), len(labels)))
	}
	key := strings.Join(labels, "\xff")
	s, ok := f.series[key]
	if !ok {
		s = &series{labels: append([]string(nil), labels...)}
		if f.kind == kindHistogram {
			s.counts = make([]uint64, len(f.buckets))
		}
		f.series[key] = s
	}
	return s
}

// Counter is a monotonically increasing value.
type Counter struct {
	r *Registry
	f *family
}

// NewCounter registers (or returns) a counter family.
func (r *Registry) NewCounter(name, help string, labels ...string) *Counter {
	return &Counter{r: r, f: r.family(name, help, kindCounter, labels, nil)}
}

// Add adds v (which must not be negative) to the series of labels.
func (c *Counter) Add(v float64, labels ...string) {
	if v < 0 {
		return
	}
	c.r.mu.Lock()
	c.r.series(c.f, labels).value += v
	c.r.mu.Unlock()
}

// Inc adds one.
func (c *Counter) Inc(labels ...string) { c.Add(1, labels...) }

// Gauge is a value that goes up and down.
type Gauge struct {
	r *Registry
	f *family
}

// NewGauge registers (or returns) a gauge family.
func (r *Registry) NewGauge(name, help string, labels ...string) *Gauge {
	return &Gauge{r: r, f: r.family(name, help, kindGauge, labels, nil)}
}

// Set sets the series of labels to v.
func (g *Gauge) Set(v float64, labels ...string) {
	g.r.mu.Lock()
	g.r.series(g.f, labels).value = v
	g.r.mu.Unlock()
}

// Histogram counts observations into cumulative buckets.
type Histogram struct {
	r *Registry
	f *family
}

// LatencyBuckets suit Raft commits on a LAN: 0.5 ms to 5 s.
var LatencyBuckets = []float64{0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5}

// NewHistogram registers (or returns) a histogram family with the given
// upper bounds (sorted ascending; +Inf is implied).
func (r *Registry) NewHistogram(name, help string, buckets []float64, labels ...string) *Histogram {
	b := append([]float64(nil), buckets...)
	sort.Float64s(b)
	return &Histogram{r: r, f: r.family(name, help, kindHistogram, labels, b)}
}

// Observe records one value.
func (h *Histogram) Observe(v float64, labels ...string) {
	h.r.mu.Lock()
	defer h.r.mu.Unlock()
	s := h.r.series(h.f, labels)
	for i, ub := range h.f.buckets {
		if v <= ub {
			s.counts[i]++
		}
	}
	s.sum += v
	s.samples++
}

// WriteTo writes every family in the text format, sorted by name.
func (r *Registry) WriteTo(w io.Writer) (int64, error) {
	r.mu.Lock()
	collectors := append([]func(){}, r.collectors...)
	r.mu.Unlock()
	for _, fn := range collectors {
		fn()
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	var b strings.Builder
	names := make([]string, 0, len(r.families))
	for n := range r.families {
		names = append(names, n)
	}
	sort.Strings(names)
	for _, n := range names {
		f := r.families[n]
		fmt.Fprintf(&b, "# HELP %s %s\n# TYPE %s %s\n", f.name, escapeHelp(f.help), f.name, f.kind)
		keys := make([]string, 0, len(f.series))
		for k := range f.series {
			keys = append(keys, k)
		}
		sort.Strings(keys)
		for _, k := range keys {
			s := f.series[k]
			switch f.kind {
			case kindHistogram:
				for i, ub := range f.buckets {
					fmt.Fprintf(&b, "%s_bucket%s %d\n", f.name, labelText(f.labelNames, s.labels, "le", formatFloat(ub)), s.counts[i])
				}
				fmt.Fprintf(&b, "%s_bucket%s %d\n", f.name, labelText(f.labelNames, s.labels, "le", "+Inf"), s.samples)
				fmt.Fprintf(&b, "%s_sum%s %s\n", f.name, labelText(f.labelNames, s.labels, "", ""), formatFloat(s.sum))
				fmt.Fprintf(&b, "%s_count%s %d\n", f.name, labelText(f.labelNames, s.labels, "", ""), s.samples)
			default:
				fmt.Fprintf(&b, "%s%s %s\n", f.name, labelText(f.labelNames, s.labels, "", ""), formatFloat(s.value))
			}
		}
	}
	n, err := io.WriteString(w, b.String())
	return int64(n), err
}

// Handler serves the registry at /metrics.
func (r *Registry) Handler() http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "text/plain; version=0.0.4; charset=utf-8")
		_, _ = r.WriteTo(w)
	})
}

func labelText(names, values []string, extraName, extraValue string) string {
	if len(names) == 0 && extraName == "" {
		return ""
	}
	parts := make([]string, 0, len(names)+1)
	for i, n := range names {
		parts = append(parts, n+`="`+escapeLabel(values[i])+`"`)
	}
	if extraName != "" {
		parts = append(parts, extraName+`="`+extraValue+`"`)
	}
	return "{" + strings.Join(parts, ",") + "}"
}

func escapeLabel(s string) string {
	return strings.NewReplacer(`\`, `\\`, "\n", `\n`, `"`, `\"`).Replace(s)
}

func escapeHelp(s string) string {
	return strings.NewReplacer(`\`, `\\`, "\n", `\n`).Replace(s)
}

func formatFloat(v float64) string {
	switch {
	case math.IsInf(v, 1):
		return "+Inf"
	case math.IsInf(v, -1):
		return "-Inf"
	case math.IsNaN(v):
		return "NaN"
	}
	return strconv.FormatFloat(v, 'g', -1, 64)
}
