// Package testcluster starts N complete replicas in one process — Raft,
// gossip, the Ankaios server and its gRPC services on loopback — on top of
// cluster/clustertest, so tests can partition, stop and restart them and
// talk to them the way agents and CLIs do.
package testcluster
