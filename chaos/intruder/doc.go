// Package intruder is the chaos campaign's intruder: a process on a test
// host that is not a replica and tries what an attacker on the vehicle
// network, or one holding a stolen or public certificate, would. Against
// every replica it speaks to the gRPC port with no TLS, with TLS but no
// certificate, with a certificate from a foreign CA, and with a
// certificate of the wrong role (an agent certificate asking for cluster
// administration, a desired-state change, another agent's hello); to
// the Raft port with plain TCP and with the wrong-role certificate; it
// replays bytes an operator's client sent earlier; and it joins gossip
// announcing itself a server.
//
// It also tries every hole of issue 27, each against the replica whose
// refusal matters (the leader, a follower, or both): a follower's
// forwarded identity with a replica key never admitted, a removed
// replica's revoked key and a member's key (forward.go); a commander
// widening a workload's privileges, and releasing the operator's lock
// under her name (commander.go); follow-log campaigns past the
// requester's cap and a dry-run past the render budget (commander.go);
// agent streams past the per-agent cap and without hello (streams.go);
// idle connections past the per-source cap and the handshake deadline
// (flood.go); /metrics from another host (metrics.go).
//
// Every attempt is recorded with whether the replica accepted it, where
// an answer other than the refusal owed counts as accepted; the
// campaign's checkers then also look at the cluster for what an
// accepted attempt would have left behind (chaos/check.IntruderRefused),
// and judge from the attempts' time windows whether the flood and the
// render bomb stalled the leader.
package intruder
