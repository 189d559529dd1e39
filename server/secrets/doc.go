// Package secrets keeps secret config items out of everything a Grapnel
// replica stores or shows. A config item is secret when its key starts
// with Prefix (a naming convention, so that an unmodified Ankaios client
// can write one). The leader seals every string leaf of such an item into
// a token (AES-256-GCM under the active key of the cluster's Keyring,
// with a nonce it draws itself) before it plans an update; the FSM, the
// Raft log, snapshots, the history and the renderings only ever hold the
// tokens. Reads and events show the item as Mask. Where the leader sends
// a rendered runtime config to the agent that runs the workload, Reveal
// swaps every token for its plain text.
//
// Everything random or key-dependent lives here, on the leader: state and
// fsm stay pure and store the tokens as they are given (docs/secrets.md).
package secrets
