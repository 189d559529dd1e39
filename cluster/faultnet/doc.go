// Package faultnet is a partitionable network for tests and chaos runs of
// real replicas on loopback TCP and UDP. A Network knows which replica id
// owns which address; it wraps each replica's Raft stream layer and
// memberlist transport, and refuses dials, drops gossip packets and closes
// live connections between replicas whose link is cut. Cuts are symmetric:
// both ends refuse on their sending or dialing side. A frozen replica's
// Raft connections stand still, as a stopped process's do.
package faultnet
