package metrics

import (
	"bytes"
	"io"
	"net/http"
	"sync"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
)

// Registry holds metric families by name. The zero value is not usable;
// call New.
type Registry struct {
	reg *prometheus.Registry
	mu  sync.Mutex
	// collectors run before every gathering to refresh gauges that are
	// read from elsewhere (Raft statistics, the problems view): they cost
	// nothing between scrapes.
	collectors []func()
}

// New returns a registry with the Go runtime and process collectors.
func New() *Registry {
	reg := prometheus.NewRegistry()
	reg.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	return &Registry{reg: reg}
}

// Register adds a client_golang collector (the go-metrics sink).
func (r *Registry) Register(c prometheus.Collector) error { return r.reg.Register(c) }

// OnCollect registers fn to run before each exposition.
func (r *Registry) OnCollect(fn func()) {
	r.mu.Lock()
	r.collectors = append(r.collectors, fn)
	r.mu.Unlock()
}

// Gather runs the OnCollect functions, then gathers every family.
func (r *Registry) Gather() ([]*dto.MetricFamily, error) {
	r.mu.Lock()
	fns := append([]func(){}, r.collectors...)
	r.mu.Unlock()
	for _, fn := range fns {
		fn()
	}
	return r.reg.Gather()
}

// Counter is a monotonically increasing value per label set.
type Counter struct{ vec *prometheus.CounterVec }

// NewCounter registers a counter family with the given label names.
func (r *Registry) NewCounter(name, help string, labels ...string) *Counter {
	v := prometheus.NewCounterVec(prometheus.CounterOpts{Name: name, Help: help}, labels)
	r.reg.MustRegister(v)
	if len(labels) == 0 {
		v.WithLabelValues() // a series without labels reads 0 until counted
	}
	return &Counter{vec: v}
}

// NewCounterFunc registers a counter series read from fn at each scrape,
// for counts another package keeps; constLabels tell series of one family
// apart.
func (r *Registry) NewCounterFunc(name, help string, constLabels map[string]string, fn func() float64) {
	r.reg.MustRegister(prometheus.NewCounterFunc(prometheus.CounterOpts{Name: name, Help: help, ConstLabels: constLabels}, fn))
}

// NewGaugeFunc registers a gauge series read from fn at each scrape, as
// NewCounterFunc does for counters.
func (r *Registry) NewGaugeFunc(name, help string, constLabels map[string]string, fn func() float64) {
	r.reg.MustRegister(prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: name, Help: help, ConstLabels: constLabels}, fn))
}

// Add adds v (which must not be negative) to the series of labels.
func (c *Counter) Add(v float64, labels ...string) { c.vec.WithLabelValues(labels...).Add(v) }

// Inc adds one.
func (c *Counter) Inc(labels ...string) { c.vec.WithLabelValues(labels...).Inc() }

// Gauge is a value that goes up and down per label set.
type Gauge struct{ vec *prometheus.GaugeVec }

// NewGauge registers a gauge family with the given label names.
func (r *Registry) NewGauge(name, help string, labels ...string) *Gauge {
	v := prometheus.NewGaugeVec(prometheus.GaugeOpts{Name: name, Help: help}, labels)
	r.reg.MustRegister(v)
	if len(labels) == 0 {
		v.WithLabelValues()
	}
	return &Gauge{vec: v}
}

// Set sets the series of labels to v.
func (g *Gauge) Set(v float64, labels ...string) { g.vec.WithLabelValues(labels...).Set(v) }

// Reset drops every series (a family whose label values come and go,
// refreshed as a whole before each scrape).
func (g *Gauge) Reset() { g.vec.Reset() }

// Histogram counts observations into cumulative buckets per label set.
type Histogram struct{ vec *prometheus.HistogramVec }

// NewHistogram registers a histogram family with the given upper bounds
// (any order) and label names.
func (r *Registry) NewHistogram(name, help string, buckets []float64, labels ...string) *Histogram {
	v := prometheus.NewHistogramVec(prometheus.HistogramOpts{Name: name, Help: help, Buckets: sortedCopy(buckets)}, labels)
	r.reg.MustRegister(v)
	if len(labels) == 0 {
		v.WithLabelValues()
	}
	return &Histogram{vec: v}
}

// Observe records v in the series of labels.
func (h *Histogram) Observe(v float64, labels ...string) { h.vec.WithLabelValues(labels...).Observe(v) }

// ObserveWithExemplar records v and attaches an exemplar (e.g. the
// request id that took this long), shown to OpenMetrics scrapers; an
// empty exemplar is a plain Observe.
func (h *Histogram) ObserveWithExemplar(v float64, exemplar prometheus.Labels, labels ...string) {
	o := h.vec.WithLabelValues(labels...)
	if eo, ok := o.(prometheus.ExemplarObserver); ok && len(exemplar) > 0 {
		eo.ObserveWithExemplar(v, exemplar)
		return
	}
	o.Observe(v)
}

// LoopBuckets suit the leader loop's events: from a few microseconds
// (most messages) to the render budget's second and beyond.
var LoopBuckets = []float64{0.00001, 0.0001, 0.001, 0.005, 0.01, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5}

// LatencyBuckets suit Raft commits on a LAN: 0.5 ms to 5 s.
var LatencyBuckets = []float64{0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5}

// WriteTo writes every family in the Prometheus text format.
func (r *Registry) WriteTo(w io.Writer) (int64, error) {
	mfs, err := r.Gather()
	if err != nil {
		return 0, err
	}
	var b bytes.Buffer
	enc := expfmt.NewEncoder(&b, expfmt.NewFormat(expfmt.TypeTextPlain))
	for _, mf := range mfs {
		if err := enc.Encode(mf); err != nil {
			return 0, err
		}
	}
	return b.WriteTo(w)
}

// Handler serves the registry: OpenMetrics (with exemplars) to a scraper
// that asks for it, the text format 0.0.4 otherwise.
func (r *Registry) Handler() http.Handler {
	return promhttp.HandlerFor(r, promhttp.HandlerOpts{EnableOpenMetrics: true})
}

func sortedCopy(b []float64) []float64 {
	out := append([]float64(nil), b...)
	for i := 1; i < len(out); i++ {
		for j := i; j > 0 && out[j] < out[j-1]; j-- {
			out[j], out[j-1] = out[j-1], out[j]
		}
	}
	return out
}
