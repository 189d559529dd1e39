package rpc

import "strings"

// requestIDSep separates a connection name from the id the connection
// chose. Agents add a second level (workload@id) for control-interface
// requests, so a server-side id may contain several separators.
const requestIDSep = "@"

// PrefixRequestID tags a request id with the connection it came in on, so
// that the response can be routed back: "agent_A" + "wl@42" gives
// "agent_A@wl@42".
func PrefixRequestID(conn, id string) string { return conn + requestIDSep + id }

// SplitRequestID splits a prefixed id at the first "@" into the connection
// name and the id to send back to that connection. ok is false when id has
// no prefix.
func SplitRequestID(id string) (conn, rest string, ok bool) {
	return strings.Cut(id, requestIDSep)
}
