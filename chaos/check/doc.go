// Package check holds the checkers of a chaos run. Each takes what the
// campaign recorded and returns a Result: OK, a readable Detail and, for a
// failure, the smallest window of ops that shows it.
//
// Linearizable checks the client history with porcupine against a model
// of the desired state, one key (workload) at a time: a key's history is
// its writes and deletes plus every read projected onto it, and the model
// is a register whose state is the set of values the key may have. A write
// sets the key, a delete removes it, a read must see a possible value.
//
// Outcomes: Fail ops (definitely not applied) are left out. An Unknown
// write is maybe-applied: if no read ever saw its unique value it is left
// out (placing it after everything is always legal), otherwise it was
// applied, before the first read that saw it returned. An Unknown delete
// may take effect at any point up to an in-flight bound after its call
// (DefaultInFlight, 30 s), or never. The bound is an assumption: a request
// reaches the leader within the client's timeout or the 6 s a server keeps
// a silent connection, a leader proposes what it received within
// milliseconds (or when it thaws from a freeze of at most 4 s), and a
// proposed entry commits with the next leader's first entry or never; the
// longest fault of a campaign lasts 8 s. The checker tests the assumption where it can:
// an Unknown write first seen later than the bound fails the check.
//
// Linearizability is local per object, so checking each key proves every
// workload's value is a linearizable register; what it does not prove is
// that one read's snapshot of several keys is atomic (two concurrent reads
// may disagree on the order of two concurrent writes to different keys).
//
// Porcupine's cost grows with the square of a history's length, and a
// 30-minute campaign records over 300,000 ops. So each key's history is
// cut where its value is certain: at a time no write or delete spans, after
// one that overlapped no other, with every read spanning the cut having
// seen that value. The segments are checked one after another, each from
// the value at its cut; together they give exactly the verdict of the whole
// (TestCutsKeepTheVerdict compares the two on random histories).
//
// On a violation the visualization of the failing segment goes to
// dir/linearizability.html and the segment is shrunk from both ends to the
// shortest run of ops that still fails. A window is checked from an unknown
// value; writes and deletes that straddle its edges are maybe-applied and
// reads that straddle them are left out, so a failing window is always a
// real violation of the whole history.
//
// The other checkers: NoLostAcks (acknowledged writes survive unless
// possibly replaced later), OneLeaderPerTerm (Raft election safety seen
// from outside), StableIDs (no workload restarted), Converged (every wanted
// workload Running on its agent) and DisconnectedOnlyWhenCut.
package check
