// Package server is the Ankaios server logic of a grapnel-server replica.
// Only the leader runs it: it validates, renders and diffs updates,
// proposes them through Raft, and dispatches the result to agents, CLIs
// and event subscribers over the Ankaios v1 gRPC streams.
//
// All leader work happens on one goroutine, the leader loop, fed by the
// stream handlers through an inbox channel. That mirrors the single
// request loop of the Ankaios server and keeps the order of requests, Raft
// proposals and dispatches obvious.
package server
