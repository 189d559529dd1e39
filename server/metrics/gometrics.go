package metrics

import (
	gometrics "github.com/armon/go-metrics"
	gmprom "github.com/armon/go-metrics/prometheus"
)

// ExportGoMetrics makes hashicorp/raft's and memberlist's own metrics
// (raft_*, memberlist_*) part of r. Both report through
// hashicorp/go-metrics/compat, which without the hashicorpmetrics build
// tag forwards to armon/go-metrics' global: so that global gets a
// Prometheus sink on r. It adds no goroutine and no timer: runtime
// metrics are off (the Go collector has them, and go-metrics would poll
// them every second), there is no in-memory sink (its interval ticker),
// and sampled series are kept (no expiration) rather than swept; a
// summary's age window turns over lazily, when it is observed or
// scraped. The global is per process: call it once, from main.
func ExportGoMetrics(r *Registry) error {
	sink, err := gmprom.NewPrometheusSinkFrom(gmprom.PrometheusOpts{Registerer: r.reg, Name: "grapnel_gometrics_sink"})
	if err != nil {
		return err
	}
	cfg := gometrics.DefaultConfig("")
	cfg.EnableHostname = false
	cfg.HostName = ""
	cfg.EnableRuntimeMetrics = false
	_, err = gometrics.NewGlobal(cfg, sink)
	return err
}
