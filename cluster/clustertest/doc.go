// Package clustertest starts several real replicas (cluster.Node with a
// real fsm.FSM, the Raft log in temporary directories: raft-wal, or
// raft-boltdb/v2 WithLogStore, or in memory with InMemory; Raft over
// loopback TCP and memberlist over loopback TCP/UDP) in one process,
// behind a faultnet.Network, with small timers so tests are fast. It can
// partition, isolate and heal replicas, stop them crash-like, restart
// them on the same data directory and ports, and add replicas that join.
package clustertest
