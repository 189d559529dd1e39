// Package gossipmeta is the metadata every member of the replicas'
// memberlist pool announces: its role, its Raft and gRPC addresses, its
// version, its bootstrap-expect, the leader it sees, whether it has
// Raft state or is leaving, and whether its storage failed.
//
// It is a leaf package (it imports nothing of ours) so that an agent can
// join the pool as a member of role RoleAgent, read the replicas' metadata
// and learn every replica's gRPC address and the leader they see, without
// linking the cluster package and Raft. The cluster package uses the same
// Meta, Encode and Decode for its own announcement.
package gossipmeta
