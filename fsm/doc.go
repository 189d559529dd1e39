// Package fsm is the Raft finite state machine of Grapnel: the numbered
// command types every replica applies in log order, and the snapshot
// format.
//
// Apply is deterministic: it reads neither the clock nor randomness and
// does no I/O. Whatever must be decided (time, ids, renderings, initial
// states) is decided by the leader and carried in the command.
package fsm
