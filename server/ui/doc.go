// Package ui is the dashboard a replica serves on --ui-address: the
// replicas and the leader, the agents, the workloads and their states, a
// workload's rendered config (secrets masked), timeline and logs, and the
// dependency graph, kept current over one server-sent-events stream per
// open page.
//
// Every view is read from this replica's own copy of the replicated state
// (the FSM store) and its own view of the cluster (cluster.Node), so a
// follower shows what the leader shows, up to replication lag. Two things
// need the leader: logs, and the agents' load reports (CPU usage, free
// memory), which live in its memory only (load.go). Both are asked for on
// a CliConnection to this replica, which a follower proxies to the
// leader, as for `grapnel logs` and `grapnel get state agents`.
//
// The pages are plain HTML with a little hand-written JavaScript, embedded
// in the binary (assets/): no build step, no Node, a few kilobytes. At idle
// the dashboard costs nothing: no goroutine and no timer runs unless a
// browser holds an events stream, and a stream wakes only when the cluster
// or the store changes, and every LoadRefreshInterval for the agents'
// load.
package ui
