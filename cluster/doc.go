// Package cluster runs the Raft node of a grapnel-server replica: the
// hashicorp/raft instance on raft-boltdb/v2 (log and stable store) with
// file snapshots under the data directory, its TCP transport, bootstrap
// and the timing defaults chosen for a vehicle LAN.
package cluster
