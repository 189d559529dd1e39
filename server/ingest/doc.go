// Package ingest conflates what agents report before it goes through Raft
// (design seed 003: conflation units and a dispatcher).
//
// Agents report workload states far more often than the cluster needs to
// store them. Each agent has a conflation unit that keeps only the newest
// state per workload instance and drops reports older than the newest one
// it accepted, by the agent's (incarnation, generation) mark. A dispatcher
// takes what is ready from all units, fairly and bounded, into one batch;
// the leader proposes that batch as one Raft entry and asks for the next
// only when it has settled. Load reports are not ingested here: they stay
// in the leader's memory and never go through Raft.
//
// The package holds data structures only: no goroutines, clock or I/O. The
// leader loop owns them and calls them from its single goroutine.
package ingest
