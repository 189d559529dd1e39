// Package cli holds the commands of the grapnel command line, the Ankaios
// `ank` verbs: reading the state as YAML, JSON or tables, applying and
// deleting manifests, running and deleting single workloads, following
// events and logs, and waiting until the workloads a change touched have
// settled.
//
// The logic is kept apart from the connection: table rendering works on
// the Tree view of a complete state, manifest merging and mask building on
// parsed manifests, and wait tracking on workload-state lists, so all of it
// is tested without a server. Commands talk to the server through the Conn
// interface, which *client.Conn implements.
package cli
