// Package cluster runs one grapnel-server replica's membership and
// consensus: the hashicorp/raft node on raft-wal (log and stable store;
// raft-boltdb/v2 is the other choice, Config.LogStore) with file
// snapshots under the data directory and its TCP transport,
// every write of which goes through a guard that stops the replica from
// storing or voting once its storage failed, until it restarted
// (storage.go); the memberlist gossip member that tells replicas and clients
// each replica's addresses, version and the leader it sees; cluster
// formation (a lone replica bootstraps itself, bootstrap-expect N forms
// one cluster of N exactly once, join retries with backoff); the leader's
// reconciler (autopilot) that adds new replicas as non-voters, promotes
// them once healthy and removes replicas that left or stayed dead, never
// below the minimum quorum; graceful leave; operator actions; the timing
// defaults chosen for a vehicle LAN; and the election at once of a
// successor when the leader's process is gone (fastfail.go).
package cluster
