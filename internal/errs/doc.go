// Package errs declares the sentinel errors that cross Grapnel's package
// boundaries and its wire: not the leader, no leader, quorum, unknown
// replica, refused streams and uploads. Each is declared once, here; the
// cluster, the server, the client and the agent wrap them with %w and
// test them with errors.Is, and package rpc maps them to gRPC codes in one
// table (rpc.ToStatus, installed as a server interceptor) and back
// (rpc.FromStatus).
//
// It is a leaf package (it imports nothing of ours and no gRPC or Raft),
// so that the cluster, which may not import rpc, and the agent, which must
// not link Raft, can both use the same sentinels. Input rejected by the
// model keeps its own sentinel, state.ErrInvalid, as state imports nothing.
package errs
