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

// ServerKeepalive makes a replica drop a connection whose peer stopped
// acknowledging for a second: gRPC sets TCP_USER_TIMEOUT to Timeout, so
// a connection the replica sends on (a Grapnel agent's or CLI's Watch
// heartbeat, four times a second) ends within about a second and a
// quarter of its peer vanishing, with no ping at all. A connection with
// nothing to send gets a ping after Time without activity and is dropped
// when the ping goes unanswered: an upstream Ankaios agent cut off from
// the network, which holds no Watch, loses its stream within about six
// seconds, and only then does its reconnect grace start. Time was 1 s: a
// ping a second on every idle connection, the agents' spare connections
// to the followers included, woke both ends of each for nothing.
var ServerKeepalive = keepalive.ServerParameters{Time: 5 * time.Second, Timeout: time.Second}

// ClientKeepalive lets a client that only listens (get events, logs -f,
// get workloads --watch) notice a replica that vanished without closing
// the TCP connection. Its Time must not be below
// KeepaliveEnforcement.MinTime.
var ClientKeepalive = keepalive.ClientParameters{Time: 20 * time.Second, Timeout: 10 * time.Second, PermitWithoutStream: true}

// WindowBytes is the fixed HTTP/2 flow-control window of every stream
// and connection, either way. Setting it turns off gRPC's bandwidth
// estimator, which answers each message received after a quiet spell with
// a PING and a window update: on an idle cluster that doubled the packets
// of every heartbeat and woke both ends once more each time. The estimator
// grows windows for bulk transfer over long fat links; a vehicle LAN
// carries small messages with sub-millisecond round trips, and 1 MiB lets
// even a 4 MiB message through in four round trips.
const WindowBytes = 1 << 20

// ServerOptions are the message, stream, window, handshake and keepalive
// limits of a replica's gRPC server; a grpc.ConnectionTimeout after them
// replaces DefaultHandshakeTimeout.
func ServerOptions() []grpc.ServerOption {
	return []grpc.ServerOption{
		grpc.ConnectionTimeout(DefaultHandshakeTimeout),
		grpc.InitialWindowSize(WindowBytes),
		grpc.InitialConnWindowSize(WindowBytes),
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

// ClientWindows fixes a client connection's flow-control windows at
// WindowBytes, as ServerOptions does for the replica.
func ClientWindows() []grpc.DialOption {
	return []grpc.DialOption{grpc.WithInitialWindowSize(WindowBytes), grpc.WithInitialConnWindowSize(WindowBytes)}
}
