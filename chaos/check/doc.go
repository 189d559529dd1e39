// Package check holds the checkers of a chaos run. Each takes what the
// campaign recorded and returns a Result: OK, a readable Detail and, for a
// failure, the smallest window of ops that shows it.
//
// Linearizable checks the client history with porcupine against a model
// of the desired state: a map workload name → value. A write sets a key,
// a delete removes it, a read must see exactly the model's map. Failed ops
// (definitely not applied) are left out; an Unknown write is maybe-applied:
// if no read ever saw its unique value it is left out (placing it after
// everything is always legal), otherwise it must have taken effect before
// the first read that saw it returned; an Unknown delete may take effect
// at any time up to the end of the history.
//
// The history is partitioned per key: the writes and deletes of a key plus
// every read projected onto that key. Porcupine on the whole map explodes
// with 16 concurrent clients (every order of concurrent writes to different
// keys is a distinct search path), while per key it checks 10,000 ops in
// about a second. Linearizability is local per object, so this proves every
// workload's value is a linearizable register; what it does not prove is
// that one read's snapshot of several keys is atomic (two concurrent reads
// may disagree on the order of two concurrent writes to different keys).
//
// On a violation the visualization goes to dir/linearizability.html and the
// history is shrunk from both ends to the shortest run of ops that still
// fails. A window is checked from an unknown start state (the first read
// fixes it); writes and deletes that straddle its edges are maybe-applied and
// reads that straddle them are left out, so a failing window is always a
// real violation of the whole history.
//
// The other checkers: NoLostAcks (acknowledged writes survive unless
// possibly replaced later), OneLeaderPerTerm (Raft election safety seen
// from outside), StableIDs (no workload restarted), Converged (every wanted
// workload Running on its agent) and DisconnectedOnlyWhenCut.
package check
