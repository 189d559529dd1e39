// Package report is one chaos run's report: the faults injected, the
// timeline sampled while they happened, the failover figures measured,
// the availability, and the checkers' verdicts. It writes the report as
// JSON (the whole record, read back with Load), as a short markdown
// summary for people, and as an SVG timeline drawn by hand, without a
// plotting dependency.
//
// Figures: for every fault kind the campaign measures three durations per
// fault — from the fault to a new leader, to the next acknowledged
// write, and to every agent attached to that leader — and summarises each
// as a Figure (n, p50, p99, max; Percentiles uses nearest rank). Figures
// groups the three; Report.Figures maps a fault kind to them, and
// Report.Comparison holds the same measurement taken under another
// timing (hashicorp/raft's defaults), keyed the same way.
//
// Availability is the share of whole seconds of the run in which at least
// one write was acknowledged, read off the samples.
package report
