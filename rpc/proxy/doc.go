// Package proxy carries an Ankaios stream from a follower replica to the
// leader, so that an unmodified Ankaios agent, CLI or SDK works against any
// replica.
//
// Forward copies messages both ways between the client's stream and a
// stream to the leader until either side ends, and hands the leader's
// status back unchanged. Pool keeps one gRPC connection per leader address
// for all proxied streams. The metadata by which leader-aware clients and
// proxying replicas tell the server who they are is in rpc/wire, which
// clients import without this package.
//
// The package knows nothing of leadership: the server decides when to
// proxy, where to, and when a proxied stream must end.
package proxy
