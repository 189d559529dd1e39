// Package intruder is the chaos campaign's intruder: a process on a test
// host that is not a replica and tries what an attacker on the vehicle
// network would. Against every replica it speaks to the gRPC port with no
// TLS, with TLS but no certificate, with a certificate from a foreign CA,
// and with a certificate of the wrong role (an agent certificate asking
// for cluster administration, a desired-state change, another agent's
// hello); to the Raft port with plain TCP and with the wrong-role
// certificate; it replays bytes an operator's client sent earlier; and it
// joins gossip announcing itself a server. Every attempt is recorded with
// whether the replica accepted it; the campaign's checkers then also
// look at the cluster for what an accepted attempt would have left behind
// (chaos/check.Intruder).
package intruder
