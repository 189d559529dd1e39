// Package graph is the dependency graph of a cluster's workloads, as
// `grapnel get graph` prints it and as a dashboard would draw it: one
// vertex per workload, coloured by its execution state and grouped by the
// agent it is assigned to; one edge per dependency, labelled with its add
// condition; one edge per delete-graph entry between workloads that exist
// (which workload's deletion waits for which dependent); dependencies
// that form a cycle and dependencies on workloads that do not exist are
// marked.
//
// Build makes the Graph from the desired state, the workload states and
// the delete graph; nothing else. The package is pure like state: no I/O,
// no clock, no randomness, and every output (the Graph, its JSON, DOT and
// SVG) lists things in one fixed order, so the same state always gives the
// same bytes. The CLI builds the graph from the complete state it reads
// over the Ankaios protocol, so it works against any replica; a replica
// builds it from its store (FromStore), with the replicated delete graph.
//
// The JSON form (Graph with its tags) is a stable interface, documented in
// docs/operations.md: fields may be added, none renamed or removed without
// raising Version.
package graph
