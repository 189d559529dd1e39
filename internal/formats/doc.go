// Package formats lists the formats a Grapnel release understands: the
// types of the entries of the replicated log (fsm), the snapshot's format
// version and record types, and what Grapnel adds to the Ankaios wire
// (fields Ankaios peers skip, gRPC metadata, error reasons, Grapnel's own
// services, and one behaviour). Every program prints them after its
// version line (--version), one per line, so that two releases are
// compared with diff before a rolling upgrade (docs/operations.md,
// "Versions and formats").
//
// It is a leaf package holding a table, not a function of fsm, because
// grapnel-agent must not link fsm (internal/deps) and prints the same
// list: the formats belong to the release, not to one program. The tests
// hold the table to the code in both directions: every entry type and
// record type fsm knows, every Grapnel field of the Ankaios messages,
// every metadata key of rpc/wire, every ErrorInfo reason of rpc/errors.go
// and every method of Grapnel's services, and nothing else.
package formats
