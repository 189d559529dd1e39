// Package placement decides on which agents the placed workloads run: the
// workloads that ask for a number of instances spread over risk groups
// instead of naming an agent (docs/placement.md).
//
// Allocate is a pure, deterministic function of what the replicas agree
// on: the placed workloads, the agents with their risk group, capacity,
// mode and presence, the pinned workloads and the current layout. The
// leader runs it when one of these changes and replicates its answer, so
// the package does no I/O and reads neither the clock nor randomness
// (scripts/check-purity.sh). It imports only state.
package placement
