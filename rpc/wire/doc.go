// Package wire holds what the Ankaios streams carry besides their
// messages: which of the three streams a connection is (Kind, and Open,
// the one switch from a kind to its gRPC method), and the gRPC metadata
// keys by which leader-aware clients and proxying replicas tell a replica
// who they are.
//
// Both sides import it: the leader-aware client in rpc/client, the
// follower→leader proxy in rpc/proxy and the server. It depends only on the
// generated grpcapi code, so the client no longer links the proxy for a
// few string constants.
package wire
