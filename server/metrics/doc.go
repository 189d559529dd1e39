// Package metrics holds a replica's metric families on a
// prometheus/client_golang registry, with the Go runtime and process
// collectors, and serves them with OpenMetrics negotiation. Its small API
// (NewCounter, NewGauge, NewHistogram with label values passed at the
// call) keeps adding a metric a one-line change; Grapnel's own families
// are in grapnel.go, Raft's and memberlist's arrive through the go-metrics
// sink (gometrics.go).
package metrics
