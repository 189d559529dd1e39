// Package problems is the detector of the problems view
// (docs/problems.md): a pure function from the replicated store and the
// few facts only the leader knows (which agents have a stream, which are
// in a grace, the time) to the constraints the cluster cannot satisfy
// now, each a Finding with a kind, a key, the objects involved and a
// short and a long description.
//
// The detector does not number problems or date them: the leader compares
// the findings with the open problems of the store (Diff) and records the
// ones that opened or closed in a replicated entry, which gives them their
// id and their time (state.Problems). It reads no clock and keeps no
// memory, so the same store and facts give the same findings on any
// leader.
//
// More sources plug in as functions of the sources list (detect.go). Two
// inputs are there for sources other parts of the server compute:
// Facts.Shortfalls (the placement allocator's instances it could not
// place: spread impossible, capacity exceeded) and Facts.Maintenance (the
// agents in Maintenance mode, which raise no agent problem).
package problems
