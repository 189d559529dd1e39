// Package connlimit bounds the connections a listener hands out: at most
// Limits.PerSource open at once from one source IP address and at most
// Limits.Total in all. A connection over a cap is closed as soon as it is
// accepted, before anything is read from it, counted by reason and logged
// at most once per LogWindow; Accept goes on to the next one, so the
// server behind the listener keeps serving the connections it holds and
// every other source.
//
// It exists because a peer that opens TCP connections and never speaks
// costs the process a file descriptor and a goroutine each until the
// server's own handshake deadline: about 20,000 of them took every
// descriptor a replica had (issue 27), and with them its gossip, its
// metrics and its operators' CLI. The caps keep a flood to a known share
// of the descriptors; the handshake deadlines of the servers behind the
// listener (gRPC's ConnectionTimeout, net/http's ReadHeaderTimeout, the
// Raft port's TLS handshake) free what the caps let in.
//
// A connection counts from Accept until its first Close; later Closes do
// nothing. The source is the remote IP (IPv4-mapped IPv6 as IPv4); a
// remote address without an IP (a Unix socket) is one source.
package connlimit
