// Package metrics is a small registry of counters, gauges and histograms
// written in the Prometheus text exposition format (version 0.0.4). It
// covers what an operator of a replica needs — leader changes, commit
// latency, apply lag — without a client library dependency.
package metrics
