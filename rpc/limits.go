package rpc

import (
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/keepalive"
)

// MaxMessageBytes bounds every gRPC message either way, on the server and
// on every client, so that both sides refuse the same sizes. It is gRPC's
// default receive limit, and the Ankaios server's and agent's (tonic's
// default decode limit): an upstream peer could not read more anyway. The
// desired state and each agent's payload are budgeted below it
// (state.Limits), so that a ServerHello or a complete state fits; the
// server checks what it sends (server/conns.go) rather than letting gRPC
// end the stream on an oversized message.
const MaxMessageBytes = 4 << 20

// MaxConcurrentStreams bounds the streams one client connection may hold
// open on a replica. An agent or CLI needs at most three (its Ankaios
// stream, the Cluster.Watch heartbeat, a Status probe); a follower's
// proxy connection to the leader carries one stream per upstream Ankaios
// client it forwards, which is the only connection that needs many. 256
// leaves room for every Ankaios agent and tool of a vehicle behind one
// follower while capping what a single misbehaving connection can make a
// replica hold (each stream is two goroutines and a 1024-message send
// queue). A stream beyond the cap waits for a free slot; it is not
// refused.
const MaxConcurrentStreams = 256

// KeepaliveEnforcement is what a replica allows of its clients' pings: a
// ping every MinTime, also without an open stream. ClientKeepalive stays
// within it, or gRPC would end the connection with GOAWAY
// (too_many_pings).
var KeepaliveEnforcement = keepalive.EnforcementPolicy{MinTime: 5 * time.Second, PermitWithoutStream: true}

// ServerKeepalive makes a replica ping an idle connection every second and
// drop it when a ping goes unanswered for a second: an agent cut off from
// the network sends nothing and never closes its stream, and this ends
// such a stream within about two seconds, so its reconnect grace starts
// then.
var ServerKeepalive = keepalive.ServerParameters{Time: time.Second, Timeout: time.Second}

// ClientKeepalive lets a client that only listens (get events, logs -f,
// get workloads --watch) notice a replica that vanished without closing
// the TCP connection. Its Time must not be below
// KeepaliveEnforcement.MinTime.
var ClientKeepalive = keepalive.ClientParameters{Time: 20 * time.Second, Timeout: 10 * time.Second, PermitWithoutStream: true}

// ServerOptions are the message, stream and keepalive limits of a
// replica's gRPC server.
func ServerOptions() []grpc.ServerOption {
	return []grpc.ServerOption{
		grpc.MaxRecvMsgSize(MaxMessageBytes),
		grpc.MaxSendMsgSize(MaxMessageBytes),
		grpc.MaxConcurrentStreams(MaxConcurrentStreams),
		grpc.KeepaliveEnforcementPolicy(KeepaliveEnforcement),
		grpc.KeepaliveParams(ServerKeepalive),
	}
}

// ClientLimits sets a client connection's message limits to the server's:
// gRPC's client default would send up to 2 GiB, which the server then
// refuses after the transfer; with it the client refuses at once.
func ClientLimits() grpc.DialOption {
	return grpc.WithDefaultCallOptions(grpc.MaxCallRecvMsgSize(MaxMessageBytes), grpc.MaxCallSendMsgSize(MaxMessageBytes))
}
