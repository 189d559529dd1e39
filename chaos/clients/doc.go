// Package clients is the workload of the chaos campaign: concurrent
// clients that write, delete and read a shared set of workloads through
// the leader-aware client (rpc/client) and record every operation in a
// history.Recorder for the checkers.
//
// Each client owns its Resolver and one CommandConnection stream to the
// leader, and issues one request at a time. A write is an UpdateState
// with the mask desiredState.workloads.<key> that sets the workload's
// runtimeConfig to a value unique in the run ("c<client>-<seq>", carried
// in the env of a process workload, so an agent could run it); a delete
// is the same mask without the workload; a read is a GetCompleteState with
// one mask per key, recorded as the whole key → value map.
//
// Outcomes are what the client can prove. OK is an answer. Fail means the
// request certainly changed nothing: it was never sent (no leader found,
// the stream would not open), or the leader rejected it before proposing
// it ("Update rejected"). Everything else after the request left the
// client is Unknown: a timeout, a stream that broke or lost its
// heartbeat, an "Update failed" from a leader that lost its leadership
// while the entry was in Raft (it may still commit). Reads follow the
// same rules; an Unknown or failed read tells the checkers nothing.
//
// A broken or timed-out stream is dropped, the replica forgotten as the
// leader, and the next operation opens a new stream through the same
// Resolver, which goes straight to the new leader once it is known.
package clients
