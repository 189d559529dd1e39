// Package fsm is the Raft finite state machine of Grapnel: the numbered
// command types every replica applies in log order, and the snapshot
// format.
//
// An entry is a command's type byte and its body, a protobuf message of
// fsm/proto/commands.proto (generated into fsm/fsmpb), both written by
// Encode from one Command value, so that the two cannot disagree. Each
// type has one entry in the command table (commands.go), retired types
// included: its name, how its body decodes and how it executes. Apply
// decodes the entry with it, then executes the command (Execute); the
// transport refuses a type the table does not know or has retired
// (CheckType), and an
// entry no replica of this version can apply halts the FSM with an error
// instead of crashing the replica (HaltError). Adding a command is
// docs/checklist-new-command.md.
//
// Apply is deterministic: it reads neither the clock nor randomness and
// does no I/O. Whatever must be decided (time, ids, renderings, initial
// states) is decided by the leader and carried in the command.
//
// The leader proposes without waiting for earlier proposals to commit. It
// runs Execute, the same code Apply runs, on a speculative copy of the
// store to plan the next command. A desired-state update carries the
// sequence number it produces and is refused unless it builds on the
// stored state, so an update planned on top of one that failed never
// applies; a refused command changes nothing.
package fsm
