// Package client reaches the leader of a Grapnel cluster, for the CLI and
// the agent.
//
// A Resolver, given one or more replica addresses, asks the replicas for
// their Cluster.Status, learns the replica set and the leader, and keeps
// both fresh from the heartbeat of every stream it opened. Open opens any
// Ankaios stream (agent, CLI, command) to the leader as a leader-aware
// client: a follower answers with the leader's address instead of
// proxying, and the Resolver goes there at once. It backs off (jittered,
// exponential) only while no leader is known, and meanwhile watches every
// replica (Cluster.Watch), so that it takes a newly elected leader at
// once rather than at its next attempt. Every stream carries a
// heartbeat: Cluster.Watch on the same replica, which must send something
// every 250 ms; silence for a second, or an event naming another leader,
// ends the stream with an error that says so, and the caller reconnects.
//
// Conn is the commander side of the CLI stream on top of that: requests
// are matched to their responses by request id, long-lived requests (event
// subscriptions, log campaigns) deliver every response with their id, and
// the server's unsolicited workload-state broadcasts are handed to whoever
// waits for workloads to settle. The stream is owned by one receive
// goroutine; callers never read it. A broken stream fails every pending
// request with an error that says why; reconnecting is the caller's move
// (Resolver.Dial keeps what was learned).
//
// DialCluster gives the operator verbs a Cluster client that calls the
// leader. A server without the Cluster service (an upstream Ankaios
// server) is used as it is, without leader-following or heartbeat.
package client
